"""The lab context: settings, one database connection and the model client, built once at the edge.

Taught in 01_corpus. ``labkit.setup()`` builds a ``Lab`` in a notebook's first code cell
(and each command of ``python -m labkit`` builds one too); search, evaluation and
agent functions take it as their first argument. Nothing below the edge starts,
stops or looks for services: what a function needs, it finds in the ``Lab`` it is given.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

import psycopg

from labkit.core.corpora import DEFAULT_CORPUS
from labkit.core.corpus import Corpus
from labkit.core.settings import Settings

if TYPE_CHECKING:
    import numpy as np
    import ollama


__all__ = ["Lab", "LoadReport"]

QUERY_MEMORY = 4096  # query vectors kept in memory per lab: a repeated query needs no round trip


class LoadReport(NamedTuple):
    """What one ``ensure_corpus`` call did."""

    model: str
    table: str
    dim: int
    documents: int
    changed_documents: int  # rows of the documents table the loader inserted, updated or deleted
    changed_vectors: int
    embedding_calls: int  # requests to the model server made by this call (0 on a re-run)
    embedded_texts: int  # texts the model server embedded for this call
    kept: tuple[int, ...] = ()  # corpus ids whose row someone else edited or inserted: left as it is
    corpus: str = ""  # the name of the corpus loaded
    shipped_texts: int = 0  # texts whose vectors came from the course's file (labkit.store.shipped), not the server


@dataclass(eq=False)
class Lab:
    """One lab session: where the services are, an open connection, the model client and the corpus searched."""

    settings: Settings
    conn: psycopg.Connection[Any]
    models: ollama.Client
    corpus: Corpus = DEFAULT_CORPUS  # the description of the corpus every branch, tool and evaluation reads
    loaded: LoadReport | None = None  # what loading the corpus did, when setup loaded it
    query_vectors: OrderedDict[tuple[str, bytes], np.ndarray] = field(default_factory=OrderedDict, repr=False)
    shipped: dict[bytes, np.ndarray] | None = field(default=None, repr=False)  # labkit.store.shipped.shipped_for, once
    # other corpora this lab loaded on the way (a corpus' finer cut, labkit.retrieval.branches.finer), by table
    side_loads: dict[str, LoadReport] = field(default_factory=dict, repr=False)

    @property
    def embed_model(self) -> str:
        """The embedding model of this lab (settings.embed_model)."""
        return self.settings.embed_model

    @property
    def chat_model(self) -> str:
        """The default chat model of this lab (settings.chat_model)."""
        return self.settings.chat_model

    def remember_query_vector(self, key: tuple[str, bytes], vector: np.ndarray) -> None:
        """Keep a query vector in memory, dropping the oldest beyond QUERY_MEMORY."""
        self.query_vectors[key] = vector
        self.query_vectors.move_to_end(key)
        while len(self.query_vectors) > QUERY_MEMORY:
            self.query_vectors.popitem(last=False)

    def close(self) -> None:
        """Close the connection (the model client holds no server-side state)."""
        self.conn.close()

    def __enter__(self) -> Lab:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        info = self.conn.info
        where = "closed" if self.conn.closed else f"{info.host}:{info.port}/{info.dbname}"
        return (f"Lab(db={where}, models={self.settings.ollama_host}, embed_model={self.embed_model!r}, "
                f"chat_model={self.chat_model!r})")
