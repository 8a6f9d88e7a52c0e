"""The supervisor (LangGraph): route, then the document agent, the SQL agent, both chained, or a polite answer.

Design: ``route`` reads the route from the chat model's first-token scores over the enum, calibrated, then
checks that the question speaks the shop's words (``labkit.agent.supervisor.routes``; a server without
log-probabilities answers in JSON, validated by ``parse_route``). "both" runs the data agent first and then the document agent,
each on its own part of the question when it cuts into a rules part and a data part (``split.split_both``): the
answer is the data's rows, then the knowledge base's answer to the rules part. A question that does not cut goes
whole to both, the document agent with the data's answer in its context.
Small talk and out-of-scope get a fixed polite Russian answer, no tool; a request to change data or for the
service's secrets, and an order to drop the instructions, are refused before the model is asked (``refusal_rule``).
Every node appends a trace row.
Services down never raise: the model down gives the plain search results and a Russian ``degraded`` sentence,
the database down one clear line.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypedDict

import pandas as pd

from labkit.agent.markup import strip_markup
from labkit.agent.scope import Scope, corpus_scope
from labkit.agent.sql.schema import describe_schema
from labkit.agent.supervisor.documents import ABSTAIN, DocumentAgent, plain_results
from labkit.agent.supervisor.routes import (
    REACH,
    ROUTES,
    RouteDecision,
    parse_route,
    pick_route,
    reach,
    refusal_rule,
    route_bias,
    route_messages,
    route_scores,
)
from labkit.agent.supervisor.split import BothParts, split_both
from labkit.models.chat import ask_model
from labkit.models.relevance import TOP_LOGPROBS, JudgeUnavailable, first_token_alternatives
from labkit.store.shop.loading import ensure_shop

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig
    from langgraph.graph import StateGraph

    from labkit.core.context import Lab

__all__ = ["MODEL_DOWN", "DB_DOWN", "SECRET_REFUSED", "Supervisor", "SupervisorResult", "TRACE_COLUMNS"]

TRACE_COLUMNS = ["step", "agent", "node", "seconds_model", "seconds_tool", "seconds_graph", "prompt_tokens",
                 "generated_tokens"]
SMALLTALK = "Здравствуйте! Я помощник ТехноМира: отвечаю по базе знаний и по данным магазина. Чем помочь?"
OUT_OF_SCOPE = "Извините, это вне моей области: я отвечаю по базе знаний ТехноМира и по данным его магазина."
CHANGE_REFUSED = ("Я только читаю базу знаний и данные магазина ТехноМира: изменить, удалить или создать в них "
                  "что-либо я не могу и не буду.")
SECRET_REFUSED = ("Пароли, строки подключения и другие служебные данные я не показываю: я отвечаю только по базе "
                  "знаний ТехноМира и по данным его магазина.")
REFUSALS = {"change_request": CHANGE_REFUSED, "secret_request": SECRET_REFUSED}  # by rule; any other: OUT_OF_SCOPE
MODEL_DOWN = "Модель сейчас недоступна, поэтому показаны найденные фрагменты базы знаний без ответа модели."
DATA_MODEL_DOWN = "Модель сейчас недоступна: на вопрос по данным ответить нельзя, попробуйте позже."
DB_DOWN = "База данных сейчас недоступна: ответить нельзя, попробуйте позже."
ROUTE_TOKENS = 30  # the JSON answer of a server without log-probabilities
AGENT_ROUTES = ("documents", "data", "both")  # the routes that run an agent: checked for the shop's words


class SupState(TypedDict, total=False):
    question: str
    kind: str
    route: list[str]
    answer: str
    tool_calls: list[dict[str, Any]]
    citations: list[tuple[int, str]]
    requires_human: bool
    degraded: str
    data_answer: str
    steps: int
    trace: list[dict[str, Any]]  # replaced, not added: a new question on a thread starts a fresh trace
    sources: list[str]  # what the agents read: the chunks' texts and the data agent's answer (faithfulness)


@dataclass
class SupervisorResult:
    question: str
    kind: str
    route: list[str]
    answer: str
    tool_calls: list[dict[str, Any]]
    citations: list[tuple[int, str]]
    requires_human: bool
    degraded: str
    seconds: float
    trace: pd.DataFrame
    thread_id: str
    sources: list[str] = field(default_factory=list)  # what the agents read (not in to_dict: long texts)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields (the trace as records)."""
        return {"question": self.question, "kind": self.kind, "route": self.route, "answer": self.answer,
                "tool_calls": self.tool_calls, "citations": [list(c) for c in self.citations],
                "requires_human": self.requires_human, "degraded": self.degraded, "seconds": round(self.seconds, 3),
                "trace": self.trace.astype(object).where(self.trace.notna(), None).to_dict("records"), "thread_id": self.thread_id}


