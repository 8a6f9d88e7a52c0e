"""pgvector at scale: exact scan vs HNSW, its build and search parameters, filtered search (taught in 12_scale).

Vectors (synthetic ones from ``labkit.evaluation.synthetic``, or real ones) live in their own
table ``scale_vectors`` (never the lab corpus' tables), loaded with binary COPY; each row has a
``topic`` for the filter lesson. The first load takes ``SCALE_LOCK`` for the rest of the session:
the table, its index and the measurements on them are one experiment, so a second kernel waits
(and past the wait learns who holds it) instead of replacing the table under the first.
Settings that change plans (``enable_seqscan``, ``hnsw.ef_search``,
``hnsw.iterative_scan``, ``maintenance_work_mem``) are set with
``set_config(..., true)``, i.e. ``SET LOCAL``: they end with the transaction. The searches
are never prepared: psycopg prepares a statement run five times, and a prepared plan made
with the index switched off would go on scanning the table when the index is switched on.

The index is built over the column itself (``vector``: 4 bytes a coordinate) or over its cast to
``halfvec`` (2 bytes a coordinate, pgvector 0.7+): the table keeps float32, the graph holds half the
bytes, and a search orders by the same cast, so the planner can use that index. One index exists
at a time; recall is always counted against the exact float32 scan.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import psycopg
from psycopg import sql

from labkit.evaluation.synthetic import RARE_TOPIC, make_queries, make_vectors
from labkit.store.locks import SCALE_LOCK, hold_session_lock

__all__ = [
    "SCALE_TABLE",
    "EF_SEARCH_VALUES",
    "BUILD_SETTINGS",
    "RARE_TOPIC",
    "make_vectors",
    "make_queries",
    "load_vectors",
    "exact_search",
    "STORAGES",
    "build_hnsw",
    "hnsw_search",
    "hnsw_bytes",
    "SweepPoint",
    "sweep_ef_search",
    "BuildResult",
    "sweep_builds",
    "Choice",
    "choose_setting",
    "filtered_search",
    "plot_tradeoff",
]

SCALE_TABLE = "scale_vectors"
EF_SEARCH_VALUES = (10, 20, 40, 80, 100, 120, 140, 160, 200, 400)
BUILD_SETTINGS = ((8, 32), (16, 64), (32, 128))  # (m, ef_construction): pgvector's default in the middle
_TABLE = sql.Identifier(SCALE_TABLE)


def load_vectors(conn: psycopg.Connection[Any], vectors: np.ndarray, topics: Sequence[str]) -> float:
    """(Re)create ``scale_vectors`` and fill it with binary COPY; return seconds taken. Taught in 12_scale."""
    if len(vectors) != len(topics):
        raise ValueError(f"{len(vectors)} vectors but {len(topics)} topics")
    hold_session_lock(conn, SCALE_LOCK)  # until this session ends: a second kernel waits, it does not swap the table
    start = time.perf_counter()
    with conn.transaction():
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(_TABLE))
        conn.execute(
            sql.SQL("CREATE TABLE {} (id integer PRIMARY KEY, topic text NOT NULL, embedding vector({}) NOT NULL)").format(
                _TABLE, sql.Literal(vectors.shape[1])
            )
        )
        with conn.cursor() as cur:
            with cur.copy(sql.SQL("COPY {} (id, topic, embedding) FROM STDIN WITH (FORMAT BINARY)").format(_TABLE)) as copy:
                copy.set_types(["int4", "text", "vector"])
                for row_id, (vector, topic) in enumerate(zip(vectors, topics), start=1):
                    copy.write_row((row_id, topic, vector))
    conn.execute(sql.SQL("ANALYZE {}").format(_TABLE))
    return time.perf_counter() - start


def _set_local(conn: psycopg.Connection[Any], **settings: str) -> None:
    """SET LOCAL each setting (dots written as __) for the current transaction."""
    for name, value in settings.items():
        conn.execute("SELECT set_config(%s, %s, true)", (name.replace("__", "."), str(value)))


_KNN = sql.SQL("SELECT id FROM {} ORDER BY embedding <=> %(q)s LIMIT %(limit)s").format(_TABLE)
STORAGES = ("vector", "halfvec")  # what the HNSW graph stores of each row: float32 as the table, or float16
_INDEX = {"vector": f"{SCALE_TABLE}_hnsw", "halfvec": f"{SCALE_TABLE}_hnsw_half"}


def _storage(storage: str) -> str:
    if storage not in STORAGES:
        raise ValueError(f"storage must be one of {', '.join(STORAGES)}, got {storage!r}")
    return storage


def _half(dims: int) -> sql.Composable:
    """``embedding::halfvec(dims)``: the expression a halfvec index is built over and searches order by."""
    return sql.SQL("embedding::halfvec({})").format(sql.Literal(int(dims)))


def _knn(storage: str, dims: int) -> sql.Composed:
    """The top-k statement whose ORDER BY matches the index of `storage` (vectors of `dims` coordinates)."""
    if _storage(storage) == "vector":
        return _KNN
    return sql.SQL("SELECT id FROM {t} ORDER BY {e} <=> %(q)s::halfvec({d}) LIMIT %(limit)s").format(
        t=_TABLE, e=_half(dims), d=sql.Literal(int(dims)))


def _timed_ids(conn: psycopg.Connection[Any], statement: sql.Composed, params: dict[str, Any]) -> tuple[list[int], float]:
    start = time.perf_counter()
    rows = conn.execute(statement, params, prepare=False).fetchall()  # planned under this transaction's settings
    return [row[0] for row in rows], (time.perf_counter() - start) * 1000.0


def exact_search(conn: psycopg.Connection[Any], query: np.ndarray, top_k: int = 10) -> tuple[list[int], float]:
    """Exact top-k by cosine distance (index scans disabled) and its milliseconds. Taught in 12_scale."""
    with conn.transaction():
        _set_local(conn, enable_indexscan="off")
        return _timed_ids(conn, _KNN, {"q": query, "limit": top_k})


def hnsw_search(
    conn: psycopg.Connection[Any], query: np.ndarray, top_k: int = 10, ef_search: int = 40, storage: str = "vector"
) -> tuple[list[int], float]:
    """Approximate top-k through the HNSW index of `storage` at a given ef_search, and its milliseconds. Taught in 12_scale."""
    statement = _knn(storage, len(query))
    with conn.transaction():
        _set_local(conn, enable_seqscan="off", hnsw__ef_search=str(ef_search))
        return _timed_ids(conn, statement, {"q": query, "limit": top_k})


def hnsw_bytes(conn: psycopg.Connection[Any], storage: str = "vector") -> int:
    """Bytes on disk of the HNSW index of `storage` (0 when there is none). Taught in 12_scale."""
    row = conn.execute("SELECT pg_relation_size(to_regclass(%s))", (_INDEX[_storage(storage)],)).fetchone()
    return int(row[0] or 0) if row else 0


def _require_index(conn: psycopg.Connection[Any], storage: str) -> None:
    """Without the index of `storage` a search would quietly scan the whole table: say so instead."""
    if hnsw_bytes(conn, storage) == 0:  # an index has at least its metapage
        raise ValueError(f"there is no {storage} HNSW index on {SCALE_TABLE}: build_hnsw(..., storage={storage!r}) first")


def build_hnsw(
    conn: psycopg.Connection[Any], m: int = 16, ef_construction: int = 64, maintenance_work_mem: str = "1GB",
    storage: str = "vector",
) -> float:
    """(Re)build the HNSW cosine index with (m, ef_construction); return build seconds. Taught in 12_scale.

    `storage` "halfvec" builds it over ``embedding::halfvec(dims)`` (half the bytes); the index of the other
    storage is dropped, so one index exists at a time. ``maintenance_work_mem`` is raised for this transaction
    only: a graph that fits in it is built in memory, otherwise pgvector warns and builds much more slowly.
    """
    _storage(storage)
    hold_session_lock(conn, SCALE_LOCK)
    with conn.transaction():
        _set_local(conn, maintenance_work_mem=maintenance_work_mem)
        for name in _INDEX.values():
            conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(name)))
        column: sql.Composable
        if storage == "vector":
            column = sql.SQL("embedding vector_cosine_ops")
        else:
            row = conn.execute(sql.SQL("SELECT vector_dims(embedding) FROM {} LIMIT 1").format(_TABLE)).fetchone()
            if row is None:
                raise ValueError(f"{SCALE_TABLE} is empty: load vectors before building a halfvec index")
            column = sql.SQL("({}) halfvec_cosine_ops").format(_half(row[0]))
        start = time.perf_counter()
        conn.execute(
            sql.SQL("CREATE INDEX {} ON {} USING hnsw ({}) WITH (m = {}, ef_construction = {})").format(
                sql.Identifier(_INDEX[storage]), _TABLE, column, sql.Literal(int(m)), sql.Literal(int(ef_construction)))
        )
        return time.perf_counter() - start


class SweepPoint(NamedTuple):
    """Mean recall@k and median latency of HNSW at one ef_search, with the exact scan's latency."""

    ef_search: int
    recall: float
    hnsw_ms: float
    exact_ms: float

    @property
    def speedup(self) -> float:
        """How many times faster than the exact scan."""
        return self.exact_ms / self.hnsw_ms


