"""Tool-choice evaluation: does the model pick the expected tool and key arguments? (taught in 06_agent)

The labelled questions live in ``labkit/data/agent_questions.jsonl``: one JSON
object per line with ``question``, the expected ``tool`` (``null`` when no tool is
needed), the key ``arguments`` that must match and, for free-text queries,
``query_contains`` (word stems of which the query must contain at least one).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import pandas as pd

from labkit.agent.planner import PLAN_TOKENS, SYSTEM_PROMPT, check_reply
from labkit.agent.scope import Scope
from labkit.agent.tools import DEFAULT_TOOLS, tool_schema
from labkit.core.corpus import DATA_DIR, DataError, read_records
from labkit.core.text import ERROR_CHARS, shorten
from labkit.models.chat import ask_model

if TYPE_CHECKING:
    from labkit.agent.graph import Agent

__all__ = ["AGENT_QUESTIONS_PATH", "AgentQuestion", "choice_is_correct", "evaluate_tool_choice", "load_agent_questions",
           "evaluate_agent"]

AGENT_QUESTIONS_PATH = DATA_DIR / "agent_questions.jsonl"


class AgentQuestion(NamedTuple):
    """A question with the tool (or None) and key arguments a good planner chooses.

    ``kind`` says what the question tests: ``search`` (search_articles, the query must hold a stem),
    ``count`` (get_metrics on one topic), ``entity`` (search_by_entity with a company and a tone),
    ``no_extra`` (a tool with only one of its filters: adding another one is wrong) or ``none`` (no
    tool). ``split`` is a fixed half of each kind: ``tune`` to improve prompts and tools on,
    ``report`` to measure them on afterwards. Both are empty for files written without them.
    """

    question: str
    tool: str | None
    arguments: dict[str, str]
    query_contains: tuple[str, ...] = ()
    kind: str = ""
    split: str = ""


def load_agent_questions(
    path: str | Path | None = None,
    tools: Sequence[Callable[..., Any]] | None = None,
    split: str | None = None,
) -> list[AgentQuestion]:
    """Read the labelled agent questions (default ``labkit/data/agent_questions.jsonl``). Taught in 06_agent.

    With `tools`, only the questions those tools can answer (or that need no tool) are kept.
    With `split` (``"tune"`` or ``"report"``), only the questions of that half are kept.
    """
    splits = ("tune", "report")
    if split is not None and split not in splits:
        raise ValueError(f"unknown split {split!r}: expected one of {', '.join(splits)}")
    path = Path(path) if path is not None else AGENT_QUESTIONS_PATH
    questions = []
    for number, record in read_records(path):
        question, tool = record.get("question"), record.get("tool")
        if not isinstance(question, str) or not question.strip():
            raise DataError(f"{path}:{number}: 'question' must be a non-empty string")
        if tool is not None and not isinstance(tool, str):
            raise DataError(f"{path}:{number}: 'tool' must be a tool name or null, got {tool!r}")
        arguments = record.get("arguments") or {}
        if not isinstance(arguments, dict):
            raise DataError(f"{path}:{number}: 'arguments' must be an object, got {arguments!r}")
        stems = tuple(record.get("query_contains") or ())
        kind, part = record.get("kind", ""), record.get("split", "")
        if not isinstance(kind, str):
            raise DataError(f"{path}:{number}: 'kind' must be a string, got {kind!r}")
        if part not in ("", *splits):
            raise DataError(f"{path}:{number}: 'split' must be one of {', '.join(splits)}, got {part!r}")
        questions.append(AgentQuestion(question, tool, dict(arguments), stems, kind, part))
    if tools is not None:
        names = {func.__name__ for func in tools}
        questions = [q for q in questions if q.tool is None or q.tool in names]
    if split is not None:
        questions = [q for q in questions if q.split == split]
    return questions


def choice_is_correct(expected: AgentQuestion, tool: str | None, arguments: dict[str, Any]) -> tuple[bool, bool]:
    """(right tool, right key arguments) for one planner choice. Taught in 06_agent."""
    if tool != expected.tool:
        return False, False
    for key, value in expected.arguments.items():
        given = arguments.get(key)
        if not isinstance(given, str) or given.strip().casefold() != value.casefold():
            return True, False
    for key, value in arguments.items():  # a filter the question did not ask for changes the answer
        if key != "query" and key not in expected.arguments and value not in (None, ""):
            return True, False
    if expected.query_contains:
        query = str(arguments.get("query", "")).casefold()
        if not any(stem.casefold() in query for stem in expected.query_contains):
            return True, False
    return True, True


def evaluate_tool_choice(
    chat: Callable[..., Any],
    questions: Sequence[AgentQuestion],
    model: str,
    tools: Sequence[Callable[..., Any]] = DEFAULT_TOOLS,
    *,
    system: str = SYSTEM_PROMPT,
    scope: Scope | None = None,
) -> pd.DataFrame:
    """One planner call per question through `chat` (e.g. ``lab.models.chat``); a row per question.

    Taught in 06_agent. Each row holds the choice after the planner's checks (``check_reply``, with
    the corpus' `scope` when given), its correctness and timing, and the model's own first call before
    the checks (``model_tool``, ``model_arguments``, ``model_correct``): how often the small model
    itself is right, and how often the checks fix it. A model that fails (e.g. does not support tools)
    gives rows with ``error`` filled and ``correct=False`` instead of an exception.
    """
    rows = []
    for q in questions:
        row: dict[str, Any] = {"model": model, "question": q.question, "expected": q.tool or "—"}
        messages = [{"role": "system", "content": system}, {"role": "user", "content": q.question}]
        try:
            reply = ask_model(chat, model, messages, think=False, tools=[tool_schema(t) for t in tools],
                              num_predict=PLAN_TOKENS)
            step = check_reply(reply, messages, tools, scope)
            error, seconds = step.error, round(step.seconds, 2)  # e.g. the model does not support tools
        except Exception as exc:  # noqa: BLE001 (any model failure becomes a row)
            error, seconds = f"{type(exc).__name__}: {exc}", None
        if error:
            row.update(tool="ошибка", arguments={}, tool_ok=False, args_ok=False, correct=False,
                       model_tool="ошибка", model_arguments={}, model_correct=False,
                       error=shorten(error, ERROR_CHARS), seconds=seconds, prompt_tokens=None, eval_tokens=None)
            rows.append(row)
            continue
        first = step.calls[0] if step.calls else {"name": None, "arguments": {}}
        tool_ok, args_ok = choice_is_correct(q, first["name"], first["arguments"])
        own = reply.calls[0] if reply.calls else {"name": None, "arguments": {}}
        row.update(tool=first["name"] or "—", arguments=first["arguments"], tool_ok=tool_ok, args_ok=args_ok,
                   correct=tool_ok and args_ok, model_tool=own["name"] or "—", model_arguments=own["arguments"],
                   model_correct=all(choice_is_correct(q, own["name"], own["arguments"])), error="", seconds=seconds,
                   prompt_tokens=step.prompt_tokens, eval_tokens=step.eval_tokens)
        rows.append(row)
    return pd.DataFrame(rows)


def evaluate_agent(agent: Agent, questions: Sequence[AgentQuestion]) -> pd.DataFrame:
    """The whole agent on each question: its first tool call judged, its answer checked for faithfulness.

    Taught in 06_agent. One row per question: ``correct`` (tool and key arguments, as
    ``choice_is_correct``), ``faithful`` (the answer holds to what the tools returned; None
    when no tool returned data), ``retelling_ok`` (the model's own retelling passed; False means
    the agent quoted the results instead), the answer and the seconds. Every question gets its
    own thread, so one answer never leaks into the next.
    """
    rows = []
    for q in questions:
        result = agent.ask(q.question)
        first = result.tool_calls[0] if result.tool_calls else {"name": None, "arguments": {}}
        tool_ok, args_ok = choice_is_correct(q, first["name"], first["arguments"])
        rows.append({"question": q.question, "kind": q.kind, "expected": q.tool or "—", "tool": first["name"] or "—",
                     "arguments": first["arguments"], "correct": tool_ok and args_ok, "faithful": result.faithful,
                     "retelling_ok": result.retelling_ok, "answer": result.answer,
                     "seconds": round(result.seconds, 2)})
    return pd.DataFrame(rows)
