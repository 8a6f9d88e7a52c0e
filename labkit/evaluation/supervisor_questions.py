"""The supervisor's labelled questions: what kind each is, which documents answer it, which query (taught in 19_sql_agent).

``labkit/data/supervisor/questions.jsonl``, one object per line: ``id``, ``question`` (Russian), ``kind``
(documents, data, both, smalltalk, out_of_scope, hostile), a fixed ``split`` (tune or report),
``relevant`` (knowledge-base document ids; documents and both), ``gold_sql`` (one SELECT; data and both),
``expect_route`` (the agents expected to run, in order). Extra fields are kept in ``extra``.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, NamedTuple

from labkit.agent.sql.check import SqlRefused, check_select
from labkit.core.corpus import DATA_DIR, SPLITS, DataError, read_records

__all__ = ["SUPERVISOR_QUESTIONS_PATH", "KINDS", "AGENTS", "SupervisorQuestion", "load_supervisor_questions"]

SUPERVISOR_QUESTIONS_PATH = DATA_DIR / "supervisor" / "questions.jsonl"
KINDS = ("documents", "data", "both", "smalltalk", "out_of_scope", "hostile")
AGENTS = ("documents", "data")  # what may appear in expect_route


class SupervisorQuestion(NamedTuple):
    """One labelled question for the supervisor."""

    id: str
    question: str
    kind: str
    split: str
    relevant: tuple[int, ...] = ()
    gold_sql: str = ""
    expect_route: tuple[str, ...] = ()
    extra: dict[str, Any] = {}


def _check(record: dict[str, Any], where: str) -> SupervisorQuestion:
    for name in ("id", "question", "kind", "split"):
        value = record.get(name)
        if not isinstance(value, str) or not value.strip():
            raise DataError(f"{where}: field {name!r} must be a non-empty string, got {value!r}")
    kind, split = record["kind"], record["split"]
    if kind not in KINDS:
        raise DataError(f"{where}: field 'kind' must be one of {', '.join(KINDS)}, got {kind!r}")
    if split not in SPLITS:
        raise DataError(f"{where}: field 'split' must be one of {', '.join(SPLITS)}, got {split!r}")
    relevant = record.get("relevant", [])
    if not isinstance(relevant, list) or not all(isinstance(d, int) and not isinstance(d, bool) for d in relevant):
        raise DataError(f"{where}: field 'relevant' must be a list of document ids, got {relevant!r}")
    if kind in ("documents", "both") and not relevant:
        raise DataError(f"{where}: a {kind} question needs 'relevant' document ids")
    gold = record.get("gold_sql", "")
    if kind in ("data", "both") or gold:
        if not isinstance(gold, str) or not gold.strip():
            raise DataError(f"{where}: a {kind} question needs a 'gold_sql'")
        try:
            gold = check_select(gold)
        except SqlRefused as refused:
            raise DataError(f"{where}: gold_sql is not one SELECT ({refused})") from None
    route = record.get("expect_route", [])
    if not isinstance(route, list) or not all(agent in AGENTS for agent in route):
        raise DataError(f"{where}: field 'expect_route' must list agents of {', '.join(AGENTS)}, got {route!r}")
    known = {"id", "question", "kind", "split", "relevant", "gold_sql", "expect_route"}
    return SupervisorQuestion(record["id"], record["question"], kind, split, tuple(relevant), gold, tuple(route),
                              {k: v for k, v in record.items() if k not in known})


def load_supervisor_questions(path: str | Path | None = None, split: str | None = None,
                              per_kind: int | None = None) -> list[SupervisorQuestion]:
    """Read the supervisor's labelled questions; a bad record is a DataError naming file:line. Taught in 19_sql_agent.

    `per_kind` keeps the first that many questions of each kind (a small sample with every kind in it).
    """
    if split is not None and split not in SPLITS:
        raise ValueError(f"unknown split {split!r}: expected one of {', '.join(SPLITS)}")
    path = Path(path) if path is not None else SUPERVISOR_QUESTIONS_PATH
    questions, seen = [], set()
    for number, record in read_records(path):
        question = _check(record, f"{path}:{number}")
        if question.id in seen:
            raise DataError(f"{path}:{number}: duplicate id {question.id!r}")
        seen.add(question.id)
        if split is None or question.split == split:
            questions.append(question)
    if not questions:
        raise DataError(f"{path}: no questions" + (f" with split {split!r}" if split else "") + " in the file")
    if per_kind is not None:
        if per_kind < 1:
            raise ValueError(f"per_kind must be at least 1, got {per_kind}")
        seen_of: Counter[str] = Counter()
        kept = []
        for question in questions:
            seen_of[question.kind] += 1
            if seen_of[question.kind] <= per_kind:
                kept.append(question)
        questions = kept
    return questions
