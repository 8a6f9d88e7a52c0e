"""The agent's tools: typed functions, the JSON schema the model sees, safe calls (taught in 06_agent).

A tool is a plain function ``tool(lab, **arguments)``: its first parameter receives
the lab context and is not shown to the model. Its signature and its docstring are
the single source of truth: ``tool_schema`` turns them into the JSON schema sent to
the model (``Literal`` types become enums, ``X | None`` arguments are optional) and
``call_tool`` checks model-supplied arguments against the same signature before
any SQL runs.
"""

from __future__ import annotations

import inspect
import json
import time
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from psycopg import sql

from labkit.core.context import Lab  # at run time: tool_schema resolves the tools' type hints
from labkit.core.corpora.news import COMPANIES, TONE_NAMES, TONES, TOPIC_GLOSSES, TOPIC_NAMES, TOPICS
from labkit.core.text import ERROR_CHARS, VALUE_CHARS, count, shorten
from labkit.retrieval.fusion import search_hybrid

__all__ = [
    "DEFAULT_TOOLS",
    "ENUM_GLOSSES",
    "MAX_STRING_LENGTH",
    "Company",
    "Tone",
    "ToolResult",
    "Topic",
    "call_tool",
    "format_result",
    "get_metrics",
    "search_articles",
    "tool_schema",
]

# Built from the news corpus, so the enums the model sees always match the data. The tools read the
# documents from the lab's corpus (lab.corpus), which must have these fields.
Topic = Literal[TOPICS]  # type: ignore[valid-type]
Company = Literal[COMPANIES]  # type: ignore[valid-type]
Tone = Literal[TONES]  # type: ignore[valid-type]

MAX_STRING_LENGTH = 200  # longer model-supplied strings are refused
# Russian glosses of the enum codes, shown to the model in the schema: it reads Russian questions,
# and «нефть и металлы» or «ключевая ставка» name no code. The topics' glosses live in labkit.core.corpora.news
# (the fielded search branch embeds them too); a new code without a gloss fails there at import.
ENUM_GLOSSES: dict[str, str] = {
    **TOPIC_GLOSSES,
    "positive": "позитивные, хорошие новости",
    "negative": "негативные, плохие новости",
    "neutral": "нейтральные новости",
}
_unglossed = [code for code in TONES if code not in ENUM_GLOSSES]
if _unglossed:  # a new code in the data needs a gloss the model can match to a Russian question
    raise RuntimeError(f"no Russian gloss for {_unglossed}: add it to ENUM_GLOSSES in labkit/agent/tools.py")
TOP_K = 3  # search_articles returns this many documents


def search_articles(lab: Lab, query: str) -> list[dict[str, Any]]:
    """Hybrid search (meaning + words) over the news; use it for questions about what the news say.

    Taught in 06_agent.

    Args:
        query: search query in Russian, a few key words from the question
    """
    hits = search_hybrid(lab, query, top_k=TOP_K)
    if not hits:
        return []
    corpus = lab.corpus
    with lab.conn.cursor() as cur:
        cur.execute(sql.SQL("SELECT id, {text} FROM {table} WHERE id = ANY(%(ids)s)").format(
            text=sql.Identifier(corpus.text_column), table=sql.Identifier(corpus.table)), {"ids": [h.doc_id for h in hits]})
        text = dict(cur.fetchall())
    return [{"id": h.doc_id, "text": text[h.doc_id]} for h in hits if h.doc_id in text]


def get_metrics(lab: Lab, topic: Topic) -> dict[str, Any]:
    """Count the news on one topic; use it for questions like 'how many news about ...'.

    Taught in 06_agent.

    Args:
        topic: topic of the news
    """
    row = lab.conn.execute(sql.SQL("SELECT count(*) FROM {} WHERE topic = %(topic)s").format(
        sql.Identifier(lab.corpus.table)), {"topic": topic}).fetchone()
    count = row[0] if row else 0
    return {"topic": topic, "count": count}


DEFAULT_TOOLS: tuple[Callable[..., Any], ...] = (search_articles, get_metrics)  # 09: students write the third


@dataclass(frozen=True)
class _Param:
    """One model-visible argument of a tool, read from the signature."""

    name: str
    required: bool
    enum: tuple[str, ...] | None
    description: str


def _params(func: Callable[..., Any]) -> list[_Param]:
    """Read the model-visible arguments (all but the first, the lab) from a tool's signature and docstring."""
    hints = typing.get_type_hints(func)
    docs = _arg_docs(inspect.getdoc(func) or "")
    params = []
    for name, param in list(inspect.signature(func).parameters.items())[1:]:
        hint = hints.get(name, str)
        args = typing.get_args(hint)
        optional = typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in args
        if optional:
            hint = next(a for a in args if a is not type(None))
        enum = tuple(typing.get_args(hint)) if typing.get_origin(hint) is Literal else None
        required = param.default is inspect.Parameter.empty and not optional
        params.append(_Param(name, required, enum, docs.get(name, "")))
    return params


def _arg_docs(doc: str) -> dict[str, str]:
    """Parse the ``Args:`` section of a Google-style docstring into {name: description}."""
    result: dict[str, str] = {}
    in_args = False
    for line in doc.splitlines():
        stripped = line.strip()
        if stripped.lower() == "args:":
            in_args = True
        elif in_args and ":" in stripped:
            name, _, text = stripped.partition(":")
            result[name.strip()] = text.strip()
        elif in_args and stripped.endswith(":"):
            in_args = False
    return result


