"""Metadata filters applied before search: only the rows they let through are ranked (taught in 16_kb_codes).

A knowledge base keeps a document's type, rubric, status, date and products as fields beside its
text; a reader who wants «только действующие инструкции» should not see an archived policy
however close its words are. ``Filters`` holds such conditions, checked against the corpus:

* a text field takes one value or a list of them (any of); a list field (``Field.many``, e.g. the
  products) matches when any of its items is accepted; a field with ``names`` (type, status)
  takes only those values;
* a date or integer field takes a range ``{"from": ..., "to": ...}`` (both ends included, either
  may be left out).

``Filters.ids(lab)`` runs them as one ``SELECT id ... WHERE`` over the corpus table; a search
pipeline with a filter stage (``Pipeline.where``, ``labkit.retrieval.pipeline``) asks its
branches to rank only those ids (``within``). A branch restricts its own table with
``within_source``: ``FROM (SELECT * FROM t WHERE id = ANY(%(within)s)) AS t``, which Postgres
flattens into a plain filter on ``t``, so an index on ``t`` still serves it.

``query_filters`` reads the ``filters`` of labelled queries (the knowledge base's ``filtered`` kind).
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from psycopg import sql

from labkit.core.corpus import ID_COLUMN, MANY_JOINER, Corpus, DataError, read_records

if TYPE_CHECKING:
    from labkit.core.context import Lab

__all__ = ["MAX_VALUES", "MAX_VALUE_CHARS", "Match", "Range", "Filters", "within_source", "query_filters"]

MAX_VALUES = 100  # accepted values of one field: a filter, not a list of every product
MAX_VALUE_CHARS = 200
_RANGE_KEYS = ("from", "to")
_RANGE_TYPES = {"date": "date", "integer": "integer"}


@dataclass(frozen=True)
class Match:
    """A text field (or list field) whose value must be one of `values`."""

    field: str
    values: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.field}={self.values[0]}" if len(self.values) == 1 else f"{self.field}∈{{{', '.join(self.values)}}}"


@dataclass(frozen=True)
class Range:
    """A date or integer field between `low` and `high` (both included; None: open), as ISO text or digits."""

    field: str
    low: str | None
    high: str | None

    def __str__(self) -> str:
        if self.low is not None and self.high is not None:
            return f"{self.field}∈[{self.low}, {self.high}]"
        return f"{self.field}≥{self.low}" if self.low is not None else f"{self.field}≤{self.high}"


def _text_value(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"фильтр {name!r}: значения — непустые строки, а дано {value!r}")
    if len(value) > MAX_VALUE_CHARS or "\x00" in value:
        raise ValueError(f"фильтр {name!r}: значение — не длиннее {MAX_VALUE_CHARS} символов и без NUL, а дано {value[:40]!r}")
    return value


def _condition(name: str, value: Any) -> Match | Range:
    """One condition from its JSON-like form: a string, a list of strings, or {"from": .., "to": ..}."""
    if isinstance(value, Mapping):
        unknown = set(value) - set(_RANGE_KEYS)
        if unknown or not value:
            raise ValueError(f"фильтр {name!r}: у диапазона ключи 'from' и/или 'to', а даны {sorted(map(str, value))}")
        ends = [value.get(key) for key in _RANGE_KEYS]
        for end in ends:
            if end is not None and (isinstance(end, bool) or not isinstance(end, (str, int))):
                raise ValueError(f"фильтр {name!r}: концы диапазона — даты ISO или целые числа, а дано {end!r}")
        if all(end is None for end in ends):
            raise ValueError(f"фильтр {name!r}: диапазону нужен 'from' или 'to'")
        low, high = (None if end is None else str(end) for end in ends)
        return Range(name, low, high)
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, (list, tuple)) or not values:
        raise ValueError(f"фильтр {name!r}: нужна строка, непустой список строк или диапазон, а дано {value!r}")
    if len(values) > MAX_VALUES:
        raise ValueError(f"фильтр {name!r}: не больше {MAX_VALUES} значений, а дано {len(values)}")
    return Match(name, tuple(dict.fromkeys(_text_value(name, v) for v in values)))


@dataclass(frozen=True)
class Filters:
    """Conditions on a corpus' metadata fields, all of which a row must meet. Taught in 16_kb_codes.

    ``Filters.of({"type": "manual", "status": "действует", "date": {"from": "2025-01-01"}})``;
    ``str()`` reads «type=manual, status=действует, date≥2025-01-01».
    """

    conditions: tuple[Match | Range, ...] = ()

    @classmethod
    def of(cls, conditions: Mapping[str, Any] | None = None, **more: Any) -> Filters:
        """Filters from {field: value(s) or range}; the shape is checked here, the fields by ``check(corpus)``."""
        given = {**(conditions or {}), **more}
        for name in given:
            if not isinstance(name, str) or not name:
                raise ValueError(f"поле фильтра — непустая строка, а дано {name!r}")
        return cls(tuple(_condition(name, value) for name, value in given.items()))

    def __bool__(self) -> bool:
        return bool(self.conditions)

    def __str__(self) -> str:
        return ", ".join(map(str, self.conditions)) or "no conditions"

    def check(self, corpus: Corpus) -> None:
        """Raise ValueError naming the problem when a condition does not fit `corpus`' fields."""
        fields = {f.name: f for f in corpus.fields}
        seen: set[str] = set()
        for condition in self.conditions:
            name = condition.field
            if name not in fields:
                raise ValueError(f"у корпуса {corpus.name!r} нет поля {name!r} для фильтра; "
                                 f"поля: {', '.join(fields)}")
            if name in seen:
                raise ValueError(f"фильтр {name!r} задан дважды")
            seen.add(name)
            field = fields[name]
            if isinstance(condition, Match):
                if field.sql_type != "text":
                    raise ValueError(f"фильтр {name!r}: поле типа {field.sql_type}, нужен диапазон "
                                     "{'from': ..., 'to': ...}")
                unknown = [v for v in condition.values if field.names and v not in field.names]
                if unknown:
                    raise ValueError(f"фильтр {name!r}: {', '.join(map(repr, unknown))} — нет среди значений "
                                     f"{', '.join(field.names)}")
                continue
            if field.sql_type not in _RANGE_TYPES:
                raise ValueError(f"фильтр {name!r}: диапазон бывает только у поля даты или целого числа, а это поле текстовое")
            ends = [end for end in (condition.low, condition.high) if end is not None]
            try:
                parsed = [datetime.date.fromisoformat(end) if field.sql_type == "date" else int(end) for end in ends]
            except ValueError:
                kind = "датами ISO ГГГГ-ММ-ДД" if field.sql_type == "date" else "целыми числами"
                raise ValueError(f"фильтр {name!r}: концы диапазона должны быть {kind}, а даны {ends}") from None
            if len(parsed) == 2 and parsed[0] > parsed[1]:  # type: ignore[operator]
                raise ValueError(f"фильтр {name!r}: 'from' {ends[0]} позже 'to' {ends[1]}")

    def where(self, corpus: Corpus) -> tuple[sql.Composable, dict[str, Any]]:
        """The conditions as one SQL predicate over `corpus`' table (checked first) and its parameters."""
        self.check(corpus)
        parts: list[sql.Composable] = []
        params: dict[str, Any] = {}
        for number, condition in enumerate(self.conditions):
            column = sql.Identifier(condition.field)
            if isinstance(condition, Match):
                params[f"f{number}"] = list(condition.values)
                test = ("string_to_array({column}, {joiner}) && {p}::text[]" if corpus.field(condition.field).many
                        else "{column} = ANY({p}::text[])")
                parts.append(sql.SQL(test).format(column=column, joiner=sql.Literal(MANY_JOINER),
                                                  p=sql.Placeholder(f"f{number}")))
                continue
            cast = sql.SQL(_RANGE_TYPES[corpus.field(condition.field).sql_type])
            for end, value, operator in (("lo", condition.low, ">="), ("hi", condition.high, "<=")):
                if value is not None:
                    params[f"f{number}{end}"] = value
                    parts.append(sql.SQL("{column} {op} {p}::{cast}").format(
                        column=column, op=sql.SQL(operator), p=sql.Placeholder(f"f{number}{end}"), cast=cast))
        return (sql.SQL(" AND ").join(parts) if parts else sql.SQL("true")), params

    def ids(self, lab: Lab) -> list[int]:
        """The ids of the rows of the lab's corpus that meet every condition, ascending. Taught in 16_kb_codes."""
        predicate, params = self.where(lab.corpus)
        statement = sql.SQL("SELECT {id} FROM {table} WHERE {predicate} ORDER BY {id}").format(
            id=sql.Identifier(ID_COLUMN), table=sql.Identifier(lab.corpus.table), predicate=predicate)
        return [row[0] for row in lab.conn.execute(statement, params).fetchall()]


