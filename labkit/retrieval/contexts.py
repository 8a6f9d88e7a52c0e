"""Contextual chunks: the chat model writes one line of context per chunk, once (taught in 15_kb_chunking).

Anthropic's "contextual retrieval" (2024) asks a large model, for every chunk, for a short text
that situates the chunk in the whole document, and indexes that text with the chunk. Here it is
done cheaply: the lab's small local chat model sees the document's metadata and its outline (the
section headings) and the chunk's first words, not the whole document, and writes ONE sentence per chunk. The lines live in
the corpus' context table (``labkit.retrieval.branches.contextual`` owns it and searches them).

Nothing is generated twice: a line is keyed by the md5 of the chunk's text and the chat model, so
a re-run, and a new cut that leaves a chunk's text unchanged, reuse it. A corpus may ship lines
generated once (``Corpus.contexts``, JSON Lines of ``text_md5``, ``model``, ``context``,
``seconds``): a chunk without a line takes the shipped one written for its text, so the course's
own knowledge base costs no chat call (``generate=False`` loads only those). Each line is written as
soon as it arrives, with the seconds the model spent on it, so the cost of the whole pass is known
even when the lines came from the file. Generating holds ``CONTEXT_LOCK`` (loading shipped lines does not). A garbled answer is stored
as an empty line (the chunk is then searched by its own text), not retried.
"""

from __future__ import annotations

import datetime
import json
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from psycopg import sql

from labkit.core.corpus import ID_COLUMN, MANY_JOINER, Corpus, DataError, read_records
from labkit.models.chat import ask_model
from labkit.retrieval.branches.contextual import ensure_context_tables, sync_contextual_vectors
from labkit.store.locks import CONTEXT_LOCK, advisory_lock

if TYPE_CHECKING:
    from labkit.core.context import Lab

__all__ = ["CONTEXT_PROMPT", "MAX_CONTEXT_CHARS", "ContextReport", "parse_context", "describe_document", "chunk_head",
           "context_messages", "write_context", "load_shipped_contexts", "ensure_contexts", "context_lines",
           "export_contexts"]

MAX_CONTEXT_CHARS = 300
NUM_PREDICT = 50  # tokens: one sentence of up to ~20 words
CHUNK_WORDS = 60  # the model reads the chunk's first words: its head says what it is about, and prompts stay short
LIST_VALUES = 2  # values of a list field (products) shown in a document's description
SKIPPED_FIELDS = ("key", "codes", "date")  # fields that say little to a reader, or are in the chunk's text anyway
LOCK_WAIT_SECONDS = 600.0
_CHUNK_FIELDS = {"section", "span_start", "span_end"}  # a chunk's own fields, not its document's

CONTEXT_PROMPT = (
    "Ты помогаешь поиску по базе знаний. Тебе дают описание документа, его разделы и начало одного фрагмента. "
    "Напиши одно предложение (не больше 20 слов): о чём этот фрагмент в этом документе, простыми словами "
    "покупателя, другими словами, чем в тексте. Название документа не повторяй. Ответь только этим предложением."
)

_LABEL = re.compile(r"^\s*(?:контекст|context|ответ|предложение)\s*[:.-]\s*", re.IGNORECASE)
_CYRILLIC = re.compile(r"[а-яё]", re.IGNORECASE)


class ContextReport(NamedTuple):
    """What one ``ensure_contexts`` call did."""

    chunks: int  # chunks of the corpus
    generated: int  # chat calls made by this call (0 on a re-run)
    shipped: int  # lines taken from the corpus' shipped file in this call
    reused: int  # chunks whose line was in the database already
    missing: int  # chunks left without a line (generate=False and nothing shipped for them)
    empty: int  # lines (of this call's answers) that gave no usable sentence
    seconds: float  # the chat model's own seconds for this call's lines
    line_seconds: float  # the chat model's seconds for all current lines of the corpus, wherever they were made
    embedded: int  # contextual chunks (re)embedded afterwards


def parse_context(answer: str) -> str:
    """The one sentence of a model answer: its first line with Cyrillic letters, labels and quotes removed.

    Cut to MAX_CONTEXT_CHARS at a word boundary; garbage gives "".
    """
    for raw in answer.splitlines():
        line = _LABEL.sub("", raw.strip().strip("*#>-•").strip()).strip().strip("\"'«»“”`*").strip()
        if _CYRILLIC.search(line) and len(line.split()) >= 3:
            if len(line) > MAX_CONTEXT_CHARS:
                line = line[:MAX_CONTEXT_CHARS].rsplit(" ", 1)[0].rstrip(" ,;:") + "…"
            return line
    return ""


def _value(value: Any) -> str:
    return value.isoformat() if isinstance(value, datetime.date) else str(value)


