"""The LangGraph agent: planner -> tools -> finalizer, bounded self-correction, Postgres checkpoints.

Taught in 06_agent. The planner talks to the model through the official ``ollama``
client (no LangChain wrapper). A tool error goes back to the planner with the
error text; after ``max_errors`` errors the graph stops honestly with
``requires_human=True``. A planner reply with neither a call nor text (its call was
small talk's, or it was only markup) goes to ``reply``, one answer without tools.
The answer cites the news it retells (``[12]``) and is checked against them. Every
run of a thread is checkpointed in the lab database, so a thread can be continued
after a kernel restart.
"""

from __future__ import annotations

import json
import operator
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, TypedDict

import pandas as pd
import psycopg
from psycopg.rows import dict_row

from labkit.agent.faithfulness import check_answer, cited_ids, extractive_answer, off_topic_answer, retrieved_ids
from labkit.agent.markup import strip_markup
from labkit.agent.planner import ANSWER_TOKENS, FINAL_PROMPT, PLAN_TOKENS, REPLY_PROMPT, SYSTEM_PROMPT, plan
from labkit.agent.routing import names_tool_values
from labkit.agent.scope import corpus_scope
from labkit.agent.tools import DEFAULT_TOOLS, call_tool, format_result, tool_schema
from labkit.core.settings import Settings
from labkit.core.text import ERROR_CHARS, PREVIEW_CHARS, shorten
from labkit.store.connection import connection_options
from labkit.store.locks import CHECKPOINT_LOCK, advisory_lock

if TYPE_CHECKING:  # langgraph is imported lazily: `import labkit` must stay fast for the CLI
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import BaseCheckpointSaver
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.graph import StateGraph

    from labkit.core.context import Lab

__all__ = ["Agent", "AgentResult", "open_checkpointer", "planner_context", "estimate_tokens",
           "CONTEXT_TOKENS", "HISTORY_TOKENS"]

# Tokens of the chat model's window the planner may fill: the embedded server loads every chat
# model with 4096 (``--num-ctx``), as does Ollama by default. A longer request fails (embedded
# server) or is cut from the front without a word (Ollama), so the planner's context is trimmed first.
TRACE_PREVIEW_CHARS = 80  # a preview in trace_table: within pandas' column width, so pandas never cuts a word
CONTEXT_TOKENS = 4096
HISTORY_TOKENS = 1024  # at most this many (estimated) tokens of earlier questions: a follow-up needs the last few
CHARS_PER_TOKEN = 2  # a low estimate on purpose: Russian text takes ~3 characters per token, digits and code fewer

SILENT_ANSWER = "Модель не вызвала инструмент и не дала ответа; вопрос передан человеку."
GIVE_UP_ANSWER = (
    "Не удалось получить данные: инструменты вернули ошибку (попыток: {errors}; последняя: {last}). "
    "Ответ без данных был бы выдумкой, поэтому вопрос передан человеку."
)
RECURSION_ANSWER = "Агент не уложился в {limit} шагов графа и остановлен; вопрос передан человеку."
MODEL_DOWN_ANSWER = "Модель не ответила ({error}); агент остановлен, вопрос передан человеку."


class AgentState(TypedDict, total=False):
    """Graph state. ``messages`` is the thread's history; the other fields describe the current turn."""

    messages: Annotated[list[dict[str, Any]], operator.add]
    question: str
    trace: list[dict[str, Any]]
    tool_calls: list[dict[str, Any]]
    results: list[str]
    errors: int
    failed: bool
    last_error: str
    answer: str
    requires_human: bool
    retelling_ok: bool | None  # the model's retelling passed check_answer (False: the answer quotes instead)
    model_error: str  # the model server failed or the model cannot take tools: the turn ended without data


