"""Texts for people: cut at a word boundary, Russian number agreement, prose from the run (taught in 01_corpus).

A number in a notebook's prose is printed by the run that computed it (``say``), with
its noun in the right form (``count(3, "новость", "новости", "новостей")`` -> «3 новости»).
"""

from __future__ import annotations

__all__ = ["PREVIEW_CHARS", "ERROR_CHARS", "VALUE_CHARS", "shorten", "plural", "count", "model_size", "say"]

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


def plural(number: float, one: str, few: str, many: str) -> str:
    """The Russian noun form after `number`: 1 новость, 3 новости, 5 новостей, 21 новость, 12 новостей.

    A fractional number takes the `few` form (0,5 запроса).
    """
    if not float(number).is_integer():
        return few
    n = abs(int(number)) % 100
    if 11 <= n <= 14:
        return many
    if n % 10 == 1:
        return one
    if 2 <= n % 10 <= 4:
        return few
    return many


def count(number: int, one: str, few: str, many: str) -> str:
    """`number` with its noun in the right form: ``count(3, "новость", "новости", "новостей")`` -> «3 новости»."""
    return f"{number} {plural(number, one, few, many)}"


_SCALES = {"K": "тыс.", "M": "млн", "B": "млрд", "T": "трлн"}


def model_size(parameter_size: str) -> str:
    """Ollama's ``details.parameter_size`` for people: "1.5B" -> «1,5 млрд параметров», "494.03M" -> «494 млн параметров».

    Taught in 06_agent. A value in another form is returned as it is.
    """
    text = str(parameter_size).strip()
    scale = _SCALES.get(text[-1:].upper())
    try:
        value = float(text[:-1])
    except ValueError:
        scale = None
    if scale is None:
        return text
    shown = f"{value:.1f}".rstrip("0").rstrip(".") if value < 10 else f"{value:.0f}"
    return f"{shown.replace('.', ',')} {scale} параметров"


def say(markdown: str) -> None:
    """Show prose that contains numbers computed in this run: as Markdown in Jupyter, as text elsewhere."""
    try:
        from IPython.display import Markdown, display
    except ImportError:  # outside IPython
        print(markdown)
        return
    display(Markdown(markdown))
