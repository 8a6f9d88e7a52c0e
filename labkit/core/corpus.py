"""The 30-document news corpus and the 12 labelled queries (taught in 01_corpus).

Both live as JSON Lines in ``labkit/data``: one document or one query per line,
so a broken line is reported with its file and line number.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from labkit.core.errors import LabError

__all__ = [
    "DATA_DIR",
    "TS_CONFIG",
    "CORPUS_PATH",
    "QUERIES_PATH",
    "HELDOUT_PATH",
    "RETRIEVAL_PATH",
    "SPLITS",
    "Doc",
    "LabelledQuery",
    "DataError",
    "load_corpus",
    "load_queries",
    "query_kinds",
    "read_records",
    "TOPICS",
    "COMPANIES",
    "TONES",
    "TOPIC_NAMES",
    "TOPIC_GLOSSES",
    "TONE_NAMES",
]

DATA_DIR = Path(__file__).resolve().parent.parent / "data"
CORPUS_PATH = DATA_DIR / "corpus.jsonl"
QUERIES_PATH = DATA_DIR / "queries.jsonl"
HELDOUT_PATH = DATA_DIR / "heldout.jsonl"  # written after the corpus, never used for tuning (11_beyond_rrf)
# Larger labelled set with a "kind" and a fixed "split" per query: tune on "tune", report on "report" only.
RETRIEVAL_PATH = DATA_DIR / "retrieval.jsonl"
SPLITS: tuple[str, ...] = ("tune", "report")
TS_CONFIG = "russian"  # the text-search configuration of the news corpus (02_lexical)


class DataError(LabError, ValueError):
    """A data file is missing or has a malformed line (the message names file:line)."""


class Doc(NamedTuple):
    """One news item of the corpus."""

    id: int
    text: str
    company: str | None
    tone: str
    topic: str


class LabelledQuery(NamedTuple):
    """A search query with the ids of the documents a good search should return."""

    query: str
    relevant: frozenset[int]


def read_records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (line number, JSON object) for each non-blank line of a JSONL file (clear DataError on bad lines)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: cannot read ({exc})") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(f"{path}:{number}: not valid JSON ({exc.msg})") from None
        if not isinstance(record, dict):
            raise DataError(f"{path}:{number}: expected a JSON object, got {type(record).__name__}")
        yield number, record


def _field(record: dict[str, Any], name: str, kind: type, where: str, optional: bool = False) -> Any:
    """Return record[name], checking its type; raise DataError naming file:line."""
    if name not in record:
        raise DataError(f"{where}: missing field {name!r}")
    value = record[name]
    if value is None and optional:
        return None
    if not isinstance(value, kind) or isinstance(value, bool):
        raise DataError(f"{where}: field {name!r} must be {kind.__name__}, got {value!r}")
    return value


MAX_ID = 2**31 - 1  # news.id is a Postgres integer


def _doc(record: dict[str, Any], where: str) -> Doc:
    """One corpus record checked for everything the database would refuse halfway through a load."""
    doc = Doc(
        id=_field(record, "id", int, where),
        text=_field(record, "text", str, where),
        company=_field(record, "company", str, where, optional=True),
        tone=_field(record, "tone", str, where),
        topic=_field(record, "topic", str, where),
    )
    if not 1 <= doc.id <= MAX_ID:
        raise DataError(f"{where}: field 'id' must lie in [1, {MAX_ID}], got {doc.id}")
    if not doc.text.strip():
        raise DataError(f"{where}: empty text")
    for name in ("tone", "topic"):
        if not getattr(doc, name).strip():
            raise DataError(f"{where}: empty {name}")
    for name in ("text", "company", "tone", "topic"):
        if "\x00" in (getattr(doc, name) or ""):
            raise DataError(f"{where}: field {name!r} contains a NUL character, which Postgres text cannot hold")
    return doc


def load_corpus(path: str | Path | None = None) -> list[Doc]:
    """Read the corpus (default ``labkit/data/corpus.jsonl``), sorted by id. Taught in 01_corpus.

    The whole file is checked before anything is returned: a bad line, a duplicate id or an
    empty file is a DataError naming file:line, so a load never starts on half a corpus.
    """
    path = Path(path) if path is not None else CORPUS_PATH
    docs: dict[int, Doc] = {}
    for number, record in read_records(path):
        where = f"{path}:{number}"
        doc = _doc(record, where)
        if doc.id in docs:
            raise DataError(f"{where}: duplicate document id {doc.id}")
        docs[doc.id] = doc
    if not docs:
        raise DataError(f"{path}: no documents in the file")
    return [docs[doc_id] for doc_id in sorted(docs)]


def load_queries(path: str | Path | None = None, split: str | None = None) -> list[LabelledQuery]:
    """Read labelled queries (default ``labkit/data/queries.jsonl``). Taught in 05_evaluation.

    Fields other than ``query`` and ``relevant`` are ignored, unless ``split`` ("tune" or "report") is
    given: then only records whose ``split`` field equals it are kept, and a record without a valid
    ``split`` is a DataError naming file:line. An unknown ``split`` argument is a ValueError.
    """
    if split is not None and split not in SPLITS:
        raise ValueError(f"unknown split {split!r}: expected one of {', '.join(SPLITS)}")
    path = Path(path) if path is not None else QUERIES_PATH
    queries: list[LabelledQuery] = []
    for number, record in read_records(path):
        where = f"{path}:{number}"
        query = _field(record, "query", str, where)
        relevant = _field(record, "relevant", list, where)
        if not relevant or not all(isinstance(i, int) and not isinstance(i, bool) for i in relevant):
            raise DataError(f"{where}: 'relevant' must be a non-empty list of document ids, got {relevant!r}")
        if split is not None:
            record_split = _field(record, "split", str, where)
            if record_split not in SPLITS:
                raise DataError(f"{where}: field 'split' must be one of {', '.join(SPLITS)}, got {record_split!r}")
            if record_split != split:
                continue
        queries.append(LabelledQuery(query=query, relevant=frozenset(relevant)))
    if not queries:
        where_split = f" with split {split!r}" if split is not None else ""
        raise DataError(f"{path}: no queries{where_split} in the file")
    return queries


def query_kinds(path: str | Path) -> dict[str, str]:
    """Map each query of a labelled file to its ``kind`` (e.g. "paraphrase", "typo"), for per-kind tables.

    Every record must have a string ``kind`` (DataError naming file:line otherwise); the same query
    listed twice with different kinds is a DataError too.
    """
    path = Path(path)
    kinds: dict[str, str] = {}
    for number, record in read_records(path):
        where = f"{path}:{number}"
        query = _field(record, "query", str, where)
        kind = _field(record, "kind", str, where)
        if kinds.setdefault(query, kind) != kind:
            raise DataError(f"{where}: query {query!r} listed again with kind {kind!r} (was {kinds[query]!r})")
    return kinds


_CORPUS = load_corpus()
TOPICS: tuple[str, ...] = tuple(sorted({doc.topic for doc in _CORPUS}))
COMPANIES: tuple[str, ...] = tuple(sorted({doc.company for doc in _CORPUS if doc.company}))
TONES: tuple[str, ...] = tuple(sorted({doc.tone for doc in _CORPUS}))

# What a person reads instead of the codes (in answers, tables and plots).
TOPIC_NAMES: dict[str, str] = {
    "commodities": "сырьё и металлы",
    "energy": "энергетика",
    "finance": "финансы",
    "incident": "происшествия",
    "monetary": "денежно-кредитная политика",
    "realty": "недвижимость",
    "retail": "розничная торговля",
    "sport": "спорт",
    "tech": "технологии",
}
# What each topic holds, in the words a reader uses: shown to the agent's model beside the codes
# (labkit.agent.tools) and embedded with each document by the fielded search branch (labkit.retrieval.branches.fielded).
TOPIC_GLOSSES: dict[str, str] = {
    "commodities": "сырьё: нефть, золото, серебро, металлы, добыча",
    "energy": "энергетика: электроэнергия",
    "finance": "финансы: банки, прибыль компаний, курс рубля, облигации",
    "incident": "происшествия: кибератаки, сбои",
    "monetary": "денежно-кредитная политика: ключевая ставка ЦБ",
    "realty": "недвижимость: жильё, квартиры",
    "retail": "розничная торговля: магазины, ритейлеры",
    "sport": "спорт: соревнования, медали, матчи",
    "tech": "технологии: нейросети, смартфоны, IT",
}
TONE_NAMES: dict[str, str] = {"negative": "негативная", "neutral": "нейтральная", "positive": "позитивная"}
_unnamed = (set(TOPICS) - set(TOPIC_NAMES)) | (set(TOPICS) - set(TOPIC_GLOSSES)) | (set(TONES) - set(TONE_NAMES))
if _unnamed:  # a new code in the data must get a Russian name here
    raise DataError(f"no Russian name for {sorted(_unnamed)}: add it to TOPIC_NAMES/TOPIC_GLOSSES/TONE_NAMES "
                    "in labkit/corpus.py")