@dataclass
class AgentResult:
    """What one question produced: the answer, the tool calls, the trace and the honesty flag."""

    question: str
    answer: str
    tool_calls: list[dict[str, Any]]
    requires_human: bool
    errors: int
    trace: pd.DataFrame
    seconds: float
    thread_id: str
    sources: list[str] = field(default_factory=list)  # what the successful tool calls returned
    retelling_ok: bool | None = None  # the model's retelling passed the check (None: no retelling was made)
    model_error: str = ""  # why the model did not answer (server down, model missing, no tool support), else ""

    @property
    def faithful(self) -> bool | None:
        """Does the answer hold to the sources and cite them (``check_answer``)? None when no tool returned data
        or the agent handed the question to a human (its message reports the failure, not the data)."""
        if not self.sources or self.requires_human:
            return None
        return check_answer(self.answer, self.sources, self.question).ok

    @property
    def cited(self) -> list[int]:
        """The news ids the answer cites."""
        return cited_ids(self.answer)

    @property
    def retrieved(self) -> list[int]:
        """The ids of the news the tools returned."""
        return retrieved_ids(self.sources)

    def trace_table(self, width: int = TRACE_PREVIEW_CHARS) -> pd.DataFrame:
        """The trace for people: Russian headers, «да»/«нет», arguments as ``key=value``, empty cells for steps
        that made no model request, previews cut at a word boundary to `width` characters. Taught in 06_agent."""
        frame = self.trace
        return pd.DataFrame({
            "узел": frame["node"],
            "инструмент": frame["tool"],
            "аргументы": [_arguments_text(a) for a in frame["arguments"]],
            "успех": [_yes_no(ok) for ok in frame["ok"]],
            "результат": [shorten(p, width) for p in frame["preview"]],
            "секунд": frame["seconds"].round(2),
            "токенов промпта": [_count_text(v) for v in frame["prompt_tokens"]],
            "токенов ответа": [_count_text(v) for v in frame["eval_tokens"]],
        })

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (used by ``./run.sh ask --json``)."""
        return {
            "question": self.question,
            "tool_calls": [{"name": c["name"], "arguments": c["arguments"]} for c in self.tool_calls],
            "answer": self.answer,
            "requires_human": self.requires_human,
            "errors": self.errors,
            "thread_id": self.thread_id,
            "trace": self.trace.to_dict(orient="records"),
            "seconds": round(self.seconds, 3),
            "faithful": self.faithful,
            "retelling_ok": self.retelling_ok,
            "cited_ids": self.cited,
            "retrieved_ids": self.retrieved,
        }


def _arguments_text(arguments: Any) -> str:
    """A call's arguments as «key=value, ...»; several calls joined with «; »."""
    if isinstance(arguments, dict):
        return ", ".join(f"{key}={value}" for key, value in arguments.items())
    if isinstance(arguments, list):
        return "; ".join(_arguments_text(a) for a in arguments)
    return "" if arguments is None else str(arguments)


def _yes_no(value: Any) -> str:
    """«да», «нет», or empty for a step without an outcome (None, NaN)."""
    if value is None or (isinstance(value, float) and value != value):
        return ""
    return "да" if bool(value) else "нет"


def _count_text(value: Any) -> str:
    """A token count as text, empty where the step made no model request."""
    return "" if value is None or pd.isna(value) else str(int(value))


def open_checkpointer(settings: Settings) -> PostgresSaver:
    """A LangGraph PostgresSaver on its own connection to the lab database, tables set up. Taught in 06_agent."""
    from langgraph.checkpoint.postgres import PostgresSaver

    if not settings.database_url:
        raise ValueError("settings.database_url is not set: build the lab with labkit.setup()")
    conn = psycopg.connect(settings.database_url, autocommit=True, prepare_threshold=0, row_factory=dict_row,
                           **connection_options(settings.database_url))
    saver = PostgresSaver(conn)
    with advisory_lock(conn, CHECKPOINT_LOCK):  # two kernels may set up at once
        saver.setup()
    return saver


def _row(node: str, seconds: float, *, tool: str = "", arguments: Any = None, ok: bool | None = None,
         preview: str = "", prompt_tokens: int | None = None, eval_tokens: int | None = None) -> dict[str, Any]:
    """One trace row; ``preview`` is cut to PREVIEW_CHARS at a word boundary."""
    return {"node": node, "tool": tool, "arguments": arguments if arguments is not None else {},
            "ok": ok, "preview": shorten(preview, PREVIEW_CHARS),
            "seconds": round(seconds, 3), "prompt_tokens": prompt_tokens, "eval_tokens": eval_tokens}


def _unretold(state: AgentState, answer: str) -> dict[str, Any]:
    """The finalizer's update for an answer the model did not write (a count, nothing found, an off-topic search)."""
    row = _row("finalizer", 0.0, preview=answer)
    return {"messages": [{"role": "assistant", "content": answer}], "answer": answer,
            "trace": [*state["trace"], row], "retelling_ok": None}


