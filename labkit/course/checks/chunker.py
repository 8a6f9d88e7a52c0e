"""Exercise 18: a chunker with overlap, the collapse of chunk rankings to documents, and an overlap sweep.

``collect`` calls the student's ``chunk_spans(text, size, overlap)`` and ``collapse_ranking(chunk_ids,
parent_of)`` on fixed inputs (each built so that one typical mistake shows) and, for the grader, on
inputs made from the run's seed; ``sweep`` (a row per size and overlap: chunks, coverage) is
collected as data. The references are ``labkit.core.chunking.fixed_chunks`` and
``labkit.retrieval.documents.collapse``; the sweep is recomputed from the knowledge base's file and
the answers' spans of its tune split, so grading needs no database.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from labkit.core.chunking import fixed_chunks, span_overlap
from labkit.core.corpora.kb import KB_DOCUMENTS, KB_QUERIES
from labkit.core.corpus import read_records
from labkit.core.ranking import Hit, ids
from labkit.course.checks.cases import Answers, Case, Exercise
from labkit.course.checks.common import (
    CallTimeout,
    CheckResult,
    call_limited,
    collected,
    failure,
    number,
    report,
    unfilled,
)
from labkit.retrieval.documents import collapse

__all__ = ["EXERCISE", "ChunkerContext", "check_chunker", "answer_spans", "coverage_sweep", "SIZES", "OVERLAPS"]

SIZES = (60, 120, 200)  # the sweep's chunk sizes in tokens
OVERLAPS = (0, 20, 40)  # and overlaps
SpanCase = tuple[str, int, int]  # text, size, overlap
CollapseCase = tuple[list[int], dict[int, int]]  # chunk ids best first, chunk -> document

# Each fixed case lets one typical mistake show.
_SPAN_CASES: list[SpanCase] = [
    ("раз два три четыре пять шесть семь", 3, 1),  # the step is size - overlap = 2
    ("Один, два. Три!", 2, 0),  # punctuation marks are tokens too
    ("коротко", 10, 3),  # shorter than a window: one chunk
    ("а б в г д е", 4, 2),  # the second window reaches the end: no third window inside it
    ("   ", 5, 1),  # no tokens: no chunks
    ("  отступ в начале и в конце  ", 3, 0),  # a chunk starts at its first token and ends at its last
]
_BAD_ARGUMENTS: list[SpanCase] = [("раз два три", 3, 3), ("раз два три", 0, 0)]  # must raise ValueError
_COLLAPSE_CASES: list[CollapseCase] = [
    ([2001, 1004, 2003, 3000], {2001: 2, 1004: 1, 2003: 2, 3000: 3}),  # document 2 once, where its best chunk is
    ([7002, 7001, 5001], {7001: 7, 7002: 7, 5001: 5}),  # order of the ranking, not of the ids
    ([9999, 1001], {1001: 1}),  # a chunk that is no row: left out
    ([], {}),
]
_HIDDEN = 12
_MAX_ITEMS = 500


@dataclass(frozen=True)
class ChunkerContext:
    """What the sweep is compared with (recomputed from the files), and the hidden cases' seed (grader only)."""

    sweep: pd.DataFrame
    seed: int | None = None


# --- references --------------------------------------------------------------------------------------

def _reference_spans(text: str, size: int, overlap: int) -> list[tuple[int, int]]:
    return [(chunk.start, chunk.end) for chunk in fixed_chunks(0, text, size, overlap)]


def _reference_collapse(chunk_ids: Sequence[int], parent_of: Mapping[int, int]) -> list[int]:
    return ids(collapse([Hit(chunk, 0.0) for chunk in chunk_ids], parent_of))


def answer_spans(split: str = "tune") -> list[tuple[int, int, int]]:
    """(document, start, end) of every labelled answer span of the knowledge base's queries in `split`."""
    spans = []
    for _number, record in read_records(KB_QUERIES):
        if record.get("split") == split:
            spans += [(int(s["doc"]), int(s["start"]), int(s["end"])) for s in record.get("spans", [])]
    return spans


def coverage_sweep(chunker: Callable[[str, int, int], Sequence[tuple[int, int]]],
                   sizes: Sequence[int] = SIZES, overlaps: Sequence[int] = OVERLAPS,
                   split: str = "tune") -> pd.DataFrame:
    """For each size and overlap: the number of chunks of the knowledge base and the share of answer spans lying
    whole inside one chunk (``coverage``). Taught in 18_task_chunker."""
    texts = {doc.id: doc.text for doc in KB_DOCUMENTS.documents()}
    spans = answer_spans(split)
    rows = []
    for size in sizes:
        for overlap in overlaps:
            cut = {doc: list(chunker(text, size, overlap)) for doc, text in texts.items()}
            whole = sum(any(span_overlap(chunk, (start, end))[0] == 1.0 for chunk in cut[doc])
                        for doc, start, end in spans)
            rows.append({"size": size, "overlap": overlap, "chunks": sum(map(len, cut.values())),
                         "coverage": whole / len(spans)})
    return pd.DataFrame(rows)


