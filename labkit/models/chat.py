"""One call to a chat model: the only way labkit and the notebooks talk to one (taught in 06_agent).

Every request states ``think`` explicitly: Ollama turns reasoning on for models that can
reason (qwen3, deepseek-r1) when ``think`` is left out, and a small token budget is then
spent thinking, leaving the answer empty. Reasoning text is kept apart from the answer,
whether the server returns it in ``message.thinking`` or inline as ``<think>…</think>``.
A model that lacks a capability the request needs (tools, thinking) makes Ollama answer
``400 "… does not support tools"``; that becomes a reply whose ``error`` says so in Russian,
not an exception, so a comparison of models shows the model failing honestly.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Reply", "ask_model", "split_thinking", "capability_error", "CAPABILITY_NAMES"]

_THINK = re.compile(r"<think>(.*?)(?:</think>|$)", re.DOTALL)
# Ollama's capability names (server/images.go, errCapability*) in the course's language.
CAPABILITY_NAMES = {
    "tools": "вызов инструментов (tools)",
    "thinking": "режим рассуждений (think)",
    "completion": "генерацию текста",
    "chat": "чат",
    "embedding": "эмбеддинги",
}
_UNSUPPORTED = re.compile(r"does not support (\w+(?: \w+)?)")


@dataclass(frozen=True)
class Reply:
    """What one chat call produced: the answer, the reasoning, the tool calls, timing and tokens.

    ``error`` is empty, or a Russian sentence saying which capability the model lacks (then
    ``content`` and ``calls`` are empty).
    """

    content: str
    calls: list[dict[str, Any]] = field(default_factory=list)
    thinking: str = ""
    error: str = ""
    seconds: float = 0.0  # wall time of the call, queueing at the server included
    prompt_tokens: int | None = None
    eval_tokens: int | None = None
    timings: dict[str, float] = field(default_factory=dict)  # the server's own seconds: load, prompt, eval
    logprobs: list[Any] | None = None  # per generated token, with its top alternatives, when asked (``top_logprobs``)

    @property
    def model_seconds(self) -> float | None:
        """Seconds the server spent reading the prompt and generating (no queueing), when it reported them."""
        if "prompt" not in self.timings and "eval" not in self.timings:
            return None
        return self.timings.get("prompt", 0.0) + self.timings.get("eval", 0.0)

    @property
    def ok(self) -> bool:
        """True when the model answered (with text or tool calls) and no capability was missing."""
        return not self.error and bool(self.content or self.calls)


def split_thinking(content: str, thinking: str | None = None) -> tuple[str, str]:
    """(answer, reasoning) from a message: inline ``<think>`` blocks move to the reasoning."""
    inline = [block.strip() for block in _THINK.findall(content or "")]
    reasoning = "\n".join(part for part in [(thinking or "").strip(), *inline] if part)
    return _THINK.sub("", content or "").strip(), reasoning


def capability_error(model: str, message: str) -> str | None:
    """A Russian sentence for Ollama's ``… does not support X`` (HTTP 400), or None for other errors."""
    found = _UNSUPPORTED.search(message or "")
    if not found:
        return None
    missing = found.group(1)
    what = CAPABILITY_NAMES.get(missing.split()[0], missing)
    return f"Модель {model} не поддерживает {what}: сервер ответил «{message.strip()}»."


def ask_model(
    send: Callable[..., Any],
    model: str,
    messages: Sequence[dict[str, Any]],
    *,
    think: bool,
    tools: Sequence[dict[str, Any]] = (),
    num_predict: int | None = None,
    temperature: float = 0.0,
    top_logprobs: int | None = None,
) -> Reply:
    """Send one chat request through `send` (``lab.models.chat`` or a stand-in); return a ``Reply``.

    Taught in 06_agent. `think` has no default on purpose: every caller decides. `tools` are
    the tools' JSON schemas (``labkit.agent.tools.tool_schema`` makes them from functions); an empty
    list sends none. Errors other than a
    missing capability (a model not pulled, a server down) are raised. `top_logprobs` (0-20) asks for each
    generated token's log-probability and its most likely alternatives (Ollama 0.12.11+; ``Reply.logprobs``).
    """
    import ollama

    options: dict[str, Any] = {"temperature": temperature}
    if num_predict is not None:
        options["num_predict"] = num_predict
    extra: dict[str, Any] = {"logprobs": True, "top_logprobs": top_logprobs} if top_logprobs is not None else {}
    start = time.perf_counter()
    try:
        response = send(model=model, messages=list(messages),
                        tools=list(tools) or None, options=options, think=think, **extra)
    except ollama.ResponseError as err:
        readable = capability_error(model, str(err.error)) if err.status_code == 400 else None
        if readable is None:
            raise
        return Reply(content="", error=readable, seconds=time.perf_counter() - start)
    message = response.message
    content, reasoning = split_thinking(message.content or "", getattr(message, "thinking", None))
    calls = [{"name": call.function.name, "arguments": dict(call.function.arguments or {})}
             for call in (message.tool_calls or [])]
    durations = {"load": "load_duration", "prompt": "prompt_eval_duration", "eval": "eval_duration"}
    timings = {name: value / 1e9 for name, key in durations.items()
               if isinstance(value := getattr(response, key, None), (int, float))}  # nanoseconds in the API
    return Reply(content=content, calls=calls, thinking=reasoning, seconds=time.perf_counter() - start,
                 prompt_tokens=getattr(response, "prompt_eval_count", None),
                 eval_tokens=getattr(response, "eval_count", None), timings=timings,
                 logprobs=getattr(response, "logprobs", None))
