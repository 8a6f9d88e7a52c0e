"""What the catalog and the question can add to a failed or doomed query, so the model's next try can fix it (19_sql_agent).

The catalog is read once per agent (``labkit.agent.sql.schema``); the functions here only read text.

Four mistakes of a small model are silent or vague in Postgres's own words:

* **a value the column never holds**: ``WHERE city = 'Перми'`` (the question's case form) or
  ``name = 'ТехноЗвук Buds 3'`` (a shortened name) runs fine and counts 0 — an answer that reads as
  true. ``unknown_values`` finds each ``column = 'text'`` (and ``<>``, ``IN (...)``) whose column has a
  known, short list of values (``schema.column_values``, from the planner's statistics like the schema's
  listing) and whose text is none of them; the check then refuses the query once and names the
  condition to write instead (``value_message``). A literal the model keeps on its next try runs as
  written: a question may ask about a city with no orders, and 0 is then the answer;
* **a condition the question never asked for**: the worked examples of the prompt filter by a category
  three times in four, and the 1.5B model copied ``p.category = 'наушники'`` into a question about
  returns of every product. ``unasked_values`` finds each compared text (dates aside) none of whose words
  the question shares a start of four letters with («Казани» asks for 'Казань', «с наушниками» for
  'наушники'). On every labelled question's gold SQL (79 compared texts) it finds none. A value of the
  prompt's worked examples (``example_literals``) the question never names was copied: the agent cuts the
  condition out (``without_conditions``). Any other is refused once with the query to write
  (``unasked_message``): a question may name a value in other words («на сайте» for 'онлайн'), and a
  condition the model keeps runs as written;
* **rows counted where the question counts orders**: «Сколько заказов содержат ноутбуки?» over a join with
  ``order_items`` is ``count(DISTINCT i.order_id)``; ``count(*)`` counts an order once per matching item
  (217 rows for 211 orders), with no error. The prompt's rule says so, and the 1.5B
  model still wrote ``count(*)`` on a tune question. ``miscounted_orders`` finds a count without DISTINCT
  over ``order_items`` when the question counts orders (``Сколько заказов``, ``Сколько оплаченных заказов``,
  not ``Сколько строк заказов``), and the check writes the count itself (``count_orders``: the query's one
  ``count(...)`` becomes ``count(DISTINCT i.order_id)``, the trace says so) or, when the query counts more than once,
  refuses it once with the count to write (``miscount_message``). Refused, the 1.5B model wrote the right count on
  one tune question and on another spent its last attempt on it;
* **a column taken from the wrong table**: Postgres says ``column r.product_id does not exist``
  but not where the column is. ``column_hint`` names the tables that have it (``schema.table_columns``),
  or that none has, and says the way out of an error whose text does not (``EXTRACT`` from ``date -
  date``, which is already days).

The hint goes beside Postgres's error in the next prompt (``sql_messages``), never into the error itself:
the trace and ``ask --json`` show Postgres's words as they were.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

__all__ = ["UnknownValue", "unknown_values", "value_message", "unasked_values", "example_literals", "without_conditions", "unasked_message",
           "miscounted_orders", "count_orders", "miscount_message", "column_hint"]

_TEXT = r"'((?:[^']|'')*)'"
_COMPARED = re.compile(r"\b(\w+)\s*(?:=|<>|!=)\s*" + _TEXT)
_LISTED = re.compile(r"\b(\w+)\s+(?:not\s+)?in\s*\(\s*(" + _TEXT + r"(?:\s*,\s*" + _TEXT + r")*)\s*\)", re.I)
_MISSING_COLUMN = re.compile(r'column "?(?:\w+"?\.)?"?(\w+)"? does not exist')
# Postgres errors whose text does not say the way out, with what does (checked in order).
_ERROR_HINTS = (
    (re.compile(r"extract\(unknown, integer\) does not exist"),
     "разность двух дат (date - date) в PostgreSQL — уже целое число дней: EXTRACT к ней не нужен, бери её как есть."),
)
CLOSEST = 3  # how many similar values a refusal names
_DATE = re.compile(r"\d{4}-\d\d-\d\d")
_WORDS = re.compile(r"\w+")
# «Сколько заказов», «Сколько оплаченных заказов» (an adjective in the genitive plural), not «Сколько строк заказов».
_COUNTS_ORDERS = re.compile(r"\bсколько\s+(?:[а-яё]+(?:ых|их)\s+)?заказ", re.IGNORECASE)
_COUNT_WITHOUT_DISTINCT = re.compile(r"\bcount\s*\(\s*(?!distinct\b)", re.IGNORECASE)
_ITEMS_ALIAS = re.compile(r"\border_items\b(?:\s+(?:as\s+)?(\w+))?", re.IGNORECASE)
_SUBQUERY = re.compile(r"\(\s*select\b", re.IGNORECASE)
_NOT_ALIAS = {"as", "join", "inner", "left", "right", "full", "cross", "on", "where", "group", "order", "limit", "using"}
SHARED_START = 4  # letters a literal's word and a question's word must start with alike («Казани» ~ 'Казань')


class UnknownValue(NamedTuple):
    """A text literal compared with a column that never holds it, and the column's values most like it."""

    column: str
    literal: str
    closest: tuple[str, ...]
    held_by: tuple[str, ...] = ()  # other columns that do hold the literal ('одобрен' is a status, not a kind)


