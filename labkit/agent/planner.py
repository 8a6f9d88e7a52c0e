"""One planner decision of the agent: the prompts, the tool schemas, the parsed tool calls (taught in 06_agent).

The planner and the finalizer of ``labkit.agent.graph`` and the tool-choice evaluation of
``labkit.evaluation.tool_choice`` all go through ``plan``, which is one ``labkit.models.chat.ask_model`` call
with ``think=False``: the agent wants a tool call or a short answer, not reasoning.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from labkit.agent.tools import tool_schema
from labkit.core.corpora.news import TOPIC_GLOSSES
from labkit.models.chat import Reply, ask_model

__all__ = ["FINAL_PROMPT", "SYSTEM_PROMPT", "PLAN_TOKENS", "ANSWER_TOKENS", "FakeStubbornChat", "Plan", "plan",
           "GROUNDING", "TOPIC_GROUNDING", "LISTING_WORDS", "is_grounded", "grounded_values",
           "drop_ungrounded", "route_calls"]

PLAN_TOKENS = 128  # num_predict of a planner call: a tool call or a short reply
ANSWER_TOKENS = 160  # num_predict of the finalizer: one or two sentences

SYSTEM_PROMPT = (
    "Ты аналитик новостной базы. Если вопрос о новостях из базы, вызови один подходящий инструмент. "
    "На приветствие, арифметику, перевод, просьбу о совете и другие вопросы не о новостях ответь сам, "
    "коротко и по-русски, без инструментов. "
    "Передавай только те аргументы, о которых прямо спросили."
)
FINAL_PROMPT = (  # data first, question last: the 1.5B model then reads the data instead of guessing
    "Ответь на вопрос пользователя по-русски одним-двумя предложениями, пересказав данные "
    "из новостной базы. Используй только эти данные."
)
Plan = Reply  # a planner decision is one model reply: calls, content, error, timing, tokens


# Words that ask for an enum value although they do not contain it (a value is also matched by itself).
GROUNDING: dict[str, tuple[str, ...]] = {
    "positive": ("позитив", "положительн", "хорош", "успех", "удач"),
    "negative": ("негатив", "отрицательн", "плох", "провал", "неудач"),
    "neutral": ("нейтрал",),
    "ЦБ": ("цб", "центробанк", "центральн", "банк росси", "регулятор"),
    "Сбербанк": ("сбер",),
    "Минфин": ("министерств", "минфин"),
}
_WORDS = re.compile(r"\w+")
# A question about how many news there are (not «Сколько стоит золото?»).
_COUNT = re.compile(r"\bсколько\b.*\b(новост|материал|стат|публикац|сообщени|замет)", re.IGNORECASE | re.DOTALL)
# Words of a search query that name no subject: a query of these and filter words only is a listing.
LISTING_WORDS = frozenset("""
    новость новости новостей новостях все всё весь про о об обо по в на базе какие какая какой есть есть ли ли
    покажи найди список компания компании компанию компанией тон тона тоном материалы статьи публикации