def tool_schema(func: Callable[..., Any]) -> dict[str, Any]:
    """The JSON schema the model sees for one tool function. Taught in 06_agent."""
    params = _params(func)
    properties: dict[str, Any] = {}
    for p in params:
        prop: dict[str, Any] = {"type": "string", "description": p.description}
        if p.enum:
            prop["enum"] = list(p.enum)
            glossed = [f"{value} — {ENUM_GLOSSES[value]}" for value in p.enum if value in ENUM_GLOSSES]
            if glossed:
                prop["description"] = f"{p.description}. Значения: " + "; ".join(glossed)
        properties[p.name] = prop
    summary = (inspect.getdoc(func) or func.__name__).split("\n\n")[0].replace("\n", " ")
    return {
        "type": "function",
        "function": {
            "name": func.__name__,
            "description": summary,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": [p.name for p in params if p.required],
            },
        },
    }


@dataclass
class ToolResult:
    """Outcome of one tool call: ``content`` is the text the model reads (the data or the error)."""

    name: str
    arguments: dict[str, Any]
    ok: bool
    content: str
    data: Any = None
    error: str | None = None
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


def _describe(value: Any) -> str:
    """Name the JSON type of a model-supplied value in Russian."""
    kinds = {bool: "логическое значение", int: "число", float: "число", list: "список", dict: "объект"}
    shown = shorten(json.dumps(value, ensure_ascii=False), VALUE_CHARS)
    return f"{kinds.get(type(value), type(value).__name__)} {shown}"


def _validate(func: Callable[..., Any], arguments: Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
    """Return (clean arguments, None) or ({}, Russian error message); never touches the database."""
    params = {p.name: p for p in _params(func)}
    name = func.__name__
    allowed = ", ".join(params) or "без аргументов"
    extra = [key for key in arguments if key not in params]
    if extra:
        return {}, f"У инструмента {name} нет аргумента «{extra[0]}». Допустимые аргументы: {allowed}."
    clean: dict[str, Any] = {}
    for p in params.values():
        value = arguments.get(p.name)
        if isinstance(value, str):
            value = value.strip()
        if value is None or value == "":
            if p.required:
                return {}, f"Не хватает аргумента «{p.name}» у инструмента {name}."
            clean[p.name] = None
            continue
        if not isinstance(value, str):
            return {}, f"Аргумент «{p.name}» должен быть строкой, а получено {_describe(value)}."
        if len(value) > MAX_STRING_LENGTH:
            return {}, f"Аргумент «{p.name}» длиннее {MAX_STRING_LENGTH} символов."
        if p.enum:
            match = next((v for v in p.enum if v.casefold() == value.casefold()), None)
            if match is None:
                values = ", ".join(p.enum)
                return {}, f"Значение «{shorten(value, VALUE_CHARS)}» не подходит для «{p.name}». Допустимые значения: {values}."
            value = match
        clean[p.name] = value
    return clean, None


_FIELD_NAMES = {"company": "компания", "tone": "тональность", "topic": "тема"}


def format_result(data: Any) -> str:
    """Render a tool's data as compact text for the model. Taught in 06_agent."""
    if isinstance(data, dict) and set(data) == {"topic", "count"}:  # get_metrics: a sentence reads best
        topic = TOPIC_NAMES.get(data["topic"], data["topic"])
        return f"По теме «{topic}» в базе {count(data['count'], 'новость', 'новости', 'новостей')}."
    if isinstance(data, list):
        if not data:
            return "Ничего не найдено."
        lines = []
        for row in data:
            details = ", ".join(f"{_FIELD_NAMES.get(k, k)}: {TONE_NAMES.get(v, v) if k == 'tone' else v}"
                                for k, v in row.items() if k not in ("id", "text") and v)
            lines.append(f"[{row['id']}] {row['text']}" + (f" ({details})" if details else ""))
        return "\n".join(lines)
    if isinstance(data, dict):
        return ", ".join(f"{k}: {v}" for k, v in data.items())
    return str(data)


def call_tool(
    name: Any,
    arguments: Any,
    *,
    lab: Lab,
    tools: Sequence[Callable[..., Any]] = DEFAULT_TOOLS,
) -> ToolResult:
    """Validate model-supplied arguments and run the tool on `lab`; errors come back as text, never raised.

    Taught in 06_agent.
    """
    registry = {func.__name__: func for func in tools}
    start = time.perf_counter()

    def failed(message: str, args: Any = None) -> ToolResult:
        hint = " Исправь вызов и попробуй снова."
        args = dict(args) if isinstance(args, Mapping) else {"raw": args} if args is not None else {}
        return ToolResult(str(name), args, False, "Ошибка: " + message + hint,
                          error=message, seconds=time.perf_counter() - start)

    if not isinstance(name, str) or name not in registry:
        return failed(f"Неизвестный инструмент «{shorten(str(name), VALUE_CHARS)}». Доступны: {', '.join(registry)}.", arguments)
    if isinstance(arguments, str):  # some models send the arguments as a JSON string
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError:
            return failed("Аргументы должны быть JSON-объектом.", arguments)
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, Mapping):
        return failed(f"Аргументы должны быть объектом, а получено {_describe(arguments)}.", arguments)
    func = registry[name]
    clean, error = _validate(func, arguments)
    if error:
        return failed(error, arguments)
    try:
        data = func(lab, **clean)
    except Exception as exc:  # noqa: BLE001 (a failing tool must not crash the agent)
        reason = shorten(f"{type(exc).__name__}: {exc}", ERROR_CHARS)
        return failed(f"Инструмент {name} не выполнился ({reason}).", clean)
    return ToolResult(name, clean, True, format_result(data), data=data, seconds=time.perf_counter() - start)
