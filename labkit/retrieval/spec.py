"""A search pipeline as plain data, and back: the form in which the challenge's grader takes a student's pipeline.

Taught in 31_challenge. A ``Pipeline`` (``labkit.retrieval.pipeline``) built from the course's
pieces is fully described by data::

    >>> pipeline_spec(Pipeline.of({"vector": 1, "lexical": 0.5}, rrf_k=30, rewrite=[Spelling()]))
    {'rewrite': ['spelling'], 'branches': [{'branch': 'vector', 'weight': 1.0},
     {'branch': 'lexical', 'weight': 0.5}], 'rrf_k': 30, 'rerank': []}

The pieces are the registry's branches (``labkit.retrieval.branches.registry.BRANCHES``), the
pseudo-relevance feedback branch (``prf_branch``, with its first-pass pipeline), a pipeline
used as a branch, the ``spelling`` rewrite step and the ``coverage`` re-rank step
(``Coverage(depth)`` on the fielded text). ``pipeline_from_spec`` rebuilds the pipeline from
such data and checks every value, so the grader never runs a student's code: a function of
their own has no description, and ``pipeline_spec`` says so. Both raise ``SpecError`` with a
Russian message a student can act on.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import partial
from numbers import Real
from typing import Any

from labkit.retrieval.branches.fielded import fielded_text
from labkit.retrieval.branches.prf import PrfConfig, prf_branch, search_vector_prf
from labkit.retrieval.branches.registry import BRANCHES, Branch
from labkit.retrieval.pipeline import Pipeline
from labkit.retrieval.rerankers.coverage import Coverage
from labkit.retrieval.rewriters.spelling import Spelling

__all__ = ["SpecError", "MAX_BRANCHES", "MAX_NESTING", "REWRITERS", "pipeline_spec", "pipeline_from_spec",
           "pieces_text"]

MAX_BRANCHES = 8  # branches fused in one pipeline
MAX_NESTING = 3  # pipelines inside pipelines (as branches or prf first passes)
MAX_RRF_K = 1_000
MAX_WEIGHT = 100.0
MAX_DEPTH = 50  # of a coverage head
MAX_PRF_DOCS = 10
MAX_PRF_BETA = 10.0
REWRITERS: dict[str, type[Spelling]] = {"spelling": Spelling}  # the rewrite steps by name

_PIECES = ("ветки из lk.BRANCHES (по имени: «vector», «lexical», …), lk.prf_branch(...), вложенный lk.Pipeline, "
           "шаг lk.Spelling() до веток и шаг lk.Coverage(глубина) после слияния")


class SpecError(ValueError):
    """A pipeline that is not made of the course's pieces, or data that describes none; the message is Russian."""


def pieces_text() -> str:
    """The pieces a challenge pipeline may be built from, in Russian (for messages and the notebook)."""
    return _PIECES


# --- pipeline -> data ------------------------------------------------------------------------------

def _branch_spec(branch: Branch, weight: float, nesting: int) -> dict[str, Any]:
    registered = BRANCHES.get(branch.name)
    if registered is not None and branch == registered:
        return {"branch": branch.name, "weight": float(weight)}
    search = branch.search
    if isinstance(search, partial) and search.func is search_vector_prf:
        first_pass, config = search.keywords.get("first_pass"), search.keywords.get("config")
        if isinstance(first_pass, Pipeline) and isinstance(config, PrfConfig):
            return {"prf": {"first_pass": _spec(first_pass, nesting + 1), "docs": config.docs, "beta": config.beta},
                    "weight": float(weight)}
    if isinstance(search, Pipeline):
        return {"pipeline": _spec(search, nesting + 1), "weight": float(weight)}
    name = getattr(search, "__name__", None)
    what = f"функция {name}" if name else type(search).__name__
    raise SpecError(f"ветка «{branch}» — не деталь курса (это {what}). Проверка преподавателя запускает конвейер "
                    f"у себя и собирает его только из деталей курса: {_PIECES}")


def _rewrite_spec(step: Any) -> str:
    for name, kind in REWRITERS.items():
        if type(step) is kind:
            return name
    raise SpecError(f"шаг переписывания «{step}» ({type(step).__name__}) — не деталь курса: до веток можно поставить "
                    "только lk.Spelling()")


def _rerank_spec(step: Any) -> dict[str, Any]:
    if type(step) is Coverage and step.text is fielded_text:
        return {"coverage": step.depth}
    if type(step) is Coverage:
        raise SpecError(f"шаг «{step}» читает свой текст документов: в испытании lk.Coverage читает текст ветки fielded, "
                     "задайте только глубину, lk.Coverage(глубина)")
    raise SpecError(f"шаг переранжирования «{step}» ({type(step).__name__}) — не деталь курса: после слияния можно "
                    "поставить только lk.Coverage(глубина)")


def _spec(pipeline: Pipeline, nesting: int) -> dict[str, Any]:
    if nesting > MAX_NESTING:
        raise SpecError(f"конвейеры вложены глубже {MAX_NESTING} уровней: упростите конвейер")
    return {"rewrite": [_rewrite_spec(step) for step in pipeline.rewrite],
            "branches": [_branch_spec(branch, weight, nesting) for branch, weight in pipeline.branches],
            "rrf_k": int(pipeline.rrf_k),
            "rerank": [_rerank_spec(step) for step in pipeline.rerank]}


