"""Read tool calls out of a small model's text answer (taught in 06_agent).

Qwen2.5-Coder answers a tools request with a fenced ```json {"name": ..., "arguments": {...}}```
block, sometimes bare JSON or `<tool_call>` tags. `parse_tool_calls` turns any of these
into Ollama's structured calls, keeping only names that are among the request's tools.
When the text looks like an attempted call that does not parse, the server regenerates
once under `tool_call_schema`, a JSON schema that admits exactly the offered tools.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["parse_tool_calls", "as_tool_call", "looks_like_tool_call", "tool_call_schema", "tool_names"]

_FENCE = re.compile(r"```[ \t]*(?:json|tool_call|JSON)?[ \t]*\n?(.*?)```", re.S)
_TAGS = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.S)
_decoder = json.JSONDecoder()


def tool_names(tools: list[dict[str, Any]] | None) -> list[str]:
    """Names of the functions offered in an Ollama/OpenAI `tools` list."""
    names = []
    for tool in tools or []:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            names.append(function["name"])
    return names


def _json_objects(text: str) -> list[Any]:
    """Every JSON value that starts at a `{` or `[` in text, outermost first, left to right."""
    found, i = [], 0
    while i < len(text):
        if text[i] in "{[":
            try:
                value, end = _decoder.raw_decode(text, i)
            except ValueError:
                i += 1
                continue
            found.append(value)
            i = end
        else:
            i += 1
    return found


def as_tool_call(value: Any, allowed: set[str] | list[str]) -> dict[str, Any] | None:
    """One Ollama tool call from a {"name", "arguments"} (or OpenAI) object, None if not an allowed call."""
    if not isinstance(value, dict):
        return None
    if isinstance(value.get("function"), dict):  # OpenAI shape {"function": {"name", "arguments"}}
        value = value["function"]
    name = value.get("name")
    arguments = value.get("arguments", value.get("parameters", {}))
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            return None
    if not isinstance(name, str) or name not in allowed or not isinstance(arguments, dict):
        return None
    return {"function": {"name": name, "arguments": arguments}}


def parse_tool_calls(text: str, names: list[str]) -> list[dict[str, Any]]:
    """Ollama tool calls found in text (fenced, tagged or bare JSON); [] when there are none."""
    if not text or not names:
        return []
    allowed = set(names)
    candidates = [m.group(1) for m in _TAGS.finditer(text)] + [m.group(1) for m in _FENCE.finditer(text)]
    calls: list[dict[str, Any]] = []
    for candidate in candidates or [text]:
        for value in _json_objects(candidate):
            items = value if isinstance(value, list) else [value]
            calls.extend(call for call in (as_tool_call(item, allowed) for item in items) if call)
    return calls


def looks_like_tool_call(text: str, names: list[str]) -> bool:
    """True when text seems to try a tool call (a fence, tags, bare JSON or a tool name with `"name"`)."""
    stripped = text.strip()
    if "<tool_call>" in stripped or stripped.startswith(("{", "[{")):
        return True
    if "```" in stripped and '"name"' in stripped:
        return True
    return '"name"' in stripped and any(name in stripped for name in names)


def tool_call_schema(tools: list[dict[str, Any]]) -> dict[str, Any]:
    """JSON schema admitting exactly one call of one offered tool: anyOf {name: const, arguments}."""
    options = []
    for tool in tools:
        function = tool.get("function") or {}
        if not isinstance(function.get("name"), str):
            continue
        parameters = function.get("parameters") or {"type": "object"}
        options.append(
            {
                "type": "object",
                "properties": {"name": {"const": function["name"]}, "arguments": parameters},
                "required": ["name", "arguments"],
            }
        )
    return {"anyOf": options}