def _row(agent: str, node: str, graph_seconds: float, model: float = 0.0, tool: float = 0.0,
         prompt: int | None = None, generated: int | None = None) -> dict[str, Any]:
    return {"agent": agent, "node": node, "seconds_model": round(model, 4), "seconds_tool": round(tool, 4),
            "seconds_graph": round(max(graph_seconds - model - tool, 0.0), 4), "prompt_tokens": prompt,
            "generated_tokens": generated}


def _is_db_down(exc: BaseException) -> bool:
    import psycopg

    return isinstance(exc, psycopg.OperationalError)


class Supervisor:
    """Routes a question to the document agent (knowledge base), the SQL agent (shop), both, or neither.

    `kb_lab` is a lab on the knowledge base (``labkit.setup(corpus=KB)``); `lab` itself when it is one.
    `data_agent` defaults to ``SqlAgent(lab)``, opened on first use.
    """

    def __init__(self, lab: Lab, *, chat_model: str | None = None, max_steps: int = 6, checkpointer: Any = None,
                 kb_lab: Lab | None = None, chat: Callable[..., Any] | None = None, data_agent: Any = None,
                 interrupt_before: Sequence[str] = ()) -> None:
        self.lab = lab
        self.model = chat_model or lab.chat_model
        self.chat = chat if chat is not None else lab.models.chat
        self.max_steps = max_steps
        self.kb_lab = kb_lab if kb_lab is not None else lab
        self.documents = DocumentAgent(self.kb_lab, model=self.model, chat=self.chat)
        self._data = data_agent
        ensure_shop(lab)  # the shop's tables and reader role (quick when they are there); students' rows kept
        # `interrupt_before` (node names) stops a run before those nodes, its state saved by the checkpointer
        self.graph = self.build().compile(checkpointer=checkpointer, interrupt_before=list(interrupt_before) or None)

    @property
    def data(self) -> Any:
        if self._data is None:
            from labkit.agent.sql.graph import SqlAgent

            self._data = SqlAgent(self.lab, model=self.model, chat=self.chat)
        return self._data

    def build(self) -> StateGraph:
        from langgraph.graph import END, START, StateGraph

        graph = StateGraph(SupState)
        graph.add_node("route", self._route)
        graph.add_node("data", self._run_data)
        graph.add_node("documents", self._run_documents)
        graph.add_node("polite", self._polite)
        graph.add_edge(START, "route")
        graph.add_conditional_edges("route", self._after_route, ["data", "documents", "polite"])
        graph.add_conditional_edges("data", self._after_data, ["documents", END])
        graph.add_edge("documents", END)
        graph.add_edge("polite", END)
        return graph

    # --- nodes ---------------------------------------------------------------------------------
    @cached_property
    def scope(self) -> Scope:
        """The shop's words: the knowledge base's lexemes and those of the shop database's schema and comments."""
        kb = corpus_scope(self.kb_lab)
        schema_words = kb.analyse(describe_schema(self.lab.conn))
        return Scope(lambda: kb.vocabulary | schema_words, kb.analyse)

    def decide(self, question: str) -> RouteDecision:
        """The route of `question`: the model's calibrated first-token scores, then the reach check. Taught in 20_supervisor.

        Raises what the model client raises when the server is down (the ``route`` node degrades on it).
        """
        rule = refusal_rule(question)
        if rule:  # refused before the model is asked
            return RouteDecision("out_of_scope", False, "", rule=rule)
        reply = ask_model(self.chat, self.model, route_messages(question), think=False, num_predict=1,
                          top_logprobs=TOP_LOGPROBS)
        if reply.error:  # the model cannot answer at all (e.g. not on the server): as if the server were down
            raise ConnectionError(reply.error)
        try:
            scores = route_scores(first_token_alternatives(reply))
            decision = RouteDecision(pick_route(scores, route_bias(self.model)), False, reply.content, scores,
                                     tokens=(reply.prompt_tokens, reply.eval_tokens))
        except JudgeUnavailable:  # a server without log-probabilities: the same prompt, a JSON answer, validated
            reply = ask_model(self.chat, self.model, route_messages(question, "json"), think=False, num_predict=ROUTE_TOKENS)
            decision = parse_route("" if reply.error else reply.content, "documents")
        if decision.route in AGENT_ROUTES:
            share = reach(self.scope.analyse(question), self.scope.vocabulary)
            decision = replace(decision, reach=share)
            if share < REACH:
                decision = replace(decision, route="out_of_scope", rule="reach")
        return decision

    def _route(self, state: SupState) -> dict[str, Any]:
        start = time.perf_counter()
        prompt = generated = None
        try:
            decision = self.decide(state["question"])
            route, degraded, (prompt, generated) = decision.route, "", decision.tokens
        except Exception as exc:  # the model server down or timing out: degrade, never raise
            if _is_db_down(exc):
                raise
            route, degraded = "documents", MODEL_DOWN
        seconds = time.perf_counter() - start
        row = _row("supervisor", "route", seconds, model=seconds, prompt=prompt, generated=generated)
        return {"kind": route, "degraded": degraded, "steps": state.get("steps", 0) + 1,
                "trace": [*state.get("trace", []), row]}

    @staticmethod
    def _parts(state: SupState) -> BothParts | None:
        """For the «both» route, the question cut into the rules part and the data part (``split_both``)."""
        return split_both(state["question"]) if state.get("kind") == "both" else None

    def _after_route(self, state: SupState) -> str:
        kind = state["kind"]
        if kind in ("smalltalk", "out_of_scope"):
            return "polite"
        return "data" if kind in ("data", "both") else "documents"

    def _polite(self, state: SupState) -> dict[str, Any]:
        answer = SMALLTALK if state["kind"] == "smalltalk" else REFUSALS.get(refusal_rule(state["question"]), OUT_OF_SCOPE)
        return {"answer": answer, "route": [], "steps": state.get("steps", 0) + 1,
                "trace": [*state.get("trace", []), _row("supervisor", "polite", 0.0)]}

    def _run_data(self, state: SupState) -> dict[str, Any]:
        start = time.perf_counter()
        parts = self._parts(state)
        result = self.data.ask(parts.data if parts else state["question"])
        calls = [{"agent": "data", "tool": "run_sql", "arguments": dict(c["arguments"]), "sql": c["arguments"].get("sql"),
                  "rows": c.get("rows"), "error": c.get("error"), "hits": None} for c in result.tool_calls()]
        trace = result.trace
        model_s = float(trace.loc[trace["node"] == "write_sql", "seconds"].sum()) if len(trace) else 0.0
        tool_s = float(trace.loc[trace["node"] == "run_sql", "seconds"].sum()) if len(trace) else 0.0
        degraded = state.get("degraded", "")
        answer = strip_markup(result.answer)
        if result.failure:
            degraded = DATA_MODEL_DOWN if result.answer.startswith("Модель") else DB_DOWN
            answer = degraded
        written = trace[trace["node"] == "write_sql"] if len(trace) else trace
        tokens = [int(written[c].sum()) if len(written) and written[c].notna().any() else None
                  for c in ("prompt_tokens", "eval_tokens")]
        row = _row("data", "sql_agent", time.perf_counter() - start, model=model_s, tool=tool_s, prompt=tokens[0],
                   generated=tokens[1])
        return {"route": [*state.get("route", []), "data"], "tool_calls": [*state.get("tool_calls", []), *calls],
                "answer": answer, "data_answer": answer, "requires_human": bool(result.requires_human),
                "sources": [*state.get("sources", []), answer],
                "degraded": degraded, "steps": state.get("steps", 0) + 1, "trace": [*state.get("trace", []), row]}

    def _after_data(self, state: SupState) -> str:
        from langgraph.graph import END

        if state["kind"] == "both" and state.get("steps", 0) < self.max_steps and not state.get("degraded"):
            return "documents"
        return END

    def _run_documents(self, state: SupState) -> dict[str, Any]:
        start = time.perf_counter()
        parts = self._parts(state)
        asked = parts.documents if parts else state["question"]  # «both»: the rules part; the data part has its rows
        try:
            chunks = self.documents.search(asked)
        except Exception as exc:  # the knowledge base unreachable: one clear line
            if not _is_db_down(exc):
                raise
            return {"route": [*state.get("route", []), "documents"], "answer": DB_DOWN, "degraded": DB_DOWN,
                    "requires_human": True, "steps": state.get("steps", 0) + 1,
                    "trace": [*state.get("trace", []), _row("documents", "search_kb", time.perf_counter() - start)]}
        tool_s = time.perf_counter() - start
        call = {"agent": "documents", "tool": "search_kb", "arguments": {"query": asked}, "sql": None,
                "rows": None, "error": None, "hits": list(dict.fromkeys(c.doc_id for c in chunks))}
        update: dict[str, Any] = {"route": [*state.get("route", []), "documents"],
                                  "tool_calls": [*state.get("tool_calls", []), call],
                                  "sources": [*state.get("sources", []), *(c.text for c in chunks)],
                                  "steps": state.get("steps", 0) + 1}
        if state.get("degraded"):
            update |= {"answer": f"{state['degraded']}\n{plain_results(chunks)}" if chunks else
                       f"{state['degraded']} {ABSTAIN}", "citations": [(c.doc_id, c.section) for c in chunks]}
            update["trace"] = [*state.get("trace", []), _row("documents", "search_kb", time.perf_counter() - start, tool=tool_s)]
            return update
        try:
            doc = self.documents.answer(asked, chunks, "" if parts else state.get("data_answer", ""))
        except Exception:  # noqa: BLE001 - the model server down or timing out: plain results
            update |= {"answer": f"{MODEL_DOWN}\n{plain_results(chunks)}", "degraded": MODEL_DOWN,
                       "citations": [(c.doc_id, c.section) for c in chunks]}
            update["trace"] = [*state.get("trace", []), _row("documents", "answer", time.perf_counter() - start, tool=tool_s)]
            return update
        answer = doc.answer
        if state.get("data_answer") and state["data_answer"] not in answer:
            answer = f"{state['data_answer']}\n{answer}"
        rows = []
        if doc.check is not None:  # the check is a model call of its own: its own row, its own tokens
            rows.append(_row("documents", "check", doc.check.seconds, model=doc.check.seconds,
                             prompt=doc.check.prompt_tokens, generated=doc.check.eval_tokens))
        elapsed = time.perf_counter() - start - (doc.check.seconds if doc.check is not None else 0.0)
        rows.append(_row("documents", "answer", elapsed, model=doc.seconds_model, tool=tool_s, prompt=doc.prompt_tokens,
                         generated=doc.generated_tokens))
        update |= {"answer": answer, "citations": doc.citations, "trace": [*state.get("trace", []), *rows]}
        return update

    # --- public --------------------------------------------------------------------------------
    def _config(self, thread_id: str) -> RunnableConfig:
        return {"configurable": {"thread_id": thread_id}, "recursion_limit": self.max_steps + 2}

    def ask(self, question: str, thread_id: str | None = None, *, resume: bool = False) -> SupervisorResult:
        """Answer one question; never raises for the model or the database being unavailable.

        With `resume` (and a checkpointer), a run interrupted on `thread_id` continues from its last checkpoint.
        """
        thread_id = thread_id or uuid.uuid4().hex[:12]
        config = self._config(thread_id)
        start = time.perf_counter()
        initial: SupState | None = None if resume else {
            "question": question, "kind": "", "route": [], "answer": "", "tool_calls": [], "citations": [],
            "requires_human": False, "degraded": "", "data_answer": "", "steps": 0, "trace": [], "sources": []}
        state: dict[str, Any] = dict(initial or {"question": question})
        try:
            for values in self.graph.stream(initial, config, stream_mode="values"):
                state = values
        except Exception as exc:  # noqa: BLE001 - never a traceback for the student
            line = DB_DOWN if _is_db_down(exc) else f"Не удалось ответить: {type(exc).__name__}."
            state = {**state, "answer": line, "degraded": line, "requires_human": True}
        return self._result(question, state, thread_id, time.perf_counter() - start)

    def _result(self, question: str, state: dict[str, Any], thread_id: str, seconds: float) -> SupervisorResult:
        kind = state.get("kind") or "documents"
        if kind not in ROUTES:
            raise ValueError(f"kind {kind!r} is not one of {ROUTES}")
        trace = pd.DataFrame(state.get("trace", []), columns=TRACE_COLUMNS[1:])
        trace.insert(0, "step", range(1, len(trace) + 1))
        return SupervisorResult(
            question=state.get("question", question), kind=kind, route=list(state.get("route", [])),
            answer=strip_markup(state.get("answer", "")), tool_calls=list(state.get("tool_calls", [])),
            citations=[tuple(c) for c in state.get("citations", [])],
            requires_human=bool(state.get("requires_human")), degraded=state.get("degraded", ""),
            seconds=seconds, trace=trace, thread_id=thread_id, sources=list(state.get("sources", [])))

    def close(self) -> None:
        if self._data is not None:
            self._data.close()
