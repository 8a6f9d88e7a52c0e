"""A corpus is data: one description of its table, text, metadata and files, and reading its files (01_corpus).

A ``Corpus`` says everything the lab needs to know about a collection of documents: the
table that holds them (an integer ``id``, the text, one column per metadata field and a
generated ``tsv``), the JSON field the text comes from, each metadata field with its SQL
type and Russian gloss, the source file, the labelled queries and the text-search
configuration. The loader, every search branch, the evaluation and the agent's tools read
these from the corpus the lab carries (``lab.corpus``); the corpora themselves are defined
in ``labkit.core.corpora``. A second corpus costs a definition and a data file, not a copy
of every branch.

Documents and queries live as JSON Lines: one record per line, so a broken line is
reported with its file and line number.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime
import json
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from labkit.core.errors import LabError

__all__ = [
    "KIND_NAMES",
    "kind_name",
    "DATA_DIR",
    "ID_COLUMN",
    "MAX_ID",
    "NO_ANSWER",
    "MANY_JOINER",
    "SPLITS",
    "SQL_TYPES",
    "Corpus",
    "DataError",
    "Document",
    "Field",
    "LabelledQuery",
    "query_kinds",
    "read_queries",
    "read_records",
]

DATA_DIR = Path(__file__).resolve().parent.parent / "data"
NO_ANSWER = "no_answer"  # the kind of a labelled query whose answer is in no document (relevant: [])
SPLITS: tuple[str, ...] = ("tune", "report")  # of a labelled set: tune on "tune", report on "report" only
ID_COLUMN = "id"  # every documents table and every table derived from it is keyed by an integer `id`
MAX_ID = 2**31 - 1  # the id is a Postgres integer
MANY_JOINER = "; "  # how the values of a list field are joined into its text column
# The SQL types a metadata field may have, with the JSON type of its values (a date is an ISO string).
SQL_TYPES: dict[str, type] = {"text": str, "integer": int, "date": str}
_NAME = re.compile(r"[a-z_][a-z0-9_]*")
_RESERVED = {ID_COLUMN, "text", "tsv"}  # the record's id and text, the generated tsvector


class DataError(LabError, ValueError):
    """A data file is missing or has a malformed line (the message names file:line)."""


class LabelledQuery(NamedTuple):
    """A search query with the ids of the documents a good search should return."""

    query: str
    relevant: frozenset[int]


class Document(Protocol):
    """One document of a corpus file: a NamedTuple of ``id``, ``text`` and the corpus' metadata fields, in order."""

    @property
    def id(self) -> int: ...

    @property
    def text(self) -> str: ...

    def __iter__(self) -> Iterator[Any]: ...

    def _asdict(self) -> dict[str, Any]: ...


@dataclasses.dataclass(frozen=True)
class Field:
    """One metadata field of a corpus: a key of each JSON record and a column of the documents table."""

    name: str
    gloss: str  # what the field is, in Russian («компания»); the fielded text labels its value with it
    sql_type: str = "text"  # one of SQL_TYPES
    required: bool = True  # False: a record may hold null, and the column allows NULL
    many: bool = False  # True: a JSON list of strings, stored as one text value joined by MANY_JOINER (sql_type "text")
    names: Mapping[str, str] = dataclasses.field(default_factory=dict)  # code -> Russian name, for people
    glosses: Mapping[str, str] = dataclasses.field(default_factory=dict)  # code -> Russian description

    def __post_init__(self) -> None:
        if not _NAME.fullmatch(self.name) or self.name in _RESERVED:
            raise ValueError(f"field name {self.name!r} must match [a-z_][a-z0-9_]* and not be one of {sorted(_RESERVED)}")
        if self.sql_type not in SQL_TYPES:
            raise ValueError(f"field {self.name!r}: sql_type must be one of {', '.join(SQL_TYPES)}, not {self.sql_type!r}")
        if self.many and self.sql_type != "text":
            raise ValueError(f"field {self.name!r}: a list field (many=True) is stored as text, not {self.sql_type}")

    @property
    def label(self) -> str:
        """The gloss as the start of a phrase: «Компания»."""
        return self.gloss[:1].upper() + self.gloss[1:]