def hidden_span_cases(seed: int) -> list[SpanCase]:
    """Pieces of the knowledge base's documents with random sizes and overlaps."""
    rng = random.Random(seed)
    texts = [doc.text for doc in KB_DOCUMENTS.documents()]
    cases = []
    for _ in range(_HIDDEN):
        text = rng.choice(texts)
        start = rng.randrange(0, max(1, len(text) - 400))
        size = rng.randint(2, 30)
        cases.append((text[start:start + rng.randint(20, 400)], size, rng.randint(0, size - 1)))
    return cases


def hidden_collapse_cases(seed: int) -> list[CollapseCase]:
    """Random chunk rankings over a few documents, some chunks unknown."""
    rng = random.Random(seed + 1)
    cases = []
    for _ in range(_HIDDEN):
        chunks = rng.sample([doc * 1000 + n for doc in range(1, 9) for n in range(6)], rng.randint(0, 20))
        cases.append((chunks, {chunk: chunk // 1000 for chunk in chunks if rng.random() > 0.1}))
    return cases


# --- collecting (in the student's kernel) ------------------------------------------------------------

def _as_spans(value: Any) -> list[list[int]] | str:
    if value is None:
        return "chunk_spans возвращает None: допишите тело функции в ячейке с TODO (return список пар (начало, конец))"
    try:
        spans = [[int(a), int(b)] for a, b in list(value)[:_MAX_ITEMS]]
    except (TypeError, ValueError):
        return f"chunk_spans должна вернуть список пар (начало, конец), а вернула {type(value).__name__}"
    return spans


def _as_ids(value: Any) -> list[int] | str:
    if value is None:
        return "collapse_ranking возвращает None: допишите тело функции в ячейке с TODO (return список id документов)"
    try:
        return [int(v) for v in list(value)[:_MAX_ITEMS]]
    except (TypeError, ValueError):
        return f"collapse_ranking должна вернуть список id документов, а вернула {type(value).__name__}"


def _call(func: Callable[..., Any], convert: Callable[[Any], Any], *args: Any) -> Any:
    try:
        return convert(call_limited(func, *args))
    except (Exception, CallTimeout) as exc:  # noqa: BLE001 (the student's code may fail in any way)
        return f"упала: {failure(exc)}"


def _raises(func: Callable[..., Any], case: SpanCase) -> bool | str:
    try:
        call_limited(func, *case)
    except ValueError:
        return True
    except (Exception, CallTimeout) as exc:  # noqa: BLE001
        return f"упала не с ValueError: {failure(exc)}"
    return False


def _collect_function(func: Any, kind: str, seed: int | None) -> dict[str, Any]:
    if unfilled(func):
        return {"state": "unfilled"}
    if not callable(func):
        return {"state": "type", "type": type(func).__name__}
    if kind == "spans":
        return {"state": "function",
                "fixed": [_call(func, _as_spans, *case) for case in _SPAN_CASES],
                "bad": [_raises(func, case) for case in _BAD_ARGUMENTS],
                "hidden": None if seed is None else [_call(func, _as_spans, *case) for case in hidden_span_cases(seed)]}
    return {"state": "function",
            "fixed": [_call(func, _as_ids, list(c), dict(p)) for c, p in _COLLAPSE_CASES],
            "hidden": None if seed is None else [_call(func, _as_ids, list(c), dict(p))
                                                 for c, p in hidden_collapse_cases(seed)]}


def _collect_sweep(sweep: Any) -> dict[str, Any]:
    if unfilled(sweep):
        return {"state": "unfilled"}
    if not isinstance(sweep, pd.DataFrame):
        return {"state": "type", "type": type(sweep).__name__}
    frame = sweep.reset_index() if {"size", "overlap"} - set(sweep.columns) else sweep
    missing = sorted({"size", "overlap", "chunks", "coverage"} - set(frame.columns))
    if missing:
        return {"state": "columns", "missing": missing}
    rows = [{key: number(row[key]) for key in ("size", "overlap", "chunks", "coverage")}
            for _, row in frame.head(100).iterrows()]
    return {"state": "frame", "rows": json.loads(json.dumps(rows))}


def collect(namespace: Mapping[str, Any], seed: int | None) -> dict[str, Any]:
    """The answers of exercise 18 from the notebook's variables (JSON-ready)."""
    return {"chunk_spans": _collect_function(namespace.get("chunk_spans"), "spans", seed),
            "collapse_ranking": _collect_function(namespace.get("collapse_ranking"), "collapse", seed),
            "sweep": _collect_sweep(namespace.get("sweep"))}


# --- the cases -----------------------------------------------------------------------------------------

def _span_hint(case: SpanCase, got: list[list[int]], want: list[tuple[int, int]]) -> str:
    text, size, overlap = case
    got_pairs = [tuple(pair) for pair in got]
    if got_pairs[: len(want)] == want and len(got_pairs) > len(want):
        return ("лишние фрагменты в конце: остановитесь, как только окно дошло до последнего токена "
                "(следующее окно целиком лежало бы внутри предыдущего)")
    if len(got_pairs) > 1 and len(want) > 1 and got_pairs[0] == want[0] and got_pairs[1] != want[1]:
        return (f"второе окно начинается не там: шаг между началами окон — size - overlap = {size - overlap} "
                "токенов, а не size и не overlap")
    if any(text[a:a + 1].isspace() or text[b - 1:b].isspace() for a, b in got_pairs if b > a):
        return "фрагмент должен начинаться с первого своего токена и кончаться последним, без пробелов по краям"
    if "," in text or "!" in text:
        return r"знаки препинания — тоже токены: берите токены регулярным выражением \w+|[^\w\s], а не split()"
    if not want:
        return "в тексте без токенов фрагментов нет: верните пустой список"
    return "сравните начала и концы окон с ожидаемыми: окно — это size токенов подряд, (начало первого, конец последнего)"


def _spans_problems(answers: Answers, cases: Sequence[SpanCase], got_all: Sequence[Any]) -> list[str]:
    problems: list[str] = []
    for case, got in zip(cases, got_all):
        shown = f"chunk_spans({case[0][:40]!r}{'…' if len(case[0]) > 40 else ''}, {case[1]}, {case[2]})"
        if isinstance(got, str):
            return [*problems, f"{shown} {got}" if got.startswith("упала") else got]
        want = _reference_spans(*case)
        if [tuple(pair) for pair in got] != want:
            hint = _span_hint(case, got, want)
            if not any(p.endswith(hint) for p in problems):
                problems.append(f"{shown} вернула {got[:6]}, ожидалось {want[:6]}: {hint}")
    return problems


def _function(answers: Answers, name: str) -> tuple[Mapping[str, Any] | None, list[str]]:
    answer = answers[name]
    if problem := collected(name, answer):
        return None, [problem]
    if answer.get("state") != "function":
        return None, [f"{name} должна быть функцией"]
    return answer, []


def _fixed_spans(answers: Answers, _context: ChunkerContext) -> list[str]:
    answer, problems = _function(answers, "chunk_spans")
    if answer is None:
        return problems
    problems = _spans_problems(answers, _SPAN_CASES, answer["fixed"])
    for case, raised in zip(_BAD_ARGUMENTS, answer["bad"]):
        if raised is not True:
            why = raised if isinstance(raised, str) else "ничего не сказала"
            problems.append(f"chunk_spans(…, size={case[1]}, overlap={case[2]}) {why}: при size < 1 или "
                            "overlap ≥ size окна не сдвигаются, поднимите ValueError с понятным сообщением")
    return problems


def _hidden_spans(answers: Answers, context: ChunkerContext) -> list[str]:
    answer, problems = _function(answers, "chunk_spans")
    if answer is None:
        return problems
    if context.seed is None or answer.get("hidden") is None:
        return ["скрытые примеры не запускались"]
    return _spans_problems(answers, hidden_span_cases(context.seed), answer["hidden"])


def _collapse_problems(cases: Sequence[CollapseCase], got_all: Sequence[Any]) -> list[str]:
    problems: list[str] = []
    for (chunks, parents), got in zip(cases, got_all):
        shown = f"collapse_ranking({chunks[:8]}{'…' if len(chunks) > 8 else ''}, …)"
        if isinstance(got, str):
            return [*problems, f"{shown} {got}" if got.startswith("упала") else got]
        want = _reference_collapse(chunks, parents)
        if got == want:
            continue
        if sorted(got) == sorted(want):
            hint = "порядок документов — по лучшему (первому) их фрагменту в ранжировании, а не по id"
        elif len(got) > len(want) and set(got) == set(want):
            hint = "каждый документ — один раз: запомните, какие уже добавлены, и пропускайте их"
        elif set(got) > set(want):
            hint = "фрагмент, которого нет в parent_of, пропускайте: его документа мы не знаем"
        else:
            hint = "документ фрагмента — parent_of[id фрагмента]; верните id документов, а не фрагментов"
        if not any(p.endswith(hint) for p in problems):
            problems.append(f"{shown} вернула {got[:8]}, ожидалось {want[:8]}: {hint}")
    return problems


def _fixed_collapse(answers: Answers, _context: ChunkerContext) -> list[str]:
    answer, problems = _function(answers, "collapse_ranking")
    return problems if answer is None else _collapse_problems(_COLLAPSE_CASES, answer["fixed"])


def _hidden_collapse(answers: Answers, context: ChunkerContext) -> list[str]:
    answer, problems = _function(answers, "collapse_ranking")
    if answer is None:
        return problems
    if context.seed is None or answer.get("hidden") is None:
        return ["скрытые примеры не запускались"]
    return _collapse_problems(hidden_collapse_cases(context.seed), answer["hidden"])


def _sweep_problems(answers: Answers, context: ChunkerContext) -> list[str]:
    answer = answers["sweep"]
    if problem := collected("sweep", answer):
        return [problem]
    if answer.get("state") == "columns":
        return [f"в sweep нет столбцов {', '.join(answer['missing'])}: нужны size, overlap, chunks, coverage"]
    if answer.get("state") != "frame":
        return ["sweep должна быть DataFrame со столбцами size, overlap, chunks, coverage"]
    got = {(row["size"], row["overlap"]): row for row in answer["rows"]}
    problems = []
    for _, want in context.sweep.iterrows():
        row = got.get((float(want["size"]), float(want["overlap"])))
        config = f"size={want['size']}, overlap={want['overlap']}"
        if row is None:
            problems.append(f"в sweep нет строки {config}: переберите все SIZES × OVERLAPS")
        elif row["chunks"] != want["chunks"]:
            problems.append(f"{config}: chunks = {row['chunks']}, а фрагментов получается {int(want['chunks'])}: "
                            "считайте фрагменты всех документов базы вашей chunk_spans")
        elif row["coverage"] is None or abs(row["coverage"] - want["coverage"]) > 1e-9:
            problems.append(f"{config}: coverage = {row['coverage']}, ожидалось {want['coverage']:.4f}: доля ответов "
                            "tune, целиком лежащих внутри хотя бы одного фрагмента своего документа")
        if len(problems) >= 3:
            break
    return problems


CASES: tuple[Case[ChunkerContext], ...] = (
    Case("chunk_spans на готовых примерах и отказ на неверных size/overlap", 3, _fixed_spans),
    Case("chunk_spans на кусках документов базы знаний", 2, _hidden_spans, hidden=True),
    Case("collapse_ranking на готовых примерах", 2, _fixed_collapse),
    Case("collapse_ranking на случайных ранжированиях", 1, _hidden_collapse, hidden=True),
    Case("таблица sweep: фрагменты и доля целых ответов для каждого size × overlap", 2, _sweep_problems),
)


def _reference_sweep(parameters: Mapping[str, Any]) -> pd.DataFrame:
    sizes = tuple(int(s) for s in parameters.get("SIZES", SIZES))
    overlaps = tuple(int(o) for o in parameters.get("OVERLAPS", OVERLAPS))
    return coverage_sweep(_reference_spans, sizes, overlaps)


def _context(_lab: Any, parameters: Mapping[str, Any], seed: int) -> ChunkerContext:
    """The grader's references: the sweep recomputed from the files with the reference chunker."""
    return ChunkerContext(_reference_sweep(parameters), seed)


EXERCISE: Exercise[ChunkerContext] = Exercise(
    "18", "18_task_chunker.ipynb", "нарезка с перекрытием и свёртка к документам (18)", CASES, collect, _context)


def check_chunker(chunk_spans: Any, collapse_ranking: Any, sweep: Any, *,
                  sizes: Sequence[int] = SIZES, overlaps: Sequence[int] = OVERLAPS) -> CheckResult:
    """Check the chunker (vs fixed_chunks), the collapse (vs labkit's) and the sweep. Taught in 18_task_chunker.

    Prints the verdict and the points of each visible case.
    """
    namespace = {"chunk_spans": chunk_spans, "collapse_ranking": collapse_ranking, "sweep": sweep}
    context = ChunkerContext(_reference_sweep({"SIZES": sizes, "OVERLAPS": overlaps}))
    return report(EXERCISE, namespace, context)
