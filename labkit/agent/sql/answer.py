"""The SQL agent's answer: the rows the query returned, written for a person, with nothing invented (19_sql_agent).

The answer is built from the result alone, without another model call: a single value is said
as it is, a few rows become a small table, more rows are cut with a count of the rest. A model's
retelling of numbers is where small models invent; a table cannot.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from labkit.core.text import count, shorten

__all__ = ["SHOWN_ROWS", "format_value", "format_rows"]

SHOWN_ROWS = 10  # rows of a result written into the answer; the rest are counted
CELL_CHARS = 60


def format_value(value: Any) -> str:
    """One cell for a person: 41 637 290,5 (no trailing zeros), 15.09.2026, «да»/«нет», «—» for NULL."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "да" if value else "нет"
    if isinstance(value, (int, float, Decimal)):
        number = Decimal(str(value))
        number = number.quantize(Decimal("0.01")) if number != number.to_integral_value() else number.quantize(Decimal(1))
        whole, _, fraction = f"{number:f}".partition(".")
        sign, digits = ("-", whole[1:]) if whole.startswith("-") else ("", whole)
        grouped = f"{int(digits):,}".replace(",", "\u00a0") if len(digits) > 4 else digits
        fraction = fraction.rstrip("0")
        return sign + grouped + ("," + fraction if fraction else "")
    if isinstance(value, datetime.datetime):
        return value.strftime("%d.%m.%Y %H:%M") if value.time() != datetime.time() else value.strftime("%d.%m.%Y")
    if isinstance(value, datetime.date):
        return value.strftime("%d.%m.%Y")
    return shorten(str(value), CELL_CHARS)


def format_rows(columns: Sequence[str], rows: Sequence[Sequence[Any]], truncated: bool = False,
                shown: int = SHOWN_ROWS) -> str:
    """The answer text for a query's result (Russian). Taught in 19_sql_agent."""
    if not rows:
        return "Запрос выполнен, но не вернул ни одной строки: таких данных в базе магазина нет."
    if len(rows) == 1 and len(columns) == 1:
        return f"Ответ по данным магазина: {format_value(rows[0][0])}."
    header = "| " + " | ".join(columns) + " |"
    lines = [header, "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(format_value(v).replace("|", "/") for v in row) + " |" for row in rows[:shown]]
    rest = len(rows) - shown
    more = ""
    if rest > 0 or truncated:
        more = (f"\n\nПоказаны первые {count(min(len(rows), shown), 'строка', 'строки', 'строк')}"
                + (f" из {len(rows)}" if not truncated else f"; запрос вернул больше {len(rows)}, лишние отброшены")
                + ".")
    return "Данные магазина:\n\n" + "\n".join(lines) + more