""".split())


def _fold(text: str) -> str:
    return str(text).casefold().replace("ё", "е")


def _topic_words(gloss: str) -> tuple[str, ...]:
    """The word starts that ask for a topic: each gloss word cut by up to three letters (4 at least).

    A start that also begins a listing word («компа» of «компаний», as in «компании») names no topic.
    """
    starts = (w if len(w) < 4 else w[: max(4, len(w) - 3)] for w in _WORDS.findall(_fold(gloss)))
    return tuple(dict.fromkeys(s for s in starts if not any(word.startswith(s) for word in LISTING_WORDS)))


TOPIC_GROUNDING: dict[str, tuple[str, ...]] = {topic: _topic_words(gloss) for topic, gloss in TOPIC_GLOSSES.items()}


def is_grounded(value: str, question: str) -> bool:
    """Does the question ask for this argument value? Taught in 06_agent.

    A topic is asked for by a word starting like a word of its gloss («сырьевых» for
    «сырьё: нефть, ...»); another value by its stem or one of its GROUNDING words.
    """
    text, value = _fold(question), str(value).strip()
    if value in TOPIC_GROUNDING:
        return any(re.search(rf"\b{re.escape(start)}" + (r"\b" if len(start) < 4 else ""), text)
                   for start in TOPIC_GROUNDING[value])
    stem = _fold(value)[: max(2, len(value) - 2)]  # «Сбербанк» matches «Сбербанка», «Яндекс» «Яндексе»
    return stem in text or any(word in text for word in GROUNDING.get(value, ()))


def grounded_values(enum: Sequence[str], question: str) -> list[str]:
    """The values of `enum` the question asks for."""
    return [value for value in enum if is_grounded(value, question)]


def _wanted(schema: dict[str, Any], key: str, value: Any, question: str) -> bool:
    """Keep a required or free-text argument; keep an enum filter only when it is the one value asked for."""
    enum = schema["properties"].get(key, {}).get("enum")
    if key in schema["required"] or enum is None or not isinstance(value, str):
        return True
    return value in enum and grounded_values(enum, question) == [value]  # «и хорошие, и плохие»: no tone


def drop_ungrounded(calls: list[dict[str, Any]], question: str,
                    tools: Sequence[Callable[..., Any]]) -> list[dict[str, Any]]:
    """The calls without optional filter arguments the question did not ask for. Taught in 06_agent.

    A small model likes to add ``tone="neutral"`` to «Какие новости есть про Яндекс?», which
    hides every other Yandex news. Required arguments and free text (``query``) stay untouched;
    a value outside the enum goes too (the model named something the data does not have), and
    so does a filter when the question names two of its values («и хорошие, и плохие»). A
    filter-only tool left with no filter at all would list arbitrary news: the call becomes a
    free-text search for the question instead, when such a tool is offered.
    """
    schemas = _schemas(tools)
    search = next((name for name, schema in schemas.items() if schema["required"] == ["query"]), None)
    kept = []
    for call in calls:
        schema = schemas.get(call["name"])
        arguments = call["arguments"]
        if schema is None or not isinstance(arguments, dict):
            kept.append(call)
            continue
        arguments = {key: value for key, value in arguments.items() if _wanted(schema, key, value, question)}
        if not arguments and call["arguments"] and not schema["required"] and search:
            kept.append({"name": search, "arguments": {"query": question}})
        else:
            kept.append({**call, "arguments": arguments})
    return kept


def _schemas(tools: Sequence[Callable[..., Any]]) -> dict[str, dict[str, Any]]:
    return {schema["name"]: schema["parameters"] for schema in (tool_schema(func)["function"] for func in tools)}


def _enum_params(schema: dict[str, Any]) -> dict[str, list[str]]:
    return {key: prop["enum"] for key, prop in schema["properties"].items() if "enum" in prop}


def _asked(schema: dict[str, Any], question: str) -> dict[str, str]:
    """The enum arguments of a tool the question asks for: each parameter with exactly one value asked for."""
    found = {key: grounded_values(enum, question) for key, enum in _enum_params(schema).items()}
    return {key: values[0] for key, values in found.items() if len(values) == 1}


def _misplaced(name: str, arguments: dict[str, Any], schemas: dict[str, dict[str, Any]],
               question: str) -> dict[str, Any] | None:
    """The call moved to the one other tool whose enum holds a value this tool does not take; None if none such."""
    own = _enum_params(schemas[name])
    for key, value in arguments.items():
        if not isinstance(value, str) or (key in schemas[name]["properties"] and value in own.get(key, [value])):
            continue  # free text, or a value this tool takes
        homes = [(target, other_key) for target, schema in schemas.items() if target != name
                 for other_key, enum in _enum_params(schema).items() if value in enum]
        if len(homes) == 1 and is_grounded(value, question):
            target, other_key = homes[0]
            return {"name": target, "arguments": {**_asked(schemas[target], question), other_key: value}}
    return None


def route_calls(calls: list[dict[str, Any]], question: str,
                tools: Sequence[Callable[..., Any]]) -> list[dict[str, Any]]:
    """Send a call the question plainly meant for another offered tool there. Taught in 06_agent.

    Three slips of a small model, each fixed only when the question itself names the values:

    * a count question («Сколько новостей о происшествиях?») answered by a search, or by a
      count of a topic the question does not name: the counting tool (a required topic)
      with the one topic the question names;
    * a value given to the wrong tool (``get_metrics(topic="neutral")``): the tool whose
      enum holds it;
    * a search whose query is only filter words («негативные новости», «Магнит»): the
      filter-only tool with the values the question names.

    Anything else is left as the model chose it; a call to a tool that is not offered too
    (the tools node tells the model so).
    """
    schemas = _schemas(tools)
    counter = next((name for name, s in schemas.items()
                    if len(s["required"]) == 1 and s["required"][0] in _enum_params(s)), None)
    lister = next((name for name, s in schemas.items()
                   if not s["required"] and s["properties"] and len(_enum_params(s)) == len(s["properties"])), None)
    if counter and calls and calls[0].get("name") in schemas and _COUNT.search(question):
        key = schemas[counter]["required"][0]
        asked = _asked(schemas[counter], question)
        chosen = calls[0]["arguments"].get(key) if isinstance(calls[0].get("arguments"), dict) else None
        if key in asked and (calls[0]["name"] != counter or not is_grounded(str(chosen), question)):
            return [{"name": counter, "arguments": {key: asked[key]}}]
    routed = []
    for call in calls:
        schema, arguments = schemas.get(call["name"]), call.get("arguments")
        if schema is None or not isinstance(arguments, dict):
            routed.append(call)
            continue
        moved = _misplaced(call["name"], arguments, schemas, question)
        if moved is not None:
            routed.append(moved)
            continue
        query = arguments.get("query")
        if lister and schema["required"] == ["query"] and isinstance(query, str):
            asked = _asked(schemas[lister], question)
            rest = [w for w in _WORDS.findall(_fold(query))
                    if w not in LISTING_WORDS and not any(is_grounded(v, w) for v in asked.values())]
            if asked and not rest:
                routed.append({"name": lister, "arguments": asked})
                continue
        routed.append(call)
    return routed


def plan(
    chat: Callable[..., Any],
    model: str,
    messages: Sequence[dict[str, Any]],
    tools: Sequence[Callable[..., Any]],
    num_predict: int = PLAN_TOKENS,
) -> Plan:
    """Ask the model once, with tool schemas and without reasoning; return its reply. Taught in 06_agent.

    `chat` is ``lab.models.chat`` (or a stand-in such as ``FakeStubbornChat``). A model without
    tool support gives a reply whose ``error`` says so instead of raising. Optional filter
    arguments the user's question did not ask for are dropped (``drop_ungrounded``).
    """
    reply = ask_model(chat, model, messages, think=False, tools=[tool_schema(t) for t in tools],
                      num_predict=num_predict)
    question = next((str(m.get("content", "")) for m in reversed(messages) if m.get("role") == "user"), "")
    if not reply.calls or not question:
        return reply
    return replace(reply, calls=drop_ungrounded(route_calls(reply.calls, question, tools), question, tools))


class FakeStubbornChat:
    """A FAKE chat model that always asks for ``get_metrics(topic="weather")`` (not a corpus topic).

    Taught in 06_agent: a real model does not fail on demand, so the self-correction limit is
    shown (and tested) with this stand-in. Without tools in the request it answers with text.
    """

    def __init__(self, arguments: dict[str, Any] | None = None) -> None:
        self.arguments = arguments or {"topic": "weather"}
        self.requests = 0

    def __call__(self, model: str = "", messages: Any = None, tools: Any = None, **_: Any) -> Any:
        from ollama import ChatResponse, Message

        self.requests += 1
        calls = [Message.ToolCall(function=Message.ToolCall.Function(name="get_metrics", arguments=self.arguments))]
        message = Message(role="assistant", content="" if tools else "(заглушка)", tool_calls=calls if tools else None)
        return ChatResponse(model="fake-stubborn", message=message, prompt_eval_count=0, eval_count=0)
