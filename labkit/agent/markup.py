"""Model markup that must never reach a person: tool tags, template tokens, stray JSON (taught in 06_agent).

A small model sometimes answers a request with tools by writing the chat template's own
markup instead of a call or a sentence: the literal ``<tools></tools>``, a ``<tool_call>``
that did not parse, a bare ``{"name": ...}`` object, a fenced ```json block, a special
token such as ``<|im_end|>``. ``strip_markup`` removes all of it and ``has_markup`` says
whether there was any. The agent takes a reply that was nothing but markup for a failed
call, not for an answer. Citations such as ``[12]`` are text, not markup: they stay.
"""

from __future__ import annotations

import json
import re

__all__ = ["strip_markup", "has_markup"]

_TAG_NAMES = r"tools?|tool_calls?|tool_response|function_calls?|functions?|think"
_BLOCK = re.compile(rf"<({_TAG_NAMES})\b[^>]*>.*?</\1\s*>", re.IGNORECASE | re.DOTALL)
_TAG = re.compile(rf"</?(?:{_TAG_NAMES})\b[^>]*>", re.IGNORECASE)
_SPECIAL = re.compile(r"<\|[^|<>]{1,40}\|>")  # <|im_start|>, <|im_end|>, <|endoftext|>, <|tool_call|>
_FENCE = re.compile(r"```[^\n`]*\n?.*?(?:```|$)", re.DOTALL)  # a code block (closed or cut by the token limit)
_JSON_START = re.compile(r"[{\[]")
_OPEN_OBJECT = re.compile(r"\{\s*\"")  # an object cut short by the token limit: prose never has {"
_decoder = json.JSONDecoder()


def _is_structure(value: object) -> bool:
    """An object, or a list holding an object or nothing: what a call looks like (``[12]`` is a citation)."""
    if isinstance(value, dict):
        return True
    return isinstance(value, list) and (not value or any(isinstance(v, (dict, list)) for v in value))


def _without_json(text: str) -> str:
    """`text` without JSON objects (and lists of them) and without an object left unfinished at its end."""
    kept, i = [], 0
    while (match := _JSON_START.search(text, i)) is not None:
        start = match.start()
        try:
            value, end = _decoder.raw_decode(text, start)
        except ValueError:
            if _OPEN_OBJECT.match(text, start):
                kept.append(text[i:start])
                return "".join(kept)
            kept.append(text[i:start + 1])
            i = start + 1
            continue
        kept.append(text[i:start] if _is_structure(value) else text[i:end])
        i = end
    kept.append(text[i:])
    return "".join(kept)


def strip_markup(text: str) -> str:
    """`text` without tool tags, template tokens, code blocks and JSON objects; spaces tidied. Taught in 06_agent."""
    cleaned = _FENCE.sub(" ", str(text or ""))
    cleaned = _BLOCK.sub(" ", cleaned)
    cleaned = _TAG.sub(" ", _SPECIAL.sub(" ", cleaned))
    cleaned = _without_json(cleaned)
    cleaned = re.sub(r"[ \t]+", " ", cleaned)
    cleaned = re.sub(r" *\n\s*", "\n", cleaned).strip()
    return re.sub(r"\s+([.,;:!?])", r"\1", cleaned)


def has_markup(text: str) -> bool:
    """Did `text` hold any model markup (anything ``strip_markup`` removes besides spacing)?"""
    def squeeze(value: str) -> str:
        return re.sub(r"\s+", "", value)

    return squeeze(strip_markup(text)) != squeeze(str(text or ""))
