"""Synthetic vectors for the scale lesson: two generators, each named for what it is (taught in 12_scale).

* ``noisy`` (the lesson's first set): 100 random centres on the 384-dimensional sphere and
  noise spread evenly over all 384 dimensions — a hard case for a graph index, unlike text
  embeddings: its intrinsic dimension is high and a point's nearest neighbours are hardly
  nearer than any other point.
* ``realistic``: shaped like the lab's e5 vectors of knowledge-base chunks. Documents are points
  in a subspace whose variances fall off as a power law, so a few directions carry most of the
  spread; a document's chunks follow one another as a short walk from it, and a few documents
  are another version of the one before; every vector shares one common direction (e5's vectors
  fill a narrow cone, their cosine similarities are all high), and noise covers all dimensions.
  Queries lie around chunks too, but vaguer (nearer the centre, as a short question is) and
  shifted along a direction of their own, as e5's «query: » texts are. ``REALISTIC`` holds the
  parameters ``fit_realistic`` found for multilingual-e5-small; ``compare_structure`` measures
  both sets beside the real vectors (``labkit.evaluation.vectorshape``).

Everything is deterministic for a given (size, seed). Each generator gives rows, a topic per
row (a 1 % ``rare`` topic for the filter lesson) and query vectors that are never rows.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np

from labkit.evaluation.vectorshape import measures

__all__ = [
    "TOPICS",
    "TOPIC_SHARES",
    "RARE_TOPIC",
    "make_vectors",
    "make_queries",
    "Shape",
    "REALISTIC",
    "make_realistic",
    "Dataset",
    "SYNTHETIC",
    "synthetic_set",
    "compare_structure",
    "misfit",
    "fit_realistic",
]

RARE_TOPIC = "rare"  # 1 % of the rows: a selective filter
TOPICS = ("rare", "common_a", "common_b", "common_c")
TOPIC_SHARES = (0.01, 0.33, 0.33, 0.33)


def _topics(rng: np.random.Generator, n: int) -> list[str]:
    return [TOPICS[t] for t in rng.choice(len(TOPICS), size=n, p=TOPIC_SHARES)]


# --- the noisy set: clusters with noise in every dimension -------------------------------------

def _clustered(rng: np.random.Generator, n: int, centers: np.ndarray, spread: float) -> np.ndarray:
    """n unit vectors scattered around randomly chosen cluster centers."""
    picks = rng.integers(0, len(centers), size=n)
    noise = rng.standard_normal((n, centers.shape[1]), dtype=np.float32) * (spread / np.sqrt(centers.shape[1]))
    points = centers[picks] + noise
    return (points / np.linalg.norm(points, axis=1, keepdims=True)).astype(np.float32)


def _centers(seed: int, dim: int, clusters: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((clusters, dim), dtype=np.float32)
    return centers / np.linalg.norm(centers, axis=1, keepdims=True)


def make_vectors(
    n: int, dim: int = 384, clusters: int = 100, spread: float = 2.5, seed: int = 0
) -> tuple[np.ndarray, list[str]]:
    """`n` clustered unit vectors (float32, shape (n, dim)) with noise in every dimension, and a topic per row.

    The noisy set of 12_scale: the noise (norm `spread`) outweighs the centre (norm 1).
    """
    if n < 1 or dim < 1:
        raise ValueError(f"need n >= 1 and dim >= 1, got n={n}, dim={dim}")
    rng = np.random.default_rng([seed, 1])
    vectors = _clustered(rng, n, _centers(seed, dim, clusters), spread)
    return vectors, _topics(rng, n)


def make_queries(
    count: int, dim: int = 384, clusters: int = 100, spread: float = 2.5, seed: int = 0
) -> np.ndarray:
    """`count` query vectors from the noisy set's clusters, never rows of the table. Taught in 12_scale."""
    return _clustered(np.random.default_rng([seed, 2]), count, _centers(seed, dim, clusters), spread)


# --- the realistic set: documents in a low-dimensional subspace, shaped like e5's vectors ---------

