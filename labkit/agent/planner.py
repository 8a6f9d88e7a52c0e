"""One planner decision of the agent: the prompts, the tool schemas, the parsed tool calls (taught in 06_agent).

The planner and the finalizer of ``labkit.agent.graph`` and the tool-choice evaluation of
``labkit.evaluation.tool_choice`` all go through ``plan``, which is one ``labkit.models.chat.ask_model`` call
with ``think=False``: the agent wants a tool call or a short answer, not reasoning. Its reply is then
checked against the question: model markup is removed (``labkit.agent.markup``), a call the question
plainly meant for another tool is moved there (``route_calls``), filters nobody asked for are dropped
(``drop_ungrounded``) and, given the corpus' ``Scope``, small talk loses its search while a question
about the news gets a tool even when the model called none (``check_scope``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from labkit.agent.markup import strip_markup
from labkit.agent.routing import (
    GROUNDING,
    LISTING_WORDS,
    TOPIC_GROUNDING,
    asks_count,
    check_scope,
    drop_ungrounded,
    fallback_call,
    grounded_values,
    is_grounded,
    route_calls,
    subject_query,
)
from labkit.agent.scope import Scope
from labkit.agent.tools import tool_schema
from labkit.models.chat import Reply, ask_model

__all__ = ["FINAL_PROMPT", "REPLY_PROMPT", "SYSTEM_PROMPT", "PLAN_TOKENS", "ANSWER_TOKENS", "FakeStubbornChat", "Plan", "plan", "check_reply",
           "GROUNDING", "TOPIC_GROUNDING", "LISTING_WORDS", "is_grounded", "grounded_values",
           "drop_ungrounded", "route_calls", "asks_count", "subject_query", "fallback_call", "check_scope"]

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
    "из новостной базы. Используй только эти данные. После каждого факта поставь номер новости "
    "в квадратных скобках, как в данных, например [12]."
)
# The answer without tools (graph node ``reply``): the planner's call was small talk's, or its reply was empty.
REPLY_PROMPT = (
    "Ты помощник новостной базы, но этот вопрос не о новостях из неё. Ответь сам, коротко и по-русски: "
    "на приветствие, благодарность или прощание — вежливо; на вопрос о том, что ты умеешь, — что ищешь и считаешь "
    "новости в базе; на общий вопрос — только если точно знаешь ответ. О погоде, курсах и других текущих "
    "событиях, которых нет в базе, скажи, что ответить не можешь. Ничего не выдумывай."
)
Plan = Reply  # a planner decision is one model reply: calls, content, error, timing, tokens


def check_reply(reply: Reply, messages: Sequence[dict[str, Any]], tools: Sequence[Callable[..., Any]],
                scope: Scope | None = None) -> Plan:
    """One model reply after the planner's checks (what ``plan`` returns). Taught in 06_agent.

    Model markup is cut from the text (``strip_markup``); calls are checked against the question
    (``route_calls``, ``drop_ungrounded``) and, with the corpus' `scope`, against what the base is
    about (``check_scope``). A reply left with neither calls nor text asks for an answer without tools.
    """
    reply = replace(reply, content=strip_markup(reply.content))
    question = next((str(m.get("content", "")) for m in reversed(messages) if m.get("role") == "user"), "")
    if reply.error or not tools or not question:
        return reply
    calls = drop_ungrounded(route_calls(reply.calls, question, tools), question, tools) if reply.calls else []
    if scope is not None:
        calls = check_scope(calls, question, tools, scope, failed=not reply.calls and not reply.content)
        if calls and not reply.calls:  # a call instead of the model's text: that text was not grounded in data
            reply = replace(reply, content="")
    return replace(reply, calls=calls)


def plan(
    chat: Callable[..., Any],
    model: str,
    messages: Sequence[dict[str, Any]],
    tools: Sequence[Callable[..., Any]],
    num_predict: int = PLAN_TOKENS,
    scope: Scope | None = None,
) -> Plan:
    """Ask the model once, with tool schemas and without reasoning; return its checked reply. Taught in 06_agent.

    `chat` is ``lab.models.chat`` (or a stand-in such as ``FakeStubbornChat``). A model without
    tool support gives a reply whose ``error`` says so instead of raising. The reply then goes
    through ``check_reply`` (markup, the question, and with `scope` the corpus).
    """
    reply = ask_model(chat, model, messages, think=False, tools=[tool_schema(t) for t in tools],
                      num_predict=num_predict)
    return check_reply(reply, messages, tools, scope)


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
