"""One planner decision of the agent: the prompts, the tool schemas, the parsed tool calls (taught in 06_agent).

The planner and the finalizer of ``labkit.agent`` and the tool-choice evaluation of
``labkit.agent_eval`` all go through ``plan``, which is one ``labkit.chat.ask_model`` call
with ``think=False``: the agent wants a tool call or a short answer, not reasoning.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from .chat import Reply, ask_model
from .tools import tool_schema

__all__ = ["FINAL_PROMPT", "SYSTEM_PROMPT", "PLAN_TOKENS", "ANSWER_TOKENS", "FakeStubbornChat", "Plan", "plan",
           "GROUNDING", "is_grounded", "drop_ungrounded"]

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


def is_grounded(value: str, question: str) -> bool:
    """Does the question ask for this argument value? Its stem or one of its GROUNDING words must occur in it."""
    text, value = question.casefold(), str(value).strip()
    stem = value.casefold()[: max(2, len(value) - 2)]  # «Сбербанк» matches «Сбербанка», «Яндекс» «Яндексе»
    return stem in text or any(word in text for word in GROUNDING.get(value, ()))


def _wanted(schema: dict[str, Any], key: str, value: Any, question: str) -> bool:
    """Keep a required or free-text argument; keep an enum filter only when valid and asked for."""
    enum = schema["properties"].get(key, {}).get("enum")
    if key in schema["required"] or enum is None or not isinstance(value, str):
        return True
    return value in enum and is_grounded(value, question)


def drop_ungrounded(calls: list[dict[str, Any]], question: str,
                    tools: Sequence[Callable[..., Any]]) -> list[dict[str, Any]]:
    """The calls without optional filter arguments the question did not ask for. Taught in 06_agent.

    A small model likes to add ``tone="neutral"`` to «Какие новости есть про Яндекс?», which
    hides every other Yandex news. Required arguments and free text (``query``) stay untouched;
    a value outside the enum goes too (the model named something the data does not have). A
    filter-only tool left with no filter at all would list arbitrary news: the call becomes a
    free-text search for the question instead, when such a tool is offered.
    """
    schemas = {schema["name"]: schema["parameters"] for schema in (tool_schema(func)["function"] for func in tools)}
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
    reply = ask_model(chat, model, messages, think=False, tools=tools, num_predict=num_predict)
    question = next((str(m.get("content", "")) for m in reversed(messages) if m.get("role") == "user"), "")
    if not reply.calls or not question:
        return reply
    return replace(reply, calls=drop_ungrounded(reply.calls, question, tools))


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