def pipeline_spec(pipeline: Any) -> dict[str, Any]:
    """`pipeline` as JSON-ready data that ``pipeline_from_spec`` rebuilds; SpecError when it is not made of the course's pieces.

    Taught in 31_challenge.
    """
    if not isinstance(pipeline, Pipeline):
        what = (f"функция {getattr(pipeline, '__name__', '')}".rstrip() if callable(pipeline)
                else f"значение типа {type(pipeline).__name__}")
        raise SpecError(f"нужен конвейер lk.Pipeline, а это {what}; соберите его из деталей курса: "
                        "lk.Pipeline.of(ветка или {ветка: вес, ...}, rrf_k, rewrite=[...], rerank=[...])")
    spec = _spec(pipeline, 1)
    pipeline_from_spec(spec)  # what the grader will rebuild must pass its checks here already
    return spec


# --- data -> pipeline ------------------------------------------------------------------------------

def _number(value: Any, what: str, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(float(value)):
        raise SpecError(f"{what} должен быть числом, а это {value!r}")
    if not low <= float(value) <= high:
        raise SpecError(f"{what} должен лежать в [{low:g}; {high:g}], а это {float(value):g}")
    return float(value)


def _integer(value: Any, what: str, low: int, high: int) -> int:
    number = _number(value, what, low, high)
    if number != int(number):
        raise SpecError(f"{what} должен быть целым, а это {number:g}")
    return int(number)


def _mapping(value: Any, what: str, keys: set[str]) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise SpecError(f"{what}: ожидался словарь, а это {type(value).__name__}")
    unknown = sorted(str(key) for key in value if key not in keys)
    if unknown:
        raise SpecError(f"{what}: неизвестные ключи {', '.join(unknown)} (известны {', '.join(sorted(keys))})")
    return value


def _branch(data: Any, nesting: int) -> tuple[Branch | Pipeline, float]:
    item = _mapping(data, "описание ветки", {"branch", "prf", "pipeline", "weight"})
    weight = _number(item.get("weight", 1.0), "вес ветки", 0.0, MAX_WEIGHT)
    kinds = [key for key in ("branch", "prf", "pipeline") if key in item]
    if len(kinds) != 1:
        raise SpecError("ветка описывается ровно одним из ключей branch, prf, pipeline")
    if "branch" in item:
        name = item["branch"]
        if not isinstance(name, str) or name not in BRANCHES:
            raise SpecError(f"ветки {name!r} нет среди lk.BRANCHES ({', '.join(BRANCHES)})")
        return BRANCHES[name], weight
    if "pipeline" in item:
        return _build(item["pipeline"], nesting + 1), weight
    prf = _mapping(item["prf"], "описание ветки prf", {"first_pass", "docs", "beta"})
    config = PrfConfig(_integer(prf.get("docs", 3), "docs ветки prf", 1, MAX_PRF_DOCS),
                       _number(prf.get("beta", 0.5), "beta ветки prf", 0.0, MAX_PRF_BETA))
    return prf_branch(_build(prf.get("first_pass"), nesting + 1), config), weight


def _build(data: Any, nesting: int) -> Pipeline:
    if nesting > MAX_NESTING:
        raise SpecError(f"конвейеры вложены глубже {MAX_NESTING} уровней: упростите конвейер")
    spec = _mapping(data, "описание конвейера", {"rewrite", "branches", "rrf_k", "rerank"})
    rewrite, branches, rerank = spec.get("rewrite", []), spec.get("branches"), spec.get("rerank", [])
    if not isinstance(rewrite, list) or not all(isinstance(step, str) and step in REWRITERS for step in rewrite):
        raise SpecError(f"шаги переписывания — список имён из {', '.join(REWRITERS)}, а это {rewrite!r}")
    if not isinstance(branches, list) or not 1 <= len(branches) <= MAX_BRANCHES:
        raise SpecError(f"в конвейере должно быть от 1 до {MAX_BRANCHES} веток")
    if not isinstance(rerank, list) or len(rerank) > 3:
        raise SpecError("шаги переранжирования — список, не длиннее трёх шагов")
    steps = []
    for step in rerank:
        depth = _mapping(step, "описание шага переранжирования", {"coverage"}).get("coverage")
        steps.append(Coverage(_integer(depth, "глубина lk.Coverage", 1, MAX_DEPTH)))
    weights: dict[Any, float] = {}
    for item in branches:
        branch, weight = _branch(item, nesting)
        if branch in weights:
            raise SpecError(f"ветка «{branch}» встречается в конвейере дважды")
        weights[branch] = weight
    rrf_k = _integer(spec.get("rrf_k", 60), "rrf_k", 0, MAX_RRF_K)
    try:
        return Pipeline.of(weights, rrf_k, rewrite=[REWRITERS[name]() for name in rewrite], rerank=steps)
    except ValueError as exc:
        raise SpecError(f"из этого описания конвейер не собирается: {exc}") from exc


def pipeline_from_spec(spec: Any) -> Pipeline:
    """The pipeline `spec` describes (``pipeline_spec``'s data), every value checked. Taught in 31_challenge."""
    return _build(spec, 1)