def _closest(literal: str, values: Iterable[str]) -> tuple[str, ...]:
    """The values most like `literal`: those containing it or contained in it first, then by spelling."""
    ordered = sorted(values)
    folded = literal.casefold()
    inside = [v for v in ordered if folded and (folded in v.casefold() or v.casefold() in folded)]
    alike = difflib.get_close_matches(literal, ordered, n=CLOSEST, cutoff=0.5)
    return tuple(dict.fromkeys(inside + alike))[:CLOSEST]


def _compared(sql: str) -> list[tuple[str, str]]:
    """(column, text) of each ``column = 'text'`` / ``<>`` / ``IN ('a', ...)`` in `sql`, quotes unescaped."""
    compared = [(m.group(1), m.group(2)) for m in _COMPARED.finditer(sql)]
    for m in _LISTED.finditer(sql):
        compared += [(m.group(1), text) for text in re.findall(_TEXT, m.group(2))]
    return [(column, text.replace("''", "'")) for column, text in compared]


def unknown_values(sql: str, values: Mapping[str, set[str]]) -> list[UnknownValue]:
    """Each ``column = 'text'`` / ``<>`` / ``IN ('a', ...)`` in `sql` whose column never holds that text."""
    found = []
    for column, literal in _compared(sql):
        held = values.get(column.lower())
        if held and literal not in held:
            owners = tuple(name for name, other in sorted(values.items()) if literal in other)
            found.append(UnknownValue(column.lower(), literal, _closest(literal, held), owners))
    return list(dict.fromkeys(found))


def value_message(unknown: Iterable[UnknownValue]) -> str:
    """The check's refusal, in Russian: which condition matches no row, and the condition to write instead.

    Said as the condition to write (``Напиши city = 'Пермь'``), not as advice: told only that a value is
    missing and which values are like it, the 1.5B model wrote the same literal again in every tune
    question tried.
    """
    parts = []
    for item in unknown:
        condition = f"{item.column} = '{item.literal}'"
        if item.closest:
            instead = " или ".join(f"{item.column} = '{value}'" for value in item.closest)
        elif item.held_by:
            instead = " или ".join(f"{owner} = '{item.literal}'" for owner in item.held_by)
        else:
            instead = ""
        parts.append(f"в столбце {item.column} нет значения '{item.literal}', и условие {condition} не совпадёт "
                     "ни с одной строкой." + (f" Напиши {instead}." if instead else
                                               " Возьми значение из комментария к столбцу."))
    return " ".join(part[0].upper() + part[1:] for part in parts)


def _words(text: str) -> list[str]:
    return [word.casefold().replace("ё", "е") for word in _WORDS.findall(text)]


def _shares_a_word(literal: str, question: list[str]) -> bool:
    """Does some word of `literal` start like a word of `question` (``SHARED_START`` letters, or the whole of the
    shorter one), or hold a number, or sit inside a question's word («43F5» in «ТехноВид-43F5»)?"""
    for word in _words(literal):
        if any(ch.isdigit() for ch in word) and any(word in asked or asked in word for asked in question if len(asked) > 1):
            return True
        for asked in question:
            start = min(SHARED_START, len(word), len(asked))
            if start >= 2 and word[:start] == asked[:start] and (start == SHARED_START or len(word) == len(asked)):
                return True
    return False


def unasked_values(sql: str, question: str) -> list[tuple[str, str]]:
    """(column, text) of each text compared in `sql` (dates aside) that shares no word with `question`."""
    asked = _words(question)
    return list(dict.fromkeys((column.lower(), literal) for column, literal in _compared(sql)
                              if not _DATE.fullmatch(literal) and not _shares_a_word(literal, asked)))


