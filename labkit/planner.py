"""One model call of the agent: the prompts, the tool schemas, the parsed tool calls (taught in 06_agent).

The official ``ollama`` client is called directly (no LangChain wrapper); the
planner and the finalizer of ``labkit.agent`` and the tool-choice evaluation of
``labkit.agent_eval`` all go through ``plan``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .tools import tool_schema

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
_THINK = re.compile(r"<think>.*?(</think>|$)", re.DOTALL)  # reasoning models (deepseek-r1) think aloud


@dataclass(frozen=True)
class Plan:
    """One planner decision: the tool calls (possibly none), the text, timing and token counts."""

    calls: list[dict[str, Any]]
    content: str
    seconds: float
    prompt_tokens: int | None
    eval_tokens: int | None


def plan(
    chat: Callable[..., Any],
    model: str,
    messages: Sequence[dict[str, Any]],
    tools: Sequence[Callable[..., Any]],
    num_predict: int = PLAN_TOKENS,
) -> Plan:
    """Ask the model once, with tool schemas; return its tool calls. Taught in 06_agent."""
    start = time.perf_counter()
    response = chat(
        model=model,
        messages=list(messages),
        tools=[tool_schema(func) for func in tools] or None,  # [] sends no tools
        options={"temperature": 0, "num_predict": num_predict},
        think=False,
    )
    message = response.message
    calls = [
        {"name": call.function.name, "arguments": dict(call.function.arguments or {})}
        for call in (message.tool_calls or [])
    ]
    return Plan(
        calls=calls,
        content=_THINK.sub("", message.content or "").strip(),
        seconds=time.perf_counter() - start,
        prompt_tokens=getattr(response, "prompt_eval_count", None),
        eval_tokens=getattr(response, "eval_count", None),
    )


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
