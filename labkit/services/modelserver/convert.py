"""Ollama /api/chat requests ⇄ OpenAI chat.completions for llama.cpp (taught in 06_agent).

Ollama history carries tool calls as {"function": {"name", "arguments": {...}}} and tool
results as {"role": "tool", "tool_name": ...}; llama.cpp wants OpenAI's shape with call
ids and JSON-string arguments. Timings come back in llama.cpp's `usage`/`timings`.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

from labkit.services.modelserver.logprobs import MAX_TOP_LOGPROBS, TOP_LOGPROBS_ERROR, openai_fields

__all__ = ["RequestError", "check_types", "check_chat_request", "to_openai_messages", "to_openai_request",
           "ollama_stats", "created_at"]

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
_INT_OPTIONS = ("num_ctx", "num_predict", "num_keep", "seed", "top_k", "repeat_last_n")
_FLOAT_OPTIONS = ("temperature", "top_p", "min_p", "typical_p", "repeat_penalty", "presence_penalty",
                  "frequency_penalty")
_ROLES = ("system", "user", "assistant", "tool")
# ChatRequest fields whose JSON type the server relies on, with Go's type names (api/types.go L131-178).
CHAT_FIELDS: dict[str, tuple[type, str]] = {
    "model": (str, "string"), "messages": (list, "[]api.Message"), "stream": (bool, "bool"),
    "tools": (list, "api.Tools"), "options": (dict, "map[string]interface {}"), "logprobs": (bool, "bool"),
}


class RequestError(ValueError):
    """The request body is malformed (HTTP 400); the message says what to fix."""


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object" if isinstance(value, dict) else "null"


def check_types(body: dict[str, Any], struct: str, fields: dict[str, tuple[type, str]]) -> None:
    """Refuse a field of the wrong JSON type in the words of Go's encoding/json, as Ollama's 400 does."""
    for name, (kind, go_type) in fields.items():
        value = body.get(name)
        if value is not None and not isinstance(value, kind):
            raise RequestError(f"json: cannot unmarshal {_json_type(value)} into Go struct field "
                               f"{struct}.{name} of type {go_type}")


def _optional(value: Any, kind: type | tuple[type, ...]) -> bool:
    return value is None or isinstance(value, kind)


def _is_call(call: Any) -> bool:
    """A history tool call {id?, function: {name, arguments}} (arguments an object or its JSON text)."""
    if not isinstance(call, dict) or not _optional(call.get("id"), str) or not _optional(call.get("function"), dict):
        return False
    function = call.get("function") or {}
    return _optional(function.get("name"), str) and _optional(function.get("arguments"), (dict, str))


def _tools(tools: Any) -> list[dict[str, Any]]:
    """The offered tools, each an object {type, function: {name, description, parameters}}."""
    if not tools:
        return []
    if not isinstance(tools, list):
        raise RequestError("'tools' must be a list of function tools")
    for position, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(tool, dict) or not _optional(tool.get("type"), str) or not _optional(function, dict) or (
                isinstance(function, dict) and not (_optional(function.get("name"), str)
                                                    and _optional(function.get("description"), str)
                                                    and _optional(function.get("parameters"), dict))):
            raise RequestError(f"tools[{position}] must be an object {{type, function: {{name, description, "
                               "parameters}} with a string name and an object of parameters")
    return tools


def _options(options: Any) -> dict[str, Any]:
    """The options typed as Ollama's Options.FromMap reads them (api/types.go L784-868), in its words."""
    options = options or {}
    if not isinstance(options, dict):
        raise RequestError("'options' must be an object")
    typed: dict[str, Any] = {}
    for key, value in options.items():
        if value is None:
            continue
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if key in _INT_OPTIONS:
            if not number or not -(2**63) <= value < 2**63:
                raise RequestError(f'option "{key}" must be of type integer')
            value = int(value)  # Go truncates a JSON number to the integer option
        elif key in _FLOAT_OPTIONS:
            if not number or not -(2**63) <= value < 2**63:
                raise RequestError(f'option "{key}" must be of type float32')
        elif key == "stop":
            if not isinstance(value, list):
                raise RequestError('option "stop" must be of type array')
            if not all(isinstance(item, str) for item in value):
                raise RequestError('option "stop" must be of an array of strings')
        typed[key] = value
    return typed


def _response_format(fmt: Any) -> dict[str, Any] | None:
    if fmt == "json":
        return {"type": "json_object"}
    if isinstance(fmt, dict):
        return {"type": "json_schema", "json_schema": {"name": "response", "schema": fmt}}
    if fmt not in (None, ""):
        raise RequestError("'format' must be \"json\" or a JSON schema object")
    return None


def _check_top_logprobs(value: Any) -> None:
    """``top_logprobs`` as Go decodes an int field, then Ollama's range check (routes.go, ChatHandler)."""
    if value is None:
        return
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not number or isinstance(value, float):  # Go parses an int field's literal as an integer: 3.0 fails too
        what = f"number {json.dumps(value)}" if number else _json_type(value)
        raise RequestError(f"json: cannot unmarshal {what} into Go struct field ChatRequest.top_logprobs of type int")
    if not 0 <= value <= MAX_TOP_LOGPROBS:
        raise RequestError(TOP_LOGPROBS_ERROR)


def check_chat_request(body: dict[str, Any]) -> None:
    """Refuse (RequestError) a chat body with fields of wrong types before any model is loaded for it."""
    check_types(body, "ChatRequest", CHAT_FIELDS)
    _check_top_logprobs(body.get("top_logprobs"))
    if body.get("messages"):
        to_openai_messages(body["messages"])
    _tools(body.get("tools"))
    _response_format(body.get("format"))
    _options(body.get("options"))


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
        if not all(_optional(message.get(key), str) for key in ("tool_name", "name", "tool_call_id", "thinking")):
            raise RequestError(f"message {position}: tool_name, tool_call_id and thinking must be strings")
        calls_given = message.get("tool_calls")
        if not _optional(calls_given, list) or not all(_is_call(call) for call in calls_given or []):
            raise RequestError(f"message {position}: tool_calls must be a list of "
                               "{function: {name, arguments}} objects")
        if role == "assistant" and message.get("tool_calls"):
            calls = []
            for call in message["tool_calls"]:
                function = call.get("function") or {}
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
    """The llama.cpp request for an Ollama /api/chat body (messages, tools, format, options, logprobs)."""
    request: dict[str, Any] = {"messages": to_openai_messages(body.get("messages"))}
    tools = _tools(body.get("tools"))
    if tools:
        request["tools"] = [dict(tool, type=tool.get("type") or "function") for tool in tools]
    response_format = _response_format(body.get("format"))
    if response_format is not None:
        request["response_format"] = response_format
    options = _options(body.get("options"))
    for ollama_name, openai_name in _OPTIONS.items():
        if options.get(ollama_name) is not None:
            request[openai_name] = options[ollama_name]
    # The window is fixed when a model loads (--num-ctx); a larger num_ctx is clamped to it.
    num_ctx = options.get("num_ctx")
    window = min(num_ctx, n_ctx) if isinstance(num_ctx, int) and num_ctx > 0 else n_ctx
    num_predict = options.get("num_predict")
    if isinstance(num_predict, int) and num_predict > 0:
        request["max_tokens"] = min(num_predict, window)
    request.update(openai_fields(body))
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