def describe_document(corpus: Corpus, row: Mapping[str, Any], outline: Sequence[str]) -> str:
    """A chunk's document for the prompt: its metadata with their glosses (lists cut to LIST_VALUES), then its sections
    (without the title in front of each, when the corpus has a ``title`` field)."""
    lines = []
    for field in corpus.fields:
        value = row.get(field.name)
        if field.name in (*_CHUNK_FIELDS, *SKIPPED_FIELDS, corpus.parent) or value in (None, ""):
            continue
        if field.many:
            values = str(value).split(MANY_JOINER)
            shown = MANY_JOINER.join(values[:LIST_VALUES]) + (MANY_JOINER + "…" if len(values) > LIST_VALUES else "")
        else:
            shown = field.names.get(_value(value), _value(value))
        lines.append(f"{field.label}: {shown}")
    if outline:
        title = str(row.get("title") or "")
        lines.append("Разделы: " + "; ".join(part.removeprefix(f"{title} › ") for part in outline))
    return "\n".join(lines)


def chunk_head(text: str, words: int = CHUNK_WORDS) -> str:
    """The first `words` words of a chunk's text (the rest marked «…»): what the model reads of it."""
    parts = text.split()
    return " ".join(parts[:words]) + (" …" if len(parts) > words else "")


def context_messages(description: str, chunk: str) -> list[dict[str, str]]:
    """The chat messages for one chunk: the document's description first (shared by its chunks), then the chunk's head."""
    return [{"role": "system", "content": CONTEXT_PROMPT},
            {"role": "user", "content": f"Документ:\n{description}\n\nФрагмент:\n{chunk_head(chunk)}"}]


def write_context(send: Callable[..., Any], model: str, description: str, chunk: str) -> tuple[str, float]:
    """Ask `model` (through ``ask_model``, no thinking, temperature 0) for one chunk's line: (line, model seconds)."""
    reply = ask_model(send, model, context_messages(description, chunk), think=False, num_predict=NUM_PREDICT,
                      temperature=0.0)
    seconds = reply.model_seconds if reply.model_seconds is not None else reply.seconds
    return (parse_context(reply.content) if reply.ok else ""), float(seconds)


def load_shipped_contexts(path: Path) -> list[tuple[str, str, str, float]]:
    """The shipped lines of a corpus: (text_md5, model, context, seconds) per line; DataError naming file:line."""
    rows = []
    for number, record in read_records(path):
        values = [record.get(key) for key in ("text_md5", "model", "context", "seconds")]
        if (not all(isinstance(v, str) for v in values[:3]) or not isinstance(values[3], (int, float))
                or isinstance(values[3], bool) or values[3] < 0):
            raise DataError(f"{path}:{number}: expected text_md5, model, context (strings) and seconds (>= 0)")
        rows.append((str(values[0]), str(values[1]), str(values[2]), float(values[3])))
    return rows


def _chunks(lab: Lab) -> list[dict[str, Any]]:
    """Every chunk of the lab's corpus with its text's md5 and its document's fields, in id order."""
    corpus = lab.corpus
    columns = [ID_COLUMN, corpus.text_column, *(f.name for f in corpus.fields)]
    rows = lab.conn.execute(
        sql.SQL("SELECT {columns}, md5({text}) FROM {table} ORDER BY {id}").format(
            columns=sql.SQL(", ").join(map(sql.Identifier, columns)), text=sql.Identifier(corpus.text_column),
            table=sql.Identifier(corpus.table), id=sql.Identifier(ID_COLUMN))
    ).fetchall()
    return [{**dict(zip(columns, row[:-1])), "md5": row[-1]} for row in rows]