def example_literals(prompt: str) -> frozenset[str]:
    """The texts compared in the ```sql blocks of `prompt` (its worked examples), dates aside."""
    blocks = re.findall(r"```sql\s*(.*?)```", prompt, re.S)
    return frozenset(literal for block in blocks for _, literal in _compared(block) if not _DATE.fullmatch(literal))


def without_conditions(sql: str, unasked: Iterable[tuple[str, str]]) -> str:
    """`sql` with each ``[alias.]column = 'text'`` of `unasked` and its AND taken out of the WHERE (a WHERE left
    empty goes too); "" when some condition is not written that way (in a list, with OR, ...)."""
    for column, literal in unasked:
        quoted = "'" + literal.replace("'", "''") + "'"
        condition = rf"(?:\w+\.)?{re.escape(column)}\s*=\s*{re.escape(quoted)}"
        for pattern, keep in ((rf"\s+and\s+{condition}(?!\s*\bor\b)", ""),
                              (rf"(?<!\bor)(\bwhere\s+){condition}\s+and\s+", r"\1"),
                              (rf"\s+where\s+{condition}(?=\s*(?:group\b|order\b|limit\b|$))", "")):
            cut, found = re.subn(pattern, keep, sql, count=1, flags=re.I)
            if found:
                sql = cut
                break
        else:
            return ""
    return sql


def unasked_message(sql: str, unasked: Sequence[tuple[str, str]]) -> str:
    """The check's refusal, in Russian: the conditions the question does not ask for, and the query without them.

    Said as the query to write, not as advice: told to drop the condition, the 1.5B model wrote the same query again.
    """
    conditions = ", ".join(f"{column} = '{literal}'" for column, literal in unasked)
    cut = without_conditions(sql, unasked)
    said = f"В вопросе нет условия {conditions}."
    if cut:
        return f"{said} Напиши запрос без него:\n```sql\n{cut}\n```"
    return f"{said} Убери его из WHERE."


def miscounted_orders(sql: str, question: str) -> str:
    """The ``order_items`` reference (its alias, else the table's name) when `question` counts orders and `sql`
    counts rows of a join with ``order_items`` (a ``count`` without DISTINCT); "" when it does not."""
    if not _COUNTS_ORDERS.search(question) or not _COUNT_WITHOUT_DISTINCT.search(sql) or _SUBQUERY.search(sql):
        return ""  # a subquery (``id IN (SELECT order_id FROM order_items …)``) may count orders rightly: left alone
    found = _ITEMS_ALIAS.search(sql)
    if found is None:
        return ""
    alias = found.group(1)
    return alias if alias and alias.lower() not in _NOT_ALIAS else "order_items"


def count_orders(sql: str, items: str) -> str:
    """`sql` with its one ``count(...)`` written ``count(DISTINCT <items>.order_id)``; "" when it counts more than once."""
    counts = list(_COUNT_WITHOUT_DISTINCT.finditer(sql))
    if len(counts) != 1 or len(re.findall(r"\bcount\s*\(", sql, re.IGNORECASE)) != 1:
        return ""
    end = sql.find(")", counts[0].end())
    if end < 0 or "(" in sql[counts[0].end():end]:  # count(coalesce(...)): not a plain count to rewrite
        return ""
    return f"{sql[:counts[0].start()]}count(DISTINCT {items}.order_id){sql[end + 1:]}"


def miscount_message(items: str) -> str:
    """The check's refusal, in Russian: the question counts orders, the query counts rows of ``order_items``."""
    return (f"Вопрос спрашивает, сколько заказов, а запрос считает строки: в одном заказе бывает несколько строк "
            f"order_items, и count без DISTINCT посчитает такой заказ несколько раз. Напиши count(DISTINCT "
            f"{items}.order_id).")


def column_hint(error: str, tables: Mapping[str, list[str]]) -> str:
    """What the catalog adds to Postgres's `error`: for ``column ... does not exist`` the tables that have that
    column (or that none has it); for an error whose way out Postgres does not say (EXTRACT from a date
    difference), that way; else ""."""
    for pattern, hint in _ERROR_HINTS:
        if pattern.search(error or ""):
            return hint[0].upper() + hint[1:]
    missing = _MISSING_COLUMN.search(error or "")
    if not missing:
        return ""
    column = missing.group(1)
    owners = tables.get(column, [])
    if not owners:
        return f"Столбца {column} нет ни в одной таблице: возьми столбец из схемы."
    where = "таблицах " + ", ".join(owners) if len(owners) > 1 else "таблице " + owners[0]
    return (f"Столбец {column} есть только в {where}: возьми его оттуда, соединив таблицы через JOIN ... ON "
            "по REFERENCES.")
