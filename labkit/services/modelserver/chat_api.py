"""Answer an Ollama /api/chat request with llama.cpp: text, tool calls, streaming (taught in 06_agent).

With `tools` in the request the model's text is parsed into structured `tool_calls`
(see toolcalls.py). A text that tries a call but does not parse is regenerated once
under a JSON schema that admits exactly the offered tools. When streaming with tools,
text that may still become a call is held back until it is clearly plain text.
With `logprobs` the answer carries each generated token's log-probability in Ollama's
shape (logprobs.py): the whole answer's list, or each streamed piece's own.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from labkit.services.modelserver.convert import to_openai_request
from labkit.services.modelserver.logprobs import choice_logprobs, ollama_logprobs, wanted_top
from labkit.services.modelserver.toolcalls import (
    as_tool_call,
    looks_like_tool_call,
    parse_tool_calls,
    tool_call_schema,
    tool_names,
)

__all__ = ["EngineError", "chat", "chat_stream"]

log = logging.getLogger("labkit.services.modelserver")
_CALL_STARTS = ("```", "{", "[", "<tool_call>")

Emit = Callable[[str, list[dict[str, Any]], list[dict[str, Any]]], None]  # (content piece, tool calls, logprobs)


class EngineError(RuntimeError):
    """llama.cpp refused the request (bad schema, prompt longer than the context, ...)."""


def _checked(result: Any) -> dict[str, Any]:
    if not isinstance(result, dict) or "choices" not in result:
        error = result.get("error", result) if isinstance(result, dict) else result
        message = error.get("message", error) if isinstance(error, dict) else error
        raise EngineError(f"llama.cpp: {message}")
    return result


def _complete(engine: Any, request: dict[str, Any]) -> dict[str, Any]:
    try:
        return _checked(engine.complete(request))
    except ValueError as exc:
        raise EngineError(f"llama.cpp: {exc}") from None


def _done_reason(finish_reason: str | None) -> str:
    return "length" if finish_reason == "length" else "stop"


def _resolve(text: str, native: list[dict[str, Any]], engine: Any, request: dict[str, Any],
             body: dict[str, Any], results: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """(content, tool calls) for a finished answer; retries once under the tools schema."""
    names = tool_names(body.get("tools"))
    calls = [c for c in (as_tool_call(n, names) for n in native) if c] or parse_tool_calls(text, names)
    if not calls and names and not body.get("format") and looks_like_tool_call(text, names):
        log.info("tool call did not parse, regenerating under the tools schema: %.200r", text)
        schema = tool_call_schema(body["tools"])
        retry = dict(request, response_format={"type": "json_schema",
                                               "json_schema": {"name": "tool_call", "schema": schema}})
        retry.pop("stream_options", None)
        result = _complete(engine, retry)
        results.append(result)
        calls = parse_tool_calls(result["choices"][0]["message"].get("content") or "", names)
    return ("", calls) if calls else (text, [])


def _native_calls(openai_calls: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """OpenAI tool_calls (JSON-string arguments) as {"name", "arguments"} objects."""
    out = []
    for call in openai_calls or []:
        function = call.get("function") or {}
        out.append({"name": function.get("name"), "arguments": function.get("arguments") or "{}"})
    return out


def chat(engine: Any, body: dict[str, Any]) -> tuple[dict[str, Any], str, list[dict[str, Any]], list[dict[str, Any]]]:
    """(Ollama message, done_reason, llama.cpp results, Ollama logprobs) for a non-streaming request.

    The logprobs are those of the generation whose answer is returned ([] unless the body asks for them).
    """
    request = to_openai_request(body, engine.n_ctx)
    result = _complete(engine, request)
    results = [result]
    choice = result["choices"][0]
    message = choice.get("message") or {}
    content, calls = _resolve(message.get("content") or "", _native_calls(message.get("tool_calls")),
                              engine, request, body, results)
    reply: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        reply["tool_calls"] = calls
    top = wanted_top(body)
    logprobs = [] if top is None else ollama_logprobs(choice_logprobs(results[-1]["choices"][0]), top)
    return reply, _done_reason(choice.get("finish_reason")), results, logprobs


def _may_be_call(text: str) -> bool:
    head = text.lstrip()
    return not head or any(p.startswith(head) or head.startswith(p) for p in _CALL_STARTS)


def chat_stream(engine: Any, body: dict[str, Any], emit: Emit) -> tuple[str, list[dict[str, Any]], list[dict[str, Any]]]:
    """Stream a request through emit(content, tool_calls, logprobs).

    Returns (done_reason, llama.cpp results, the logprobs no emitted piece carried, for the final line).
    A token's logprobs travel with the first piece emitted at or after it (held text keeps its tokens').
    """
    request = dict(to_openai_request(body, engine.n_ctx), stream_options={"include_usage": True})
    top = wanted_top(body)
    state: dict[str, Any] = {"hold": bool(tool_names(body.get("tools"))), "held": "", "finish": None,
                             "calls": {}, "final": {}, "error": None, "logprobs": []}

    def on_chunk(chunk: Any) -> None:
        if isinstance(chunk, (str, bytes)):
            chunk = json.loads(chunk)
        if "choices" not in chunk:
            state["error"] = EngineError(f"llama.cpp: {chunk.get('error', chunk)}")
            raise state["error"]
        if chunk.get("usage") or chunk.get("timings"):
            state["final"] = chunk
        for choice in chunk["choices"]:
            state["finish"] = choice.get("finish_reason") or state["finish"]
            if top is not None:
                state["logprobs"] += ollama_logprobs(choice_logprobs(choice), top)
            delta = choice.get("delta") or {}
            for part in delta.get("tool_calls") or []:
                call = state["calls"].setdefault(part.get("index", 0), {"name": "", "arguments": ""})
                function = part.get("function") or {}
                call["name"] += function.get("name") or ""
                call["arguments"] += function.get("arguments") or ""
            piece = delta.get("content")
            if not piece:
                continue
            if state["hold"]:
                state["held"] += piece
                if _may_be_call(state["held"]):
                    continue
                state["hold"], piece, state["held"] = False, state["held"], ""
            try:
                emit(piece, [], state["logprobs"])
                state["logprobs"] = []
            except Exception as exc:  # client went away: stop generating
                state["error"] = exc
                raise

    try:
        engine.stream(request, on_chunk)
    except ValueError as exc:
        raise EngineError(f"llama.cpp: {exc}") from None
    if state["error"] is not None:
        raise state["error"]
    results = [state["final"]]
    if state["held"] or state["calls"]:
        native = [state["calls"][i] for i in sorted(state["calls"])]
        content, calls = _resolve(state["held"], native, engine, request, body, results)
        emit(content, calls, state["logprobs"])
        state["logprobs"] = []
    return _done_reason(state["finish"]), results, state["logprobs"]