def ensure_contexts(lab: Lab, *, send: Callable[..., Any] | None = None, shipped: bool = True, generate: bool = True,
                    limit: int | None = None, wait_seconds: float = LOCK_WAIT_SECONDS) -> ContextReport:
    """Give every chunk of the lab's corpus its line (shipped ones first, then generated), then embed the texts.

    Taught in 15_kb_chunking. `send` defaults to ``lab.models.chat``; `limit` caps the chat calls of this
    call (the rest stay missing until the next one). With `generate` false no chat call is made. Idempotent:
    a second call makes no chat call and embeds nothing.
    """
    corpus, model, conn = lab.corpus, lab.chat_model, lab.conn
    if corpus.parent is None:
        raise ValueError(f"the corpus {corpus.name!r} has no chunks: contextual chunks need a corpus of chunks")
    chat = send if send is not None else lab.models.chat
    table = sql.Identifier(corpus.derived("context"))
    ensure_context_tables(lab)
    chunks = _chunks(lab)

    def current() -> set[str]:
        rows = conn.execute(sql.SQL("SELECT text_md5 FROM {} WHERE model = %s").format(table), (model,)).fetchall()
        return {md5 for (md5,) in rows}

    before = current()
    if shipped and corpus.contexts is not None and {c["md5"] for c in chunks} - before:
        rows = [row for row in load_shipped_contexts(corpus.contexts)
                if row[1] == model and row[0] in {c["md5"] for c in chunks} - before]
        with conn.cursor() as cur:  # another session may insert the same rows meanwhile: the first one stays
            cur.executemany(sql.SQL("INSERT INTO {} (text_md5, model, context, seconds) VALUES (%s, %s, %s, %s) "
                                    "ON CONFLICT DO NOTHING").format(table), rows)
    shipped_now = current() - before
    todo: list[dict[str, Any]] = []
    empty, seconds = 0, 0.0
    if generate and {c["md5"] for c in chunks} - before - shipped_now:
        with advisory_lock(conn, CONTEXT_LOCK, wait_seconds):  # one writer: two kernels never pay for the same lines
            have = current()
            todo = list({c["md5"]: c for c in chunks if c["md5"] not in have}.values())[:limit]  # one call a text
            outlines: dict[int, list[str]] = {}
            for chunk in chunks:
                section = chunk.get("section")
                if section and section not in outlines.setdefault(chunk[corpus.parent], []):
                    outlines[chunk[corpus.parent]].append(section)
            from tqdm.auto import tqdm  # a pass takes minutes to hours: show it

            for chunk in tqdm(todo, desc="контекст к фрагментам", unit="фрагм.", disable=not todo):
                description = describe_document(corpus, chunk, outlines.get(chunk[corpus.parent], []))
                line, spent = write_context(chat, model, description, chunk[corpus.text_column])
                empty += not line
                seconds += spent
                conn.execute(sql.SQL("INSERT INTO {} (text_md5, model, context, seconds) VALUES (%s, %s, %s, %s) "
                                     "ON CONFLICT (text_md5, model) DO UPDATE SET context = EXCLUDED.context, "
                                     "seconds = EXCLUDED.seconds, created_at = now()").format(table),
                             (chunk["md5"], model, line, spent))
    after = current()
    total = conn.execute(
        sql.SQL("SELECT coalesce(sum(c.seconds), 0) FROM {t} AS c WHERE c.model = %s AND c.text_md5 IN "
                "(SELECT md5({x}) FROM {n})").format(t=table, x=sql.Identifier(corpus.text_column),
                                                    n=sql.Identifier(corpus.table)), (model,)).fetchone()
    embedded = sync_contextual_vectors(lab)
    return ContextReport(chunks=len(chunks), generated=len(todo),
                         shipped=len([c for c in chunks if c["md5"] in shipped_now]),
                         reused=len([c for c in chunks if c["md5"] in before]),
                         missing=len([c for c in chunks if c["md5"] not in after]), empty=empty, seconds=seconds,
                         line_seconds=float(total[0]) if total else 0.0, embedded=embedded)


def context_lines(lab: Lab) -> dict[int, str]:
    """The current line of each chunk of the lab's corpus that has one, by chunk id ("" for a garbled answer)."""
    corpus = lab.corpus
    rows = lab.conn.execute(
        sql.SQL("SELECT n.{id}, c.context FROM {n} AS n JOIN {t} AS c ON c.text_md5 = md5(n.{x}) AND c.model = %s "
                "ORDER BY n.{id}").format(id=sql.Identifier(ID_COLUMN), n=sql.Identifier(corpus.table),
                                         t=sql.Identifier(corpus.derived("context")), x=sql.Identifier(corpus.text_column)),
        (lab.chat_model,)).fetchall()
    return dict(rows)


def export_contexts(lab: Lab, path: str | Path) -> int:
    """Write the current lines of the lab's chunks for its chat model to `path` (the file a corpus ships); return lines."""
    corpus = lab.corpus
    rows = lab.conn.execute(
        sql.SQL("SELECT c.text_md5, c.model, c.context, c.seconds FROM {t} AS c WHERE c.model = %s AND c.text_md5 IN "
                "(SELECT md5({x}) FROM {n}) ORDER BY c.created_at, c.text_md5").format(
            t=sql.Identifier(corpus.derived("context")), x=sql.Identifier(corpus.text_column),
            n=sql.Identifier(corpus.table)), (lab.chat_model,)).fetchall()
    lines = [json.dumps({"text_md5": md5, "model": model, "context": context, "seconds": round(float(seconds), 2)},
                        ensure_ascii=False) for md5, model, context, seconds in rows]
    Path(path).write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return len(lines)
