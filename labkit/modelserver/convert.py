"""Ollama /api/chat requests ⇄ OpenAI chat.completions for llama.cpp (taught in 06_agent).

Ollama history carries tool calls as {"function": {"name", "arguments": {...}}} and tool
results as {"role": "tool", "tool_name": ...}; llama.cpp wants OpenAI's shape with call
ids and JSON-string arguments. Timings come back in llama.cpp's `usage`/`timings`.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

__all__ = ["RequestError", "to_openai_messages", "to_openai_request", "ollama_stats", "created_at"]

# Ollama option -> OpenAI / llama.cpp request field
_OPTIONS = {
    "temperature": "temperature",
    "top_p": "top_p",
    "top_k": "top_k",
    "min_p": "min_p",
    "typical_p": "typical_p",
    "seed": "seed",
    "stop": "stop",
    "repeat_penalty": "repeat_penalty",
    "repeat_last_n": "repeat_last_n",
    "presence_penalty": "presence_penalty",
    "frequency_penalty": "frequency_penalty",
}
_ROLES = ("system", "user", "assistant", "tool")


class RequestError(ValueError):
    """The request body is malformed (HTTP 400); the message says what to fix."""


def _call_arguments(arguments: Any) -> str:
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments if arguments is not None else {}, ensure_ascii=False)


def to_openai_messages(messages: Any) -> list[dict[str, Any]]:
    """OpenAI-format history for llama.cpp: call ids added, tool results linked to their call."""
    if not isinstance(messages, list):
        raise RequestError("'messages' must be a list of {role, content} objects")
    out: list[dict[str, Any]] = []
    pending: list[tuple[str, str]] = []  # (call id, tool name) not yet answered
    counter = 0
    for position, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in _ROLES:
            raise RequestError(f"message {position} needs a role among {', '.join(_ROLES)}")
        role, content = message["role"], message.get("content") or ""
        if not isinstance(content, str):
            raise RequestError(f"message {position}: content must be a string")
        if message.get("images"):
            raise RequestError(f"message {position}: these models read text only, not images")
        if role == "assistant" and message.get("tool_calls"):
            calls = []
            for call in message["tool_calls"]:
                function = (call or {}).get("function") or {}
                counter += 1
                call_id = call.get("id") or f"call_{counter}"
                name = str(function.get("name", ""))
                pending.append((call_id, name))
                calls.append({"id": call_id, "type": "function",
                              "function": {"name": name, "arguments": _call_arguments(function.get("arguments"))}})
            out.append({"role": "assistant", "content": content, "tool_calls": calls})
        elif role == "tool":
            name = message.get("tool_name") or message.get("name") or ""
            match = next((p for p in pending if p[1] == name), pending[0] if pending else None)
            if match is not None:
                pending.remove(match)
                call_id, call_name = match
            else:
                counter += 1
                call_id, call_name = f"call_{counter}", ""
            out.append({"role": "tool", "tool_call_id": message.get("tool_call_id") or call_id,
                        "name": name or call_name, "content": content})
        else:
            out.append({"role": role, "content": content})
    return out


def to_openai_request(body: dict[str, Any], n_ctx: int) -> dict[str, Any]:
    """The llama.cpp request for an Ollama /api/chat body (messages, tools, format, options)."""
    request: dict[str, Any] = {"messages": to_openai_messages(body.get("messages"))}
    tools = body.get("tools")
    if tools:
        if not isinstance(tools, list):
            raise RequestError("'tools' must be a list of function tools")
        request["tools"] = [dict(tool, type=tool.get("type") or "function") for tool in tools]
    fmt = body.get("format")
    if fmt == "json":
        request["response_format"] = {"type": "json_object"}
    elif isinstance(fmt, dict):
        request["response_format"] = {"type": "json_schema", "json_schema": {"name": "response", "schema": fmt}}
    elif fmt not in (None, ""):
        raise RequestError("'format' must be \"json\" or a JSON schema object")
    options = body.get("options") or {}
    if not isinstance(options, dict):
        raise RequestError("'options' must be an object")
    for ollama_name, openai_name in _OPTIONS.items():
        if options.get(ollama_name) is not None:
            request[openai_name] = options[ollama_name]
    # The window is fixed when a model loads (--num-ctx); a larger num_ctx is clamped to it.
    num_ctx = options.get("num_ctx")
    window = min(num_ctx, n_ctx) if isinstance(num_ctx, int) and num_ctx > 0 else n_ctx
    num_predict = options.get("num_predict")
    if isinstance(num_predict, int) and num_predict > 0:
        request["max_tokens"] = min(num_predict, window)
    return request


def ollama_stats(results: list[dict[str, Any]]) -> dict[str, int]:
    """Ollama's token counts and durations (ns) summed over llama.cpp results."""
    stats = {"prompt_eval_count": 0, "prompt_eval_duration": 0, "eval_count": 0, "eval_duration": 0}
    for result in results:
        usage, timings = result.get("usage") or {}, result.get("timings") or {}
        stats["prompt_eval_count"] += int(usage.get("prompt_tokens") or timings.get("prompt_n") or 0)
        stats["eval_count"] += int(usage.get("completion_tokens") or timings.get("predicted_n") or 0)
        stats["prompt_eval_duration"] += int(float(timings.get("prompt_ms") or 0) * 1e6)
        stats["eval_duration"] += int(float(timings.get("predicted_ms") or 0) * 1e6)
    return stats


def created_at() -> str:
    """Current UTC time in Ollama's RFC 3339 form."""
    return datetime.now(timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")
