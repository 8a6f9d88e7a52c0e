"""The corpora the lab knows, by name, and the default one a lab carries (taught in 01_corpus).

Each corpus is defined in a module of its own (``news``, ``kb``); ``load_corpus`` and ``load_queries``
read the default corpus' files unless told otherwise.
"""

from __future__ import annotations

from pathlib import Path

from labkit.core.corpora.kb import KB
from labkit.core.corpora.news import NEWS
from labkit.core.corpus import Corpus, Document, LabelledQuery, read_queries

__all__ = ["CORPORA", "DEFAULT_CORPUS", "corpus_named", "load_corpus", "load_queries"]

CORPORA: dict[str, Corpus] = {corpus.name: corpus for corpus in (NEWS, KB)}
DEFAULT_CORPUS = NEWS


def corpus_named(name: str) -> Corpus:
    """The corpus called `name` (a ValueError lists the known ones)."""
    if name not in CORPORA:
        raise ValueError(f"unknown corpus {name!r}: expected one of {', '.join(CORPORA)}")
    return CORPORA[name]


def load_corpus(path: str | Path | None = None, corpus: Corpus = DEFAULT_CORPUS) -> list[Document]:
    """Read a corpus file (default: the corpus' own), sorted by id. Taught in 01_corpus.

    The whole file is checked before anything is returned: a bad line, a duplicate id or an
    empty file is a DataError naming file:line, so a load never starts on half a corpus.
    """
    return corpus.documents(path)


def load_queries(
    path: str | Path | None = None, split: str | None = None, corpus: Corpus = DEFAULT_CORPUS
) -> list[LabelledQuery]:
    """Read labelled queries (default: the corpus' own, for news the 12 of 05_evaluation). Taught in 05_evaluation.

    Fields other than ``query`` and ``relevant`` are ignored, unless ``split`` ("tune" or "report") is
    given: then only records whose ``split`` field equals it are kept, and a record without a valid
    ``split`` is a DataError naming file:line. An unknown ``split`` argument is a ValueError.
    """
    return read_queries(path if path is not None else corpus.queries, split)
