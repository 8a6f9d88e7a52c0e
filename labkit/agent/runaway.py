"""A reply that ran away: one character or one word over and over until the token limit (taught in 20_supervisor).

Asked for a sum it did not have, the 1.5B model wrote «Всего вернули …: 1000000000…» for three hundred
tokens. Greedy decoding has no way out of such a loop, and the run is no answer: ``cut_runaway`` ends the
text where the loop begins (``RUN_CHARS`` of one character, or ``RUN_WORDS`` of one word in a row) and
marks the cut with «…»; ``ran_away`` says whether it had to. A long number or a repeated word in a real
answer («очень-очень») stays far below both.
"""

from __future__ import annotations

import re

__all__ = ["RUN_CHARS", "RUN_WORDS", "cut_runaway", "ran_away"]

RUN_CHARS = 12  # one character this many times in a row: «000000000000», «!!!!!!!!!!!!»
RUN_WORDS = 5  # one word this many times in a row, spaces or punctuation between
_CHARS = re.compile(rf"(\S)\1{{{RUN_CHARS - 1},}}")
_WORDS = re.compile(rf"\b(\w+)\b(?:\W+\1\b){{{RUN_WORDS - 1},}}", re.IGNORECASE)


def _loop_start(text: str) -> int | None:
    """Where the first loop begins: the start of the word it begins in («1000…» is cut before its «1»)."""
    starts = [match.start() for pattern in (_CHARS, _WORDS) if (match := pattern.search(text)) is not None]
    if not starts:
        return None
    start = min(starts)
    return len(re.sub(r"\S+$", "", text[:start]))


def ran_away(text: str) -> bool:
    """Does `text` hold a run of one character or one word long enough to be a loop?"""
    return _loop_start(text) is not None


def cut_runaway(text: str) -> str:
    """`text` up to where a loop begins, the cut marked with «…»; `text` itself when there is none."""
    start = _loop_start(text)
    if start is None:
        return text
    kept = text[:start].rstrip(" :,;-")
    return f"{kept}…" if kept else ""
