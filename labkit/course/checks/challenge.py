"""The challenge (31_challenge): a student's own search pipeline, scored at home on ``report``, by the instructor on hidden queries.

The contract, the one thing the grader takes from the notebook: a variable ``PIPELINE`` holding a
``lk.Pipeline`` built from the course's pieces only (``labkit.retrieval.spec``: registry branches,
``prf_branch``, nested pipelines, ``Spelling()``, ``Coverage(depth)``). ``collect`` runs in the
student's kernel and turns it into data (``pipeline_spec``); ``pipeline_of`` rebuilds it in the
grader's process, which searches the hidden queries on its own database, so neither the queries
nor their labels ever reach a student's kernel, and no student code runs on them. ``check_challenge``
is the notebook's own checker of that contract, with the same messages.

Scoring: mean Recall@``TOP_K`` on the hidden queries, then MRR (``labkit.evaluation.leaderboard``).
A pipeline whose mean Recall@``TOP_K`` reaches the certificate threshold (``CERTIFICATE_RECALL`` unless
the instructor gives ``--certificate``) earns the certificate line of ``certificate_line``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from labkit.core.text import ERROR_CHARS, count, shorten
from labkit.course.checks.common import unfilled
from labkit.evaluation.leaderboard import Standing
from labkit.retrieval.modes import SEARCH_MODES
from labkit.retrieval.pipeline import Pipeline
from labkit.retrieval.spec import SpecError, pipeline_from_spec, pipeline_spec

__all__ = ["KEY", "NOTEBOOK", "TITLE", "VARIABLE", "TOP_K", "CHALLENGE_TOP_K", "CERTIFICATE_RECALL", "COURSE", "BASELINE", "Challenge",
           "CHALLENGE", "ChallengeCheck", "collect", "pipeline_of", "check_challenge", "certificate_line",
           "leaderboard_frame", "baseline_pipeline"]

KEY = "31"
NOTEBOOK = "31_challenge.ipynb"
TITLE = "испытание: свой конвейер поиска (31)"
VARIABLE = "PIPELINE"  # the notebook's variable the grader reads
TOP_K = 3  # the challenge's cut-off: Recall@3, then MRR
CHALLENGE_TOP_K = TOP_K  # under the name labkit exports
# The default certificate threshold on mean Recall@3 over the hidden queries. On the report split the course's plain
# hybrid stays below it and the pipelines of 11_beyond_rrf reach it (31_challenge prints both); an instructor whose
# hidden queries are harder or easier sets their own with `./run.sh grade DIR --hidden FILE --certificate R`.
CERTIFICATE_RECALL = 0.94
COURSE = "«Гибридный поиск и агент внутри PostgreSQL»"
BASELINE = "hybrid"  # the course's plain hybrid (04_rrf): the starter's PIPELINE and the leaderboard's reference row


def collect(namespace: Mapping[str, Any], seed: int | None = None) -> dict[str, Any]:
    """The challenge's answer from a notebook's variables, as data (runs in the student's kernel)."""
    value = namespace.get(VARIABLE)
    if unfilled(value):
        return {"state": "unfilled"}
    shown = shorten(str(value), 300)
    try:
        spec = pipeline_spec(value)
    except SpecError as exc:
        return {"state": "invalid", "reason": str(exc), "shown": shown}
    except Exception as exc:  # noqa: BLE001 (a student's object can fail in any way when read)
        return {"state": "invalid", "reason": shorten(f"{type(exc).__name__}: {exc}", ERROR_CHARS), "shown": shown}
    return {"state": "pipeline", "spec": spec, "shown": str(value)}


@dataclass(frozen=True)
class Challenge:
    """The challenge as the grader handles it: which notebook, and how its answer is collected."""

    key: str
    notebook: str
    title: str

    @staticmethod
    def collect(namespace: Mapping[str, Any], seed: int | None) -> dict[str, Any]:
        return {"pipeline": collect(namespace, seed)}


CHALLENGE = Challenge(KEY, NOTEBOOK, TITLE)


def pipeline_of(answers: Mapping[str, Any]) -> Pipeline | str:
    """The pipeline the collected answers describe, rebuilt and checked here; or the Russian reason there is none."""
    answer = answers.get("pipeline")
    if not isinstance(answer, Mapping):
        return "ответ испытания не собран"
    state = answer.get("state")
    if state == "unfilled":
        return f"переменная {VARIABLE} не задана: запишите в неё свой конвейер и выполните ячейку"
    if state == "invalid":
        return f"{VARIABLE} не принят: {answer.get('reason', '')}"
    try:
        pipeline = pipeline_from_spec(answer.get("spec"))
    except SpecError as exc:
        return f"{VARIABLE} не принят: {exc}"
    problem = pipeline.problem()
    return f"{VARIABLE} не запустится на машине проверки: {problem}" if problem else pipeline


@dataclass(frozen=True)
class ChallengeCheck:
    """The notebook checker's verdict on ``PIPELINE``: accepted (with what the grader will rebuild) or why not."""

    problem: str | None
    shown: str
    spec: dict[str, Any] | None

    @property
    def passed(self) -> bool:
        return self.problem is None

    def __bool__(self) -> bool:
        return self.passed

    def message(self) -> str:
        if self.problem:
            return f"Конвейер не принят. {self.problem[:1].upper()}{self.problem[1:]}."
        return (f"Конвейер принят: {self.shown}.\nПроверка преподавателя соберёт его заново из этого описания и "
                f"запустит на скрытых запросах:\n{json.dumps(self.spec, ensure_ascii=False)}")


def check_challenge(pipeline: Any) -> ChallengeCheck:
    """Check that `pipeline` is what the challenge's grader can take, and print the verdict in Russian. Taught in 31_challenge."""
    answer = collect({VARIABLE: pipeline})
    rebuilt = pipeline_of({"pipeline": answer})
    problem = rebuilt if isinstance(rebuilt, str) else None
    if problem and problem.startswith(f"{VARIABLE} не принят: "):
        problem = problem.removeprefix(f"{VARIABLE} не принят: ")
    result = ChallengeCheck(problem, str(answer.get("shown", "")), answer.get("spec"))
    print(result.message())
    return result


def certificate_line(name: str, standing: Standing, shown: str, threshold: float, queries: int) -> str:
    """The certificate line of a student whose pipeline reached `threshold` on `queries` hidden queries, in Russian."""
    return (f"Сертификат испытания курса {COURSE}: {name}. Конвейер «{shown}» на "
            f"{count(queries, 'скрытом запросе', 'скрытых запросах', 'скрытых запросах')} набрал Recall@{TOP_K} = "
            f"{standing.recall:.3f} (95 % интервал {standing.low:.3f}–{standing.high:.3f}) при пороге {threshold:.2f}, "
            f"место в таблице класса — {standing.place}.")


def leaderboard_frame(standings: Sequence[Standing], threshold: float | None = None,
                      labels: Mapping[str, str] | None = None) -> pd.DataFrame:
    """A leaderboard as a Russian table: place, Recall@3 with its interval, MRR, the test against the next place."""
    labels = labels or {}
    rows = []
    for s in standings:
        row: dict[str, Any] = {"место": s.place, "участник": labels.get(s.name, s.name), f"Recall@{TOP_K}": round(s.recall, 3),
                               "95 %: от": round(s.low, 3), "95 %: до": round(s.high, 3), "MRR": round(s.mrr, 3),
                               "p против следующего": "—" if s.p_next is None else round(s.p_next, 3)}
        if threshold is not None:
            row["сертификат"] = "да" if s.recall >= threshold else "нет"
        rows.append(row)
    return pd.DataFrame(rows).set_index("место")


def baseline_pipeline() -> Pipeline:
    """The course's plain hybrid, the challenge's starting point and reference row."""
    return SEARCH_MODES[BASELINE]