def estimate_tokens(item: Any) -> int:
    """A generous token count of a message, a tool schema or text: ``CHARS_PER_TOKEN`` characters per token."""
    text = item if isinstance(item, str) else json.dumps(item, ensure_ascii=False, default=str)
    return len(text) // CHARS_PER_TOKEN + 4  # + the chat template's markers around a message


def planner_context(
    system: str,
    messages: Sequence[dict[str, Any]],
    tools: Sequence[Callable[..., Any]] = (),
    history_tokens: int = HISTORY_TOKENS,
    context_tokens: int = CONTEXT_TOKENS,
) -> list[dict[str, Any]]:
    """What the planner reads: the system prompt, the latest earlier questions, then the current turn.

    Taught in 06_agent. Earlier answers and tool results stay in the checkpoint but are not
    shown: given «В базе 7 новостей про спорт», the 1.5B model answered «А про финансы?» by
    copying the pattern with an invented number instead of calling get_metrics. Earlier
    questions are kept newest first while they fit `history_tokens` and, with the system
    prompt, the `tools` schemas, the current turn and the reply, the model's `context_tokens`;
    older ones are left out, so a long thread keeps working instead of overflowing the window.
    """
    start = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=0)
    current = list(messages[start:])
    fixed = (estimate_tokens(system) + sum(estimate_tokens(tool_schema(t)) for t in tools)
             + sum(estimate_tokens(m) for m in current) + PLAN_TOKENS)
    budget = min(history_tokens, context_tokens - fixed)
    earlier: list[dict[str, Any]] = []
    for message in reversed([m for m in messages[:start] if m["role"] == "user"]):
        budget -= estimate_tokens(message)
        if budget < 0:
            break
        earlier.insert(0, message)
    return [{"role": "system", "content": system}, *earlier, *current]