def sweep_ef_search(
    conn: psycopg.Connection[Any],
    queries: np.ndarray,
    ef_values: Sequence[int] = EF_SEARCH_VALUES,
    top_k: int = 10,
    repeats: int = 3,
    storage: str = "vector",
) -> list[SweepPoint]:
    """Recall@k of HNSW (its index of `storage`) against the exact scan, and both latencies, for each ef_search.
    Taught in 12_scale.

    A query's latency is the fastest of `repeats` runs, made in separate passes over all the queries
    (what the search costs when nothing else competes for the CPU: a burst of other work seldom
    covers every pass); a setting's latency is the median over the queries.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    _require_index(conn, storage)

    def fastest(search: Any) -> tuple[list[list[int]], list[float]]:
        passes = [[search(query) for query in queries] for _ in range(repeats)]  # each: (ids, ms) per query
        return ([ids for ids, _ in passes[0]],
                [min(run[number][1] for run in passes) for number in range(len(queries))])

    found, exact_ms = fastest(lambda query: exact_search(conn, query, top_k))
    truth = [set(ids) for ids in found]
    exact = statistics.median(exact_ms)
    for query in queries:  # warm-up: the index pages all queries touch into shared buffers
        hnsw_search(conn, query, top_k, max(ef_values), storage)
    points = []
    for ef in ef_values:
        found, latencies = fastest(lambda query, ef=ef: hnsw_search(conn, query, top_k, ef, storage))
        recalls = [len(expected & set(ids)) / len(expected) for ids, expected in zip(found, truth)]
        points.append(SweepPoint(ef, statistics.fmean(recalls), statistics.median(latencies), exact))
    return points


class BuildResult(NamedTuple):
    """One HNSW build: its (m, ef_construction), seconds to build, the ef_search sweep on it, what its graph stores
    (`storage`) and its size on disk."""

    m: int
    ef_construction: int
    build_s: float
    points: list[SweepPoint]
    storage: str = "vector"
    index_bytes: int = 0


def sweep_builds(
    conn: psycopg.Connection[Any],
    queries: np.ndarray,
    builds: Sequence[tuple[int, int]] = BUILD_SETTINGS,
    ef_values: Sequence[int] = EF_SEARCH_VALUES,
    top_k: int = 10,
    maintenance_work_mem: str = "1GB",
    repeats: int = 3,
    storage: str = "vector",
) -> list[BuildResult]:
    """Build the index of `storage` with each (m, ef_construction) in turn and sweep ef_search on it. Taught in 12_scale.

    The last build stays in place.
    """
    results = []
    for m, ef_construction in builds:
        seconds = build_hnsw(conn, m, ef_construction, maintenance_work_mem, storage)
        points = sweep_ef_search(conn, queries, ef_values, top_k, repeats, storage)
        results.append(BuildResult(m, ef_construction, seconds, points, storage, hnsw_bytes(conn, storage)))
    return results


class Choice(NamedTuple):
    """The parameters ``choose_setting`` picked, and whether they reach both targets."""

    build: BuildResult
    point: SweepPoint
    meets: bool


def choose_setting(results: Sequence[BuildResult], min_recall: float = 0.99, min_speedup: float = 10.0) -> Choice | None:
    """The fastest (m, ef_construction, ef_search) with recall >= `min_recall` at a speed-up >= `min_speedup`;
    when none reaches that recall, the best recall at that speed-up (``meets`` False); None when no setting is
    that fast. Taught in 12_scale."""
    fast = [(build, point) for build in results for point in build.points if point.speedup >= min_speedup]
    if not fast:
        return None
    good = [(b, p) for b, p in fast if p.recall >= min_recall]
    if good:
        build, point = max(good, key=lambda pair: pair[1].speedup)
        return Choice(build, point, True)
    build, point = max(fast, key=lambda pair: (pair[1].recall, pair[1].speedup))
    return Choice(build, point, False)


_FILTERED = sql.SQL(
    """
    WITH candidates AS MATERIALIZED (
        SELECT id, embedding <=> %(q)s AS distance FROM {}
        WHERE topic = %(topic)s
        ORDER BY embedding <=> %(q)s
        LIMIT %(limit)s
    )
    SELECT id FROM candidates ORDER BY distance, id
    """
).format(_TABLE)


def filtered_search(
    conn: psycopg.Connection[Any],
    query: np.ndarray,
    topic: str = RARE_TOPIC,
    top_k: int = 10,
    iterative: bool = False,
    ef_search: int = 40,
) -> list[int]:
    """HNSW top-k with ``WHERE topic = ...``; `iterative` turns on relaxed_order iterative scans. Taught in 12_scale.

    The index hands over ef_search candidates and the filter runs after it: without
    iterative scans a 1 % topic leaves about ef_search / 100 rows. relaxed_order lets
    the scan continue until LIMIT rows pass (results re-sorted by the outer query).
    """
    with conn.transaction():
        _set_local(
            conn,
            enable_seqscan="off",
            hnsw__ef_search=str(ef_search),
            hnsw__iterative_scan="relaxed_order" if iterative else "off",
        )
        params = {"q": query, "topic": topic, "limit": top_k}
        return [row[0] for row in conn.execute(_FILTERED, params, prepare=False).fetchall()]


# Where a point's label may go, in points from the dot: right, left, above, below, then farther out.
_LABEL_OFFSETS = ((5, 4), (5, -11), (-5, 4), (-5, -11), (0, 9), (0, -16), (12, 12), (12, -20), (-12, 12), (-12, -20),
                  (-16, -28), (16, -28), (0, -30))


def _along(points: np.ndarray, step: float = 4.0) -> list[np.ndarray]:
    """Points every `step` pixels along a polyline given in pixels: a label must not cross the curve either."""
    found = [points[0]] if len(points) else []
    for start, end in zip(points[:-1], points[1:]):
        count = max(1, int(np.hypot(*(end - start)) // step))
        found += [start + (end - start) * i / count for i in range(1, count + 1)]
    return found


def _label_points(ax: Any, xs: Sequence[float], ys: Sequence[float], texts: Sequence[str], color: Any) -> None:
    """Write each text beside its point where it overlaps no label, legend, marker or axis edge already
    drawn; a text with no free place is left out (its point is still on the curve and in the table)."""
    renderer = ax.figure.canvas.get_renderer()
    taken = [text.get_window_extent(renderer).expanded(1.05, 1.1) for text in ax.texts]
    if ax.get_legend() is not None:
        taken.append(ax.get_legend().get_window_extent(renderer))
    frame = ax.get_window_extent(renderer)
    dots = [dot for line in ax.lines if line.get_gid() != "guide" for dot in _along(ax.transData.transform(line.get_xydata()))]
    for x, y, text in zip(xs, ys, texts):
        for dx, dy in _LABEL_OFFSETS:
            label = ax.annotate(text, (x, y), textcoords="offset points", xytext=(dx, dy), fontsize=8, color=color,
                                ha="left" if dx > 0 else "right" if dx < 0 else "center")
            box = label.get_window_extent(renderer)
            inside = frame.x0 + 2 <= box.x0 and box.x1 <= frame.x1 - 2 and frame.y0 + 2 <= box.y0 and box.y1 <= frame.y1 - 2
            covers_dot = any(box.x0 - 2 <= px <= box.x1 + 2 and box.y0 - 2 <= py <= box.y1 + 2 for px, py in dots)
            if inside and not covers_dot and not any(box.overlaps(other) for other in taken):
                taken.append(box.expanded(1.05, 1.1))
                break
            label.remove()


def plot_tradeoff(curves: Mapping[str, Sequence[SweepPoint]] | Sequence[SweepPoint], ax: Any = None,
                  target: float | None = None, title: str | None = None) -> Any:
    """Recall@k against HNSW milliseconds: a curve per build (a mapping label -> points, or one curve),
    each dot labelled with its ef_search where the label overlaps nothing, the exact scan as a dashed
    line, a `target` recall as a dotted one. Taught in 12_scale.

    The labels are placed last, after the figure is drawn once (and laid out, when it has a layout
    engine): give the figure its titles and other axes before, not after.
    """
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    if not isinstance(curves, Mapping):
        curves = {"HNSW": curves}
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4.5))
    lines = {name: ax.plot([p.hnsw_ms for p in points], [p.recall for p in points], marker="o", label=name)[0]
             for name, points in curves.items()}
    exact = [points[0].exact_ms for points in curves.values() if points]
    if exact:
        ax.axvline(statistics.median(exact), linestyle="--", color="grey", label="точный перебор", gid="guide")
    if target is not None:
        ax.axhline(target, linestyle=":", color="black", label=f"цель: {target:g}", gid="guide")
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))  # 0.2, 0.5, 1, 2, 5: never crowded
    ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("мс на запрос (медиана), логарифмическая шкала")
    ax.set_ylabel("Recall@k относительно точного перебора")
    if title is not None:
        ax.set_title(title, fontsize=10)
    ax.legend(loc="best", fontsize=8)
    ax.figure.canvas.draw()  # places the axes and the legend, so the labels can be measured against them
    for name, points in curves.items():
        _label_points(ax, [p.hnsw_ms for p in points], [p.recall for p in points],
                      [str(p.ef_search) for p in points], lines[name].get_color())
    return ax
