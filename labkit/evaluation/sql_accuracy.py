"""SQL execution accuracy: does the agent's query return what a gold query returns? (taught in 19_sql_agent)

The labelled data questions live in ``labkit/data/shop/questions.jsonl``, written before any agent
answered them: ``id``, ``question`` (Russian), ``kind`` (``data``), a fixed ``split`` (``tune`` to
improve prompts on, ``report`` to measure on) and ``gold_sql``, a query whose result is the answer
(``ordered: true`` when the question asks for an order). Both queries run under the same read-only
role, and the results are compared, not the SQL texts (the measure of Spider and BIRD):

* every column of the gold result must appear among the agent's columns (in any position, with any
  name): an answer may add a column (a product's code beside its name) but not lose one;
* the rows must match one to one: as multisets, or as lists when the question asks for an order;
* numbers match when equal to the cent, or when the agent's number is the gold value rounded to
  fewer decimals (560 for 559.91); a date matches the same day.
"""

from __future__ import annotations

import datetime
import itertools
import time
from collections.abc import Sequence
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import pandas as pd

from labkit.agent.sql.check import SqlRefused, check_select
from labkit.core.corpus import DATA_DIR, SPLITS, DataError, read_records
from labkit.evaluation.significance import Interval, bootstrap_ci
from labkit.store.shop.reader import ROW_CAP, run_select

if TYPE_CHECKING:
    import psycopg

    from labkit.agent.sql.graph import SqlAgent

__all__ = ["SQL_QUESTIONS_PATH", "SqlQuestion", "load_sql_questions", "same_value", "same_result",
           "GoldCheck", "check_against_gold", "evaluate_sql_agent", "SqlAccuracy", "sql_accuracy"]

SQL_QUESTIONS_PATH = DATA_DIR / "shop" / "questions.jsonl"
MAX_PERMUTED_COLUMNS = 12  # an agent's result wider than this is compared by its first columns only


class SqlQuestion(NamedTuple):
    """A data question with the gold query whose result answers it."""

    id: str
    question: str
    gold_sql: str
    split: str
    kind: str = "data"
    ordered: bool = False  # the question asks for an order: rows are compared as lists


def load_sql_questions(path: str | Path | None = None, split: str | None = None) -> list[SqlQuestion]:
    """Read the labelled data questions (default: the shop's). Taught in 19_sql_agent.

    Every record needs a unique ``id``, a ``question``, a ``split`` (tune or report) and a ``gold_sql`` that
    is one SELECT; a bad record is a DataError naming file:line. `split` keeps only that half.
    """
    if split is not None and split not in SPLITS:
        raise ValueError(f"unknown split {split!r}: expected one of {', '.join(SPLITS)}")
    path = Path(path) if path is not None else SQL_QUESTIONS_PATH
    questions: list[SqlQuestion] = []
    seen: set[str] = set()
    for number, record in read_records(path):
        where = f"{path}:{number}"
        values = {}
        for name in ("id", "question", "split", "gold_sql"):
            value = record.get(name)
            if not isinstance(value, str) or not value.strip():
                raise DataError(f"{where}: field {name!r} must be a non-empty string, got {value!r}")
            values[name] = value
        if values["split"] not in SPLITS:
            raise DataError(f"{where}: field 'split' must be one of {', '.join(SPLITS)}, got {values['split']!r}")
        if values["id"] in seen:
            raise DataError(f"{where}: duplicate id {values['id']!r}")
        seen.add(values["id"])
        try:
            gold = check_select(values["gold_sql"])
        except SqlRefused as refused:
            raise DataError(f"{where}: gold_sql is not one SELECT ({refused})") from None
        ordered = record.get("ordered", False)
        if not isinstance(ordered, bool):
            raise DataError(f"{where}: field 'ordered' must be true or false, got {ordered!r}")
        kind = record.get("kind", "data")
        if split is None or values["split"] == split:
            questions.append(SqlQuestion(values["id"], values["question"], gold, values["split"], str(kind), ordered))
    if not questions:
        raise DataError(f"{path}: no questions" + (f" with split {split!r}" if split else "") + " in the file")
    return questions


def _number(value: Any) -> Decimal | None:
    if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)):
        return None
    try:
        number = Decimal(str(value))
    except InvalidOperation:
        return None
    return number if number.is_finite() else None


def _day(value: Any) -> datetime.date | None:
    if isinstance(value, datetime.datetime):
        return value.date() if value.time() == datetime.time() else None
    return value if isinstance(value, datetime.date) else None


def same_value(got: Any, gold: Any) -> bool:
    """Does the agent's cell `got` say what the gold cell says? (numbers to the cent or coarser rounding; days)"""
    got_number, gold_number = _number(got), _number(gold)
    if got_number is not None and gold_number is not None:
        cent = Decimal("0.01")
        if got_number.quantize(cent) == gold_number.quantize(cent):
            return True
        decimals = max(0, -int(got_number.normalize().as_tuple().exponent))
        return (decimals < 2 and gold_number != gold_number.to_integral_value()
                and abs(got_number - gold_number) <= Decimal(5) / 10 ** (decimals + 1))
    got_day, gold_day = _day(got), _day(gold)
    if got_day is not None or gold_day is not None:
        return got_day == gold_day
    if isinstance(got, str) and isinstance(gold, str):
        return got.strip() == gold.strip()
    return bool(got == gold)