@dataclasses.dataclass(frozen=True, eq=False)
class Corpus:
    """A corpus as data: its documents table, text, metadata fields, files and text-search configuration.

    Taught in 01_corpus. Tables and indexes made for the corpus are named by ``derived``.
    """

    name: str  # short code: ``./run.sh eval --corpus NAME``
    title: str  # what it is, in Russian
    table: str  # the documents table: id, the text column, one column per field, tsv
    fields: tuple[Field, ...]  # the metadata, in column order
    source: Path  # the JSONL file of documents
    queries: Path  # the default labelled queries
    heldout: Path | None = None  # labelled queries never used for tuning
    retrieval: Path | None = None  # the larger labelled set with a kind and a split per query
    expansion: Path | None = None  # search questions generated once and shipped with the course (11_beyond_rrf)
    contexts: Path | None = None  # one line of context per chunk, generated once and shipped (15_kb_chunking)
    text_column: str = "body"
    text_field: str = "text"  # the key of the text in a JSON record
    ts_config: str = "russian"  # the text-search configuration of the tsv column and every tsquery
    fielded: tuple[str, ...] = ()  # fields embedded with the text by the fielded branch, in this order
    lexicon: tuple[str, ...] = ()  # text fields whose values are words a reader types (names): spelling reads them
    fixed_names: Mapping[str, str] = dataclasses.field(default_factory=dict)  # derived names that predate `derived`
    # A corpus of units (chunks) of longer documents: `units(record, where)` turns one record of the source file into
    # the records of its units (a DataError naming `where` for a bad one), and `parent` names the integer field that
    # holds the document a unit belongs to; search ranks units, evaluation collapses them to their documents.
    units: Callable[[dict[str, Any], str], list[dict[str, Any]]] | None = None
    parent: str | None = None
    # A corpus of chunks may have a second, finer cut of the same documents (a corpus of chunks of its own), which the
    # `finer` branch searches by its vectors and maps back onto this corpus' chunks (16_kb_codes).
    finer: Corpus | None = None
    record: type[Any] = dataclasses.field(init=False, repr=False)  # the NamedTuple class of one document

    def __post_init__(self) -> None:
        names = [f.name for f in self.fields]
        for name in (self.table, self.text_column, *self.fixed_names.values()):
            if not _NAME.fullmatch(name) or len(name) > 40:
                raise ValueError(f"{self.name}: {name!r} must match [a-z_][a-z0-9_]* and have at most 40 characters")
        if len(set(names)) != len(names) or self.text_column in {*names, *_RESERVED}:
            raise ValueError(f"{self.name}: field and column names must be distinct, got {[self.text_column, *names]}")
        if (self.units is None) != (self.parent is None) or (
                self.parent is not None and (self.parent not in names or self.field(self.parent).sql_type != "integer")):
            raise ValueError(f"{self.name}: units and parent go together, and parent must name an integer field")
        if self.finer is not None and (self.parent is None or self.finer.parent is None or self.finer.table == self.table
                                       or self.finer.source != self.source):
            raise ValueError(f"{self.name}: a finer cut is another corpus of chunks of the same source file")
        unknown = [n for n in (*self.fielded, *self.lexicon) if n not in names]
        if unknown or any(self.field(n).sql_type != "text" for n in self.lexicon):
            raise ValueError(f"{self.name}: fielded and lexicon must name fields (lexicon: text ones), got {unknown}")
        record = collections.namedtuple("Doc", [ID_COLUMN, "text", *names])  # type: ignore[misc]
        record.__doc__ = f"One document of the corpus {self.name!r}: id, text, {', '.join(names) or 'no metadata'}."
        object.__setattr__(self, "record", record)

    def __repr__(self) -> str:
        return f"Corpus({self.name!r}, table={self.table!r}, fields={[f.name for f in self.fields]})"

    def derived(self, role: str) -> str:
        """The name of a table or index made for this corpus: ``<table>_<role>`` unless `fixed_names` has it.

        ``derived("latent")`` is the latent-terms table, ``derived("vec_e5")`` a vector table,
        ``derived("rows")`` the loader's list of its own rows, ``derived("vector_tables")`` the registry.
        """
        return self.fixed_names.get(role, f"{self.table}_{role}")

    def field(self, name: str) -> Field:
        """The metadata field called `name` (KeyError when there is none)."""
        for candidate in self.fields:
            if candidate.name == name:
                return candidate
        raise KeyError(f"the corpus {self.name!r} has no field {name!r}")

    @property
    def columns(self) -> tuple[str, ...]:
        """The loaded columns of the documents table, in record order: id, the text column, the fields."""
        return (ID_COLUMN, self.text_column, *(f.name for f in self.fields))

    def document(self, record: dict[str, Any], where: str) -> Document:
        """One JSON record checked for everything the database would refuse halfway through a load."""
        doc_id = _value(record, ID_COLUMN, int, where)
        text = _value(record, self.text_field, str, where)
        values = {f.name: _field_value(record, f, where) for f in self.fields}
        if not 1 <= doc_id <= MAX_ID:
            raise DataError(f"{where}: field {ID_COLUMN!r} must lie in [1, {MAX_ID}], got {doc_id}")
        if not text.strip():
            raise DataError(f"{where}: empty text")
        for f in self.fields:
            value = values[f.name]
            if f.sql_type == "text" and f.required and not f.many and not value.strip():
                raise DataError(f"{where}: empty {f.name}")
            if f.sql_type == "integer" and value is not None and not -MAX_ID - 1 <= value <= MAX_ID:
                raise DataError(f"{where}: field {f.name!r} must fit a Postgres integer, got {value}")
        for name, value in [(self.text_field, text), *values.items()]:
            if isinstance(value, str) and "\x00" in value:
                raise DataError(f"{where}: field {name!r} contains a NUL character, which Postgres text cannot hold")
        for f in self.fields:
            if f.sql_type == "date" and values[f.name] is not None:
                try:
                    values[f.name] = datetime.date.fromisoformat(values[f.name])
                except ValueError:
                    raise DataError(f"{where}: field {f.name!r} must be a date YYYY-MM-DD, "
                                    f"got {values[f.name]!r}") from None
        doc: Document = self.record(doc_id, text, *values.values())
        return doc

    def documents(self, path: str | Path | None = None) -> list[Document]:
        """Read the corpus file (default `source`), sorted by id. Taught in 01_corpus.

        The whole file is checked before anything is returned: a bad line, a duplicate id or an
        empty file is a DataError naming file:line, so a load never starts on half a corpus.
        """
        path = Path(path) if path is not None else self.source
        docs: dict[int, Document] = {}
        for number, record in read_records(path):
            where = f"{path}:{number}"
            for unit in self.units(record, where) if self.units is not None else [record]:
                doc = self.document(unit, where)
                if doc.id in docs:
                    raise DataError(f"{where}: duplicate {'unit' if self.units else 'document'} id {doc.id}")
                docs[doc.id] = doc
        if not docs:
            raise DataError(f"{path}: no documents in the file")
        return [docs[doc_id] for doc_id in sorted(docs)]


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