def within_source(table: str, within: bool, alias: bool = True) -> sql.Composable:
    """`table` as a FROM item: the table itself, or only its rows whose id is in %(within)s (an integer array).

    The restricted form is a subquery named like the table (`alias`; False when the statement names it itself).
    """
    name = sql.Identifier(table)
    if not within:
        return name
    rows = sql.SQL("(SELECT * FROM {name} WHERE {id} = ANY(%(within)s::integer[]))").format(
        name=name, id=sql.Identifier(ID_COLUMN))
    return sql.SQL("{rows} AS {name}").format(rows=rows, name=name) if alias else rows


def query_filters(path: str | Path) -> dict[str, Filters]:
    """The ``filters`` of each labelled query that has them, by query text (DataError naming file:line on a bad one)."""
    path = Path(path)
    found: dict[str, Filters] = {}
    for number, record in read_records(path):
        if "filters" not in record:
            continue
        where = f"{path}:{number}"
        query, given = record.get("query"), record["filters"]
        if not isinstance(query, str) or not isinstance(given, dict) or not given:
            raise DataError(f"{where}: 'filters' must be a non-empty object beside a string 'query', got {given!r}")
        try:
            found[query] = Filters.of(given)
        except ValueError as exc:
            raise DataError(f"{where}: {exc}") from None
    return found