@dataclass(frozen=True)
class Shape:
    """Parameters of the realistic generator; norms are relative to the spread of the documents (1)."""

    dim: int = 384
    subspace: int = 225  # dimensions the documents vary in
    decay: float = 1.39  # variance along the j-th of them ~ j^(-decay): a few directions carry most of it
    cone: float = 3.37  # norm of the direction every vector shares
    doc_size: int = 9  # chunks per document (measured, not fitted: the knowledge base's chunks per document)
    step: float = 0.57  # from one chunk of a document to the next, in the subspace
    versions: float = 0.09  # share of documents that are another version of the one before (measured: 4 of the KB's 44)
    edit: float = 0.92  # from a chunk to the same chunk in the other version, in the subspace
    noise: float = 0.89  # noise in every dimension
    query_spread: float = 0.37  # from a query to the chunk it asks about, in the subspace
    query_focus: float = 0.47  # a query's place in the subspace, scaled: below 1 it is vaguer than a chunk
    query_shift: float = 1.30  # norm of the direction every query shares (e5's «query: »)

    def __post_init__(self) -> None:
        if not 1 <= self.subspace < self.dim - 2:
            raise ValueError(f"subspace must lie in [1, dim - 2), got {self.subspace} with dim {self.dim}")
        if self.doc_size < 1 or not 0 <= self.versions < 1:
            raise ValueError(f"doc_size must be at least 1 and versions lie in [0, 1): {self}")
        if min(self.cone, self.step, self.edit, self.noise, self.query_spread, self.query_focus, self.query_shift) < 0:
            raise ValueError(f"norms must not be negative: {self}")


# Fitted by fit_realistic (800 trials, repeats=2) to multilingual-e5-small vectors: the knowledge base's 403
# chunks (heading_chunks, 200 tokens, overlap 40) and the 30 news documents as rows, the knowledge base's 125
# labelled queries as queries; misfit about 0.1 (measures about 10 % off on average, seeds 0-2).
REALISTIC = Shape()


class _Frame(NamedTuple):
    axis: np.ndarray  # the shared direction of all vectors
    query_axis: np.ndarray  # the shared direction of queries
    basis: np.ndarray  # (dim, subspace): the documents' subspace
    scale: np.ndarray  # (subspace,): standard deviation along each of its directions


def _frame(shape: Shape, seed: int) -> _Frame:
    rng = np.random.default_rng([seed, 0])
    basis, _ = np.linalg.qr(rng.standard_normal((shape.dim, shape.subspace + 2)))
    scale = np.arange(1, shape.subspace + 1) ** (-shape.decay / 2)
    basis, scale = basis.astype(np.float32), (scale / np.linalg.norm(scale)).astype(np.float32)
    return _Frame(basis[:, 0], basis[:, 1], basis[:, 2:], scale)