def _value(record: dict[str, Any], name: str, kind: type, where: str, optional: bool = False) -> Any:
    """Return record[name], checking its type; raise DataError naming file:line."""
    if name not in record:
        raise DataError(f"{where}: missing field {name!r}")
    value = record[name]
    if value is None and optional:
        return None
    if not isinstance(value, kind) or isinstance(value, bool):
        raise DataError(f"{where}: field {name!r} must be {kind.__name__}, got {value!r}")
    return value


def _field_value(record: dict[str, Any], field: Field, where: str) -> Any:
    """The value of a metadata field in a record, type-checked; a list field's strings joined by MANY_JOINER."""
    if not field.many:
        return _value(record, field.name, SQL_TYPES[field.sql_type], where, optional=not field.required)
    values = _value(record, field.name, list, where, optional=not field.required)
    if values is None:
        return None
    if not all(isinstance(v, str) and v.strip() and MANY_JOINER.strip() not in v for v in values):
        raise DataError(f"{where}: field {field.name!r} must be a list of non-empty strings without "
                        f"{MANY_JOINER.strip()!r}, got {values!r}")
    return MANY_JOINER.join(values)


def read_queries(path: str | Path, split: str | None = None) -> list[LabelledQuery]:
    """Read a file of labelled queries. Taught in 05_evaluation.

    Fields other than ``query`` and ``relevant`` are ignored, unless ``split`` ("tune" or "report") is
    given: then only records whose ``split`` field equals it are kept, and a record without a valid
    ``split`` is a DataError naming file:line. An unknown ``split`` argument is a ValueError. A query
    of ``kind`` "no_answer" with an empty ``relevant`` has nothing to recall and is left out.
    """
    if split is not None and split not in SPLITS:
        raise ValueError(f"unknown split {split!r}: expected one of {', '.join(SPLITS)}")
    path = Path(path)
    queries: list[LabelledQuery] = []
    for number, record in read_records(path):
        where = f"{path}:{number}"
        query = _value(record, "query", str, where)
        relevant = _value(record, "relevant", list, where)
        if relevant == [] and record.get("kind") == NO_ANSWER:
            continue  # nothing to find: judged by whether an answer abstains (the agents), not by recall
        if not relevant or not all(isinstance(i, int) and not isinstance(i, bool) for i in relevant):
            raise DataError(f"{where}: 'relevant' must be a non-empty list of document ids, got {relevant!r}")
        if split is not None:
            record_split = _value(record, "split", str, where)
            if record_split not in SPLITS:
                raise DataError(f"{where}: field 'split' must be one of {', '.join(SPLITS)}, got {record_split!r}")
            if record_split != split:
                continue
        queries.append(LabelledQuery(query=query, relevant=frozenset(relevant)))
    if not queries:
        where_split = f" with split {split!r}" if split is not None else ""
        raise DataError(f"{path}: no queries{where_split} in the file")
    return queries


