"""One planner decision of the agent: the prompts, the tool schemas, the parsed tool calls (taught in 06_agent).

The planner and the finalizer of ``labkit.agent`` and the tool-choice evaluation of
``labkit.agent_eval`` all go through ``plan``, which is one ``labkit.chat.ask_model`` call
with ``think=False``: the agent wants a tool call or a short answer, not reasoning.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .chat import Reply, ask_model

__all__ = ["FINAL_PROMPT", "SYSTEM_PROMPT", "PLAN_TOKENS", "ANSWER_TOKENS", "FakeStubbornChat", "Plan", "plan"]

PLAN_TOKENS = 128  # num_predict of a planner call: a tool call or a short reply
ANSWER_TOKENS = 160  # num_predict of the finalizer: one or two sentences

SYSTEM_PROMPT = (
    "Ты аналитик новостной базы. Если вопрос о новостях из базы, вызови один подходящий инструмент. "
    "На приветствие и вопросы не о новостях ответь сам, коротко и по-русски, без инструментов."
)
FINAL_PROMPT = (  # data first, question last: the 1.5B model then reads the data instead of guessing
    "Ответь на вопрос пользователя по-русски одним-двумя предложениями, пересказав данные "
    "из новостной базы. Используй только эти данные."
)
Plan = Reply  # a planner decision is one model reply: calls, content, error, timing, tokens


def plan(
    chat: Callable[..., Any],
    model: str,
    messages: Sequence[dict[str, Any]],
    tools: Sequence[Callable[..., Any]],
    num_predict: int = PLAN_TOKENS,
) -> Plan:
    """Ask the model once, with tool schemas and without reasoning; return its reply. Taught in 06_agent.

    `chat` is ``lab.models.chat`` (or a stand-in such as ``FakeStubbornChat``). A model without
    tool support gives a reply whose ``error`` says so instead of raising.
    """
    return ask_model(chat, model, messages, think=False, tools=tools, num_predict=num_predict)


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