def _gauss(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return rng.standard_normal(shape, dtype=np.float32)


def _unit(points: np.ndarray) -> np.ndarray:
    points /= np.linalg.norm(points, axis=1, keepdims=True)
    return points


def _chunks(shape: Shape, frame: _Frame, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Positions in the subspace and noise of `n` chunks: documents one after another, each a walk of
    doc_size steps from a random centre, so a chunk lies nearest to the chunks before and after it; a
    share of documents repeat the one before them, each chunk edited a little, its noise kept."""
    rng = np.random.default_rng([seed, 1])
    documents = -(-n // shape.doc_size)
    walks = _gauss(rng, (documents, shape.doc_size, shape.subspace)) * (shape.step * frame.scale)
    walks[:, 0] = _gauss(rng, (documents, shape.subspace)) * frame.scale  # the first chunk: the document's place
    latent = np.cumsum(walks, axis=1, out=walks)  # in place: at 100k rows every copy counts
    noise = _gauss(rng, (documents, shape.doc_size, shape.dim)) * (shape.noise / math.sqrt(shape.dim))
    edits = _gauss(rng, latent.shape) * (shape.edit * frame.scale)
    for doc in np.flatnonzero(rng.random(documents) < shape.versions):
        if doc > 0:
            latent[doc], noise[doc] = latent[doc - 1] + edits[doc], noise[doc - 1]
    return latent.reshape(-1, shape.subspace)[:n], noise.reshape(-1, shape.dim)[:n]


def make_realistic(n: int, queries: int = 0, shape: Shape = REALISTIC, seed: int = 0
                   ) -> tuple[np.ndarray, list[str], np.ndarray]:
    """`n` unit vectors shaped like e5's chunk vectors, a topic per row, and `queries` query vectors. Taught in 12_scale.

    Rows are the chunks of n / doc_size documents, in order; each query asks about a random chunk.
    All float32: a peak of about four (n, dim) arrays.
    """
    if n < 1 or queries < 0:
        raise ValueError(f"need n >= 1 and queries >= 0, got n={n}, queries={queries}")
    frame = _frame(shape, seed)
    latent, rows = _chunks(shape, frame, n, seed)
    rows += latent @ frame.basis.T
    rows += shape.cone * frame.axis
    topics = _topics(np.random.default_rng([seed, 2]), n)
    asked = np.random.default_rng([seed, 3])
    about = latent[asked.integers(0, n, size=queries)]
    about += _gauss(asked, about.shape) * (shape.query_spread * frame.scale)
    about *= shape.query_focus
    probes = about @ frame.basis.T + _gauss(asked, (queries, shape.dim)) * (shape.noise / math.sqrt(shape.dim))
    probes += shape.cone * frame.axis + shape.query_shift * frame.query_axis
    return _unit(rows), topics, _unit(probes)


# --- the two sets as values ----------------------------------------------------------------------

class Dataset(NamedTuple):
    """A synthetic set of 12_scale: its code, a short label and a title saying what it is (Russian), how to make it."""

    name: str
    label: str
    title: str
    make: Callable[[int, int, int], tuple[np.ndarray, list[str], np.ndarray]]  # (n, queries, seed)


def _noisy(n: int, queries: int, seed: int) -> tuple[np.ndarray, list[str], np.ndarray]:
    vectors, topics = make_vectors(n, seed=seed)
    return vectors, topics, make_queries(queries, seed=seed)


SYNTHETIC: dict[str, Dataset] = {
    "noisy": Dataset("noisy", "шумная синтетика", "100 кластеров, шум во всех 384 измерениях (прежний набор урока)",
                     _noisy),
    "realistic": Dataset("realistic", "синтетика по образцу e5",
                         "документы как цепочки фрагментов, разброс сосредоточен в немногих направлениях; "
                         "параметры подобраны под e5",
                         lambda n, queries, seed: make_realistic(n, queries, seed=seed)),
}


def synthetic_set(name: str) -> Dataset:
    """The synthetic set called `name` (a ValueError lists the known ones)."""
    if name not in SYNTHETIC:
        raise ValueError(f"unknown synthetic set {name!r}: expected one of {', '.join(SYNTHETIC)}")
    return SYNTHETIC[name]


def compare_structure(rows: np.ndarray, queries: np.ndarray | None = None, names: Sequence[str] = tuple(SYNTHETIC),
                      seed: int = 0) -> dict[str, dict[str, float]]:
    """``measures`` of the real `rows` (and `queries`) and of each synthetic set made with as many rows and
    queries: a collection of the same size (a realistic set of 433 rows is 48 documents, not 433 rows of
    a large set). Taught in 12_scale."""
    compared = {"real": measures(rows, queries)}
    for name in names:
        made, _, probes = synthetic_set(name).make(len(rows), 0 if queries is None else len(queries), seed)
        compared[name] = measures(made, None if queries is None else probes)
    return compared


# --- fitting the realistic shape to real vectors ---------------------------------------------------

_BOUNDS = {"subspace": (4, 256), "decay": (0.0, 3.0), "cone": (0.5, 6.0), "step": (0.02, 2.0), "edit": (0.005, 1.0), "noise": (0.01, 2.0), "query_spread": (0.05, 3.0), "query_focus": (0.2, 1.5), "query_shift": (0.01, 3.0)}


def misfit(got: Mapping[str, float], target: Mapping[str, float]) -> float:
    """How far two sets' measures lie apart: the root mean square of the log ratios over the target's
    measures (0.1: about 10 % off on average). Taught in 12_scale."""
    return float(np.sqrt(np.mean([np.log(got[k] / target[k]) ** 2 for k in target])))


def fit_realistic(rows: np.ndarray, queries: np.ndarray, documents: Sequence[int], trials: int = 300,
                  start: Shape = REALISTIC, seed: int = 0, repeats: int = 2) -> tuple[Shape, float]:
    """The Shape whose sets measure most like `rows` and `queries`, and its misfit. Taught in 12_scale.

    `documents` names each row's document (a document's rows consecutive). A seeded local random search:
    each trial multiplies one or two parameters of the best shape so far by a random factor, makes a set
    of the same size as `rows` (`repeats` times, with seeds from `seed` on, measures averaged) and keeps the
    change if ``misfit`` of the ``measures`` went down. ``doc_size`` is not searched: set it to the rows'
    chunks per document, nor ``versions``: set it to the share of documents that are another version.
    """
    target = measures(rows, queries, documents)

    def off(shape: Shape) -> float:
        found = []
        for made_seed in range(seed, seed + repeats):
            made, _, probes = make_realistic(len(rows), len(queries), shape, made_seed)
            found.append(measures(made, probes, [row // shape.doc_size for row in range(len(made))]))
        return misfit({k: float(np.mean([f[k] for f in found])) for k in target}, target)

    best = replace(start, dim=rows.shape[1])
    best_misfit = off(best)
    rng = np.random.default_rng(seed)
    for _ in range(trials):
        changes: dict[str, float] = {}
        for name in rng.choice(list(_BOUNDS), size=rng.integers(1, 3), replace=False):
            low, high = _BOUNDS[str(name)]
            value = float(np.clip(getattr(best, str(name)) * np.exp(0.3 * rng.standard_normal()), low, high))
            changes[str(name)] = round(value) if name == "subspace" else value
        try:
            candidate = replace(best, **changes)  # type: ignore[arg-type]
        except ValueError:
            continue
        score = off(candidate)
        if score < best_misfit:
            best, best_misfit = candidate, score
    return best, best_misfit