# One Russian name per kind of labelled query, for every table of the course (news, held-out, knowledge base).
KIND_NAMES = {
    "paraphrase": "парафраз", "homonym": "омоним", "entity": "компания или имя", "number": "число",
    "typo": "опечатка или раскладка", "multiword": "длинный вопрос", "exact": "точный код или имя",
    "code": "код", "exact_phrase": "точная фраза", "abbreviation": "сокращение", "number_date": "число или дата",
    "multi_section": "несколько разделов", "filtered": "с фильтром", "no_answer": "ответа нет в базе",
}


def kind_name(kind: str) -> str:
    """The Russian name of a kind of labelled query (``KIND_NAMES``); an unknown kind is shown as it is."""
    return KIND_NAMES.get(kind, kind)


def query_kinds(path: str | Path) -> dict[str, str]:
    """Map each query of a labelled file to its ``kind`` (e.g. "paraphrase", "typo"), for per-kind tables.

    Every record must have a string ``kind`` (DataError naming file:line otherwise); the same query
    listed twice with different kinds is a DataError too.
    """
    path = Path(path)
    kinds: dict[str, str] = {}
    for number, record in read_records(path):
        where = f"{path}:{number}"
        query = _value(record, "query", str, where)
        kind = _value(record, "kind", str, where)
        if kinds.setdefault(query, kind) != kind:
            raise DataError(f"{where}: query {query!r} listed again with kind {kind!r} (was {kinds[query]!r})")
    return kinds
