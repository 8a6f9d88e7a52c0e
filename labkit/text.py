"""Short texts for people: cut at a word boundary with «…», one set of lengths (taught in 06_agent)."""

from __future__ import annotations

__all__ = ["PREVIEW_CHARS", "ERROR_CHARS", "VALUE_CHARS", "shorten"]

PREVIEW_CHARS = 120  # a trace row's preview of a tool result or an answer
ERROR_CHARS = 160  # an exception's text quoted inside a message
VALUE_CHARS = 40  # a model-supplied value quoted back to the model


def shorten(text: str, width: int) -> str:
    """`text` on one line, at most `width` characters, cut at a word boundary and ended with «…»."""
    flat = " ".join(str(text).split())
    if len(flat) <= width:
        return flat
    cut = flat[: max(width - 1, 1)]
    if " " in cut and not flat[len(cut)].isspace():
        cut = cut.rsplit(" ", 1)[0]
    return cut.rstrip(" ,.;:") + "…"