def _trace_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The trace as a DataFrame with integer token columns (empty cells where a step made no request)."""
    frame = pd.DataFrame(rows, columns=list(_row("", 0.0)))
    return frame.astype({"prompt_tokens": "Int64", "eval_tokens": "Int64"})


class Agent:
    """The lesson's agent; model, tools and system prompt are parameters so 08 and 09 reuse it.

    Taught in 06_agent. Tools run on ``lab``; ``chat`` defaults to the lab's model client
    (``lab.models.chat``); ``checkpointer`` defaults to a PostgresSaver in the lab database
    on a connection of its own, closed by ``close()``. With ``scope`` (the default) the planner's
    calls are also checked against what the corpus is about (``labkit.agent.routing.check_scope``).
    """

    def __init__(
        self,
        lab: Lab,
        *,
        model: str | None = None,
        tools: Sequence[Callable[..., Any]] = DEFAULT_TOOLS,
        system: str = SYSTEM_PROMPT,
        checkpointer: BaseCheckpointSaver[Any] | None = None,
        chat: Callable[..., Any] | None = None,
        max_errors: int = 3,
        recursion_limit: int = 16,
        scope: bool = True,
    ) -> None:
        self.lab = lab
        self.model = model or lab.chat_model
        self.tools = list(tools)
        self.system = system
        self.chat = chat if chat is not None else lab.models.chat
        self.max_errors = max_errors
        self.recursion_limit = recursion_limit
        self.scope = corpus_scope(lab) if scope else None
        self._owns_checkpointer = checkpointer is None
        self.checkpointer = checkpointer if checkpointer is not None else open_checkpointer(lab.settings)
        self.graph = self._build().compile(checkpointer=self.checkpointer)

    def _build(self) -> StateGraph:
        from langgraph.graph import END, START, StateGraph

        graph = StateGraph(AgentState)
        graph.add_node("planner", self._planner)
        graph.add_node("tools", self._tools)
        graph.add_node("finalizer", self._finalizer)
        graph.add_node("reply", self._reply)
        graph.add_node("give_up", self._give_up)
        graph.add_edge(START, "planner")
        graph.add_conditional_edges("planner", self._after_planner,
                                    {"tools": "tools", "reply": "reply", "give_up": "give_up", "__end__": END})
        graph.add_conditional_edges("tools", self._after_tools, ["planner", "finalizer", "give_up"])
        graph.add_conditional_edges("reply", self._after_reply, {"give_up": "give_up", "__end__": END})
        graph.add_edge("finalizer", END)
        graph.add_edge("give_up", END)
        return graph

    # --- nodes -------------------------------------------------------------------------------
    def _planner(self, state: AgentState) -> dict[str, Any]:
        step = plan(self.chat, self.model, planner_context(self.system, state["messages"], self.tools), self.tools,
                    scope=self.scope)
        message: dict[str, Any] = {"role": "assistant", "content": step.content}
        if step.calls:
            message["tool_calls"] = [{"function": call} for call in step.calls]
        arguments = [c["arguments"] for c in step.calls]
        row = _row("planner", step.seconds, tool=", ".join(c["name"] for c in step.calls),
                   arguments=arguments[0] if len(arguments) == 1 else arguments or None,
                   preview=step.content, prompt_tokens=step.prompt_tokens, eval_tokens=step.eval_tokens)
        update: dict[str, Any] = {"messages": [message], "trace": [*state["trace"], row]}
        if step.error:  # the model cannot take tools at all: say so instead of ending mute
            message["content"] = update["answer"] = update["model_error"] = step.error
            update["requires_human"] = True
            row["preview"] = shorten(step.error, PREVIEW_CHARS)
        elif not step.calls:
            update["answer"] = step.content
        return update

    def _tools(self, state: AgentState) -> dict[str, Any]:
        calls = state["messages"][-1]["tool_calls"]
        messages, rows, made, results = [], [], [], list(state["results"])
        failed, last_error = False, state.get("last_error", "")
        for call in calls:
            name, arguments = call["function"]["name"], call["function"]["arguments"]
            result = call_tool(name, arguments, lab=self.lab, tools=self.tools)
            failed = failed or not result.ok
            last_error = result.error or last_error
            messages.append({"role": "tool", "tool_name": str(name), "content": result.content})
            rows.append(_row("tools", result.seconds, tool=str(name), arguments=arguments, ok=result.ok,
                             preview=result.content))
            made.append({"name": name, "arguments": arguments, "ok": result.ok})
            if result.ok:
                results.append(result.content)  # no tool name: the 1.5B model then retold "get_metrics"
        return {"messages": messages, "trace": [*state["trace"], *rows], "results": results,
                "tool_calls": [*state["tool_calls"], *made], "failed": failed, "last_error": last_error,
                "errors": state["errors"] + int(failed)}

    def _reply(self, state: AgentState) -> dict[str, Any]:
        """An answer without tools, when the planner's reply had neither a call nor text."""
        asked = [m for m in state["messages"] if m["role"] == "user"]
        step = plan(self.chat, self.model, planner_context(REPLY_PROMPT, asked), tools=[], num_predict=ANSWER_TOKENS)
        row = _row("reply", step.seconds, preview=step.content or step.error,
                   prompt_tokens=step.prompt_tokens, eval_tokens=step.eval_tokens)
        return {"messages": [{"role": "assistant", "content": step.content}], "answer": step.content,
                "trace": [*state["trace"], row]}

    def _finalizer(self, state: AgentState) -> dict[str, Any]:
        """The answer: counts are read out as they are; retold news are checked (with their citations), else quoted."""
        results, question = state["results"], state["question"]
        counted = all(c["name"] == "get_metrics" for c in state["tool_calls"] if c["ok"])
        if counted or all(r == format_result([]) for r in results):  # a count (or nothing) needs no retelling
            return _unretold(state, " ".join(results))
        searched = [str(c["arguments"].get("query") or "") if isinstance(c["arguments"], dict) else ""
                    for c in state["tool_calls"] if c["ok"]]
        if (self.scope is not None and searched and all(q and self.scope.foreign(q) for q in searched)
                and not names_tool_values(question, self.tools)):  # «спорт» is a topic, though no news says the word
            return _unretold(state, off_topic_answer(searched, results))  # neighbours of a subject the news never name
        prompt = "Данные из базы:\n" + "\n".join(results) + f"\n\nВопрос: {question}"
        messages = [{"role": "system", "content": FINAL_PROMPT}, {"role": "user", "content": prompt}]
        step = plan(self.chat, self.model, messages, tools=[], num_predict=ANSWER_TOKENS)  # no tools: text only
        verdict = check_answer(step.content, results, question)
        answer = step.content if verdict.ok and step.content else extractive_answer(results)
        preview = answer if verdict.ok else f"{answer} (пересказ отброшен: {'; '.join(verdict.problems[:2])})"
        row = _row("finalizer", step.seconds, preview=preview,
                   prompt_tokens=step.prompt_tokens, eval_tokens=step.eval_tokens)
        return {"messages": [{"role": "assistant", "content": answer}], "answer": answer,
                "trace": [*state["trace"], row], "retelling_ok": verdict.ok}

    def _give_up(self, state: AgentState) -> dict[str, Any]:
        if state["errors"]:
            answer = GIVE_UP_ANSWER.format(errors=state["errors"],
                                           last=shorten(state.get("last_error", ""), ERROR_CHARS).rstrip("."))
        else:
            answer = SILENT_ANSWER
        row = _row("give_up", 0.0, preview=answer)
        return {"messages": [{"role": "assistant", "content": answer}], "answer": answer,
                "requires_human": True, "trace": [*state["trace"], row]}

    # --- routing ------------------------------------------------------------------------------
    @staticmethod
    def _after_planner(state: AgentState) -> str:
        last = state["messages"][-1]
        if last.get("tool_calls"):
            return "tools"
        return "__end__" if last["content"] else "reply"  # no call and no text: one answer without tools

    @staticmethod
    def _after_reply(state: AgentState) -> str:
        return "__end__" if state["messages"][-1]["content"] else "give_up"  # still mute: say so, do not end mute

    def _after_tools(self, state: AgentState) -> str:
        if not state["failed"]:
            return "finalizer"
        return "give_up" if state["errors"] >= self.max_errors else "planner"

    # --- public -------------------------------------------------------------------------------
    def ask(self, question: str, thread_id: str | None = None) -> AgentResult:
        """Run one question (a new turn of ``thread_id`` if given) and return the result. Taught in 06_agent."""
        from httpx import TransportError
        from langgraph.errors import GraphRecursionError
        from ollama import ResponseError

        thread_id = thread_id or uuid.uuid4().hex[:12]
        config: RunnableConfig = {"configurable": {"thread_id": thread_id}, "recursion_limit": self.recursion_limit}
        turn: AgentState = {"messages": [{"role": "user", "content": question}], "question": question,
                            "trace": [], "tool_calls": [], "results": [], "errors": 0, "failed": False,
                            "last_error": "",
                            "answer": "", "requires_human": False, "retelling_ok": None, "model_error": ""}
        start = time.perf_counter()
        state: dict[str, Any] = dict(turn)
        try:
            for values in self.graph.stream(turn, config, stream_mode="values"):
                state = values  # the last values are the end state; a failure keeps the state before it
        except GraphRecursionError:
            state = {**state, "answer": RECURSION_ANSWER.format(limit=self.recursion_limit),
                     "requires_human": True}
        except (ResponseError, ConnectionError, TransportError) as exc:  # no such model, no tools, server gone
            error = shorten(f"{type(exc).__name__}: {' '.join(str(exc).split())}", ERROR_CHARS)
            state = {**state, "answer": MODEL_DOWN_ANSWER.format(error=error), "requires_human": True,
                     "model_error": error}
        return AgentResult(
            question=question,
            answer=strip_markup(state.get("answer", "")) or SILENT_ANSWER,  # no model markup ever reaches a person
            tool_calls=state.get("tool_calls", []),
            requires_human=bool(state.get("requires_human")),
            errors=state.get("errors", 0),
            trace=_trace_frame(state.get("trace", [])),
            seconds=time.perf_counter() - start,
            thread_id=thread_id,
            sources=list(state.get("results", [])),
            retelling_ok=state.get("retelling_ok"),
            model_error=state.get("model_error", ""),
        )

    def history(self, thread_id: str) -> list[dict[str, Any]]:
        """The saved messages of a thread (read back from the checkpointer). Taught in 06_agent."""
        return list(self.graph.get_state({"configurable": {"thread_id": thread_id}}).values.get("messages", []))

    def close(self) -> None:
        """Close the checkpointer's connection if the agent opened it (the lab stays open)."""
        saver_conn = getattr(self.checkpointer, "conn", None)
        if self._owns_checkpointer and isinstance(saver_conn, psycopg.Connection):
            saver_conn.close()