def _sort_key(row: Sequence[Any]) -> tuple[tuple[int, str], ...]:
    """An order of rows that puts equal-valued rows of both results in the same place."""
    key = []
    for value in row:
        number = _number(value)
        if number is not None:
            key.append((0, f"{number.quantize(Decimal('0.01')):+030.2f}"))
        elif (day := _day(value)) is not None:
            key.append((1, day.isoformat()))
        else:
            key.append((2, "" if value is None else str(value).strip()))
    return tuple(key)


def same_result(gold_rows: Sequence[Sequence[Any]], got_rows: Sequence[Sequence[Any]], ordered: bool = False,
                gold_columns: int | None = None) -> bool:
    """Does the agent's result hold the gold result? (see the module docstring) Taught in 19_sql_agent."""
    if len(gold_rows) != len(got_rows):
        return False
    width = gold_columns if gold_columns is not None else (len(gold_rows[0]) if gold_rows else 0)
    if not gold_rows:
        return True
    got_width = min(len(got_rows[0]), MAX_PERMUTED_COLUMNS)
    gold = [tuple(r) for r in gold_rows]
    if not ordered:
        gold = sorted(gold, key=_sort_key)
    for columns in itertools.permutations(range(got_width), width):
        projected = [tuple(row[c] for c in columns) for row in got_rows]
        if not ordered:
            projected = sorted(projected, key=_sort_key)
        if all(same_value(g, e) for got_row, gold_row in zip(projected, gold) for g, e in zip(got_row, gold_row)):
            return True
    return False


class GoldCheck(NamedTuple):
    """An agent's rows next to the gold query's: ``correct`` when the rows hold the gold result."""

    correct: bool
    gold_rows: list[tuple[Any, ...]]
    got_rows: list[tuple[Any, ...]]


def check_against_gold(reader: psycopg.Connection[Any], gold_sql: str, got_rows: Sequence[Sequence[Any]] | None,
                       ordered: bool = False, row_cap: int = ROW_CAP) -> GoldCheck:
    """Run `gold_sql` as the shop's `reader` and compare the rows an agent got (`got_rows`) with its result.

    Taught in 19_sql_agent (the evaluation) and 20_supervisor (an answer a lesson shows is checked, not trusted).
    `got_rows` None (no query of the agent ran) is never correct. A gold query that fails or overflows
    `row_cap` raises ``DataError``.
    """
    gold = run_select(reader, gold_sql, row_cap=row_cap)
    if not gold.ok or gold.truncated:
        problem = gold.error.splitlines()[0] if gold.error else f"more than {row_cap} rows"
        raise DataError(f"the gold query does not give a result to compare with: {problem}")
    got = [tuple(row) for row in got_rows or []]
    correct = got_rows is not None and same_result(gold.rows, got, ordered, gold_columns=len(gold.columns))
    return GoldCheck(correct, [tuple(row) for row in gold.rows], got)


def evaluate_sql_agent(agent: SqlAgent, questions: Sequence[SqlQuestion]) -> pd.DataFrame:
    """Each question through `agent`, its result compared with the gold query's. Taught in 19_sql_agent.

    One row per question: whether the result is right, the seconds the agent took, how many of its
    queries failed, whether it handed the question to a human, and both SQL texts.
    """
    rows = []
    for question in questions:
        try:  # a broken gold query fails before the model is asked
            gold = check_against_gold(agent.reader, question.gold_sql, None, row_cap=agent.row_cap).gold_rows
        except DataError as exc:
            raise DataError(f"{question.id}: {exc}") from None
        start = time.perf_counter()
        result = agent.ask(question.question)
        seconds = time.perf_counter() - start
        correct = result.ok and not result.truncated and same_result(gold, result.rows, question.ordered)
        rows.append({"id": question.id, "question": question.question, "split": question.split,
                     "correct": correct, "seconds": round(seconds, 2), "errors": result.error_count,
                     "requires_human": result.requires_human, "sql": result.sql, "gold_sql": question.gold_sql,
                     "first_error": next((a["error"].splitlines()[0] for a in result.attempts if not a["ok"]), "")})
    return pd.DataFrame(rows)


class SqlAccuracy(NamedTuple):
    """Execution accuracy with its bootstrap interval, seconds per question, and how the errors went."""

    questions: int
    accuracy: Interval
    seconds_per_question: float
    corrected: int  # right in the end after at least one failed query
    handed_over: int  # ended with requires_human


def sql_accuracy(frame: pd.DataFrame) -> SqlAccuracy:
    """Summarise ``evaluate_sql_agent``'s rows. Taught in 19_sql_agent."""
    if frame.empty:
        raise ValueError("no evaluated questions")
    return SqlAccuracy(
        questions=len(frame),
        accuracy=bootstrap_ci(frame["correct"].astype(float)),
        seconds_per_question=float(frame["seconds"].mean()),
        corrected=int((frame["correct"] & (frame["errors"] > 0)).sum()),
        handed_over=int(frame["requires_human"].sum()),
    )
