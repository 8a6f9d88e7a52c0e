"""Document expansion at load time: the chat model writes search questions for each document (11_beyond_rrf).

A short news text and a reader's query often share no word and sit far apart for a small
embedder. ``ensure_expansion`` asks the lab's chat model, once per document of the lab's corpus,
for ``QUESTIONS`` short Russian queries the document answers, and keeps them in the corpus'
expansion table (``Corpus.derived("expansion")``, owned by ``labkit.retrieval.branches.expanded``,
which also searches the expanded texts).

Nothing is generated twice: a row is reused while its ``id``, ``body_md5`` and ``model``
match; a changed body is regenerated for that document only; rows of deleted documents
go. A corpus may ship questions generated once (``Corpus.expansion``, a JSON Lines file of
``id``, ``body_md5``, ``model``, ``questions``): a document with no row yet, or whose row is
stale, takes the shipped questions when they were written for its current body, so the course's
own corpus costs no chat call at all (``generate=False`` loads only those). Each answer is written as soon as it arrives, so an interrupted run loses nothing.
The whole pass holds a session advisory lock (``EXPANSION_LOCK``, ``db.advisory_lock``: a bounded
wait that names the holder), so two notebooks never pay for the same documents. A garbled answer is stored as
"no questions" (an empty array), not retried: the document is then searched by its body.

This module sits above ``labkit.models.chat`` (the one way to call a chat model), so the search
modes (``labkit.retrieval.branches.expanded``, registered in ``labkit.retrieval.modes``) only read what it stored.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from psycopg import sql
from psycopg.types.json import Jsonb

from labkit.core.corpus import DataError, read_records
from labkit.models.chat import ask_model
from labkit.retrieval.branches.expanded import expansion_ddl, sync_expanded_vectors
from labkit.store.locks import EXPANSION_LOCK, advisory_lock

if TYPE_CHECKING:
    from labkit.core.context import Lab

__all__ = ["QUESTIONS", "EXPANSION_PROMPT", "ExpansionReport", "parse_questions", "generate_questions",
           "load_shipped", "ensure_expansion"]

QUESTIONS = 3  # questions kept per document
MAX_QUESTION_CHARS = 120
LOCK_WAIT_SECONDS = 600.0  # a full pass over 30 documents takes a few minutes on 2 cores
NUM_PREDICT = 120  # tokens: three short lines

EXPANSION_PROMPT = (
    "Ты помогаешь поисковой системе по новостям. По тексту новости напиши ровно 3 коротких поисковых запроса "
    "на русском языке, которые мог бы ввести читатель и на которые отвечает эта новость. "
    "Используй другие слова: синонимы и более общие понятия, чем в тексте. "
    "Каждый запрос на отдельной строке, без нумерации и пояснений."
)

_PREFIX = re.compile(r"^\s*(?:[-*•–—]+|\(?\d{1,2}[.)]|[a-zа-я][.)](?=\s))\s*", re.IGNORECASE)
_LABEL = re.compile(r"^\s*(?:запрос|вопрос|query|question)\s*\d*\s*[:.-]\s*", re.IGNORECASE)
_CYRILLIC = re.compile(r"[а-яё]", re.IGNORECASE)
_WORDS = re.compile(r"\w+")


class ExpansionReport(NamedTuple):
    """What one ``ensure_expansion`` call did."""

    documents: int
    generated: int  # chat calls made by this call (0 on a re-run)
    reused: int  # documents whose questions were there already or came from the shipped file
    dropped: int  # rows of deleted documents removed
    empty: int  # answers that gave no usable question (stored as an empty list)
    seconds: float  # wall time of the generation (0 when nothing was generated)
    embedded: int  # expanded documents (re)embedded afterwards
    shipped: int = 0  # documents that took the questions shipped with the corpus in this call
    missing: int = 0  # documents left without questions of the lab's chat model (generate=False, nothing shipped fits)


def load_shipped(path: Path) -> list[tuple[int, str, str, list[str]]]:
    """The shipped questions of a corpus: (id, body_md5, model, questions) per line; DataError naming file:line."""
    rows = []
    for number, record in read_records(path):
        where = f"{path}:{number}"
        questions = record.get("questions")
        if (not isinstance(record.get("id"), int) or not isinstance(record.get("body_md5"), str)
                or not isinstance(record.get("model"), str) or not isinstance(questions, list)
                or not all(isinstance(q, str) for q in questions)):
            raise DataError(f"{where}: expected id (integer), body_md5, model and questions (a list of strings)")
        rows.append((record["id"], record["body_md5"], record["model"], questions))
    return rows


def parse_questions(answer: str, body: str = "", limit: int = QUESTIONS) -> list[str]:
    """Up to `limit` clean questions from a model answer: one a line, numbering and junk removed.

    A line is kept when it has Cyrillic letters, 2 to 15 words, at most MAX_QUESTION_CHARS
    characters and is neither a repeat nor the document body itself. Garbage gives [].
    """
    kept: list[str] = []
    seen = {body.strip().lower().rstrip(".!?")} if body.strip() else set()
    for raw in answer.splitlines():
        line = _LABEL.sub("", _PREFIX.sub("", raw)).strip().strip("\"'«»“”`*").strip()
        words = _WORDS.findall(line)
        key = line.lower().rstrip(".!?")
        if (not _CYRILLIC.search(line) or not 2 <= len(words) <= 15 or len(line) > MAX_QUESTION_CHARS
                or key in seen or line.endswith(":")):
            continue
        seen.add(key)
        kept.append(line)
        if len(kept) == limit:
            break
    return kept


def generate_questions(send: Callable[..., Any], model: str, body: str) -> list[str]:
    """Ask `model` (through ``ask_model``, no thinking, temperature 0) for the questions of one document."""
    reply = ask_model(
        send, model,
        [{"role": "system", "content": EXPANSION_PROMPT}, {"role": "user", "content": f"Новость: {body}"}],
        think=False, num_predict=NUM_PREDICT, temperature=0.0,
    )
    return parse_questions(reply.content, body) if reply.ok else []


def ensure_expansion(
    lab: Lab, *, send: Callable[..., Any] | None = None, wait_seconds: float = LOCK_WAIT_SECONDS,
    shipped: bool = True, generate: bool = True,
) -> ExpansionReport:
    """Give every document its questions (shipped ones first, then generated), then embed the expanded texts.

    `send` defaults to ``lab.models.chat`` (tests pass a counting wrapper). With `shipped`, a document
    with no current row takes the corpus' shipped questions when they were written for its body;
    with `generate` false no chat call is made, and documents still without questions are counted
    as ``missing``. Idempotent: a second call makes no chat call and embeds nothing.
    """
    conn, model, corpus = lab.conn, lab.chat_model, lab.corpus
    table, documents = sql.Identifier(corpus.derived("expansion")), sql.Identifier(corpus.table)
    text = sql.Identifier(corpus.text_column)
    chat = send if send is not None else lab.models.chat
    with advisory_lock(conn, EXPANSION_LOCK, wait_seconds):
        for statement in expansion_ddl(corpus):
            conn.execute(statement)
        dropped = conn.execute(
            sql.SQL("DELETE FROM {t} AS e WHERE NOT EXISTS (SELECT 1 FROM {n} AS n WHERE n.id = e.id)").format(
                t=table, n=documents)
        ).rowcount
        took = 0
        if shipped and corpus.expansion is not None:
            rows = load_shipped(corpus.expansion)
            took = conn.execute(  # only where the shipped questions were written for the body as it is now
                sql.SQL(
                    """
                    INSERT INTO {t} (id, body_md5, model, questions)
                    SELECT s.id, s.body_md5, s.model, q.questions
                      FROM unnest(%(ids)s::integer[], %(md5s)s::text[], %(models)s::text[], %(questions)s::jsonb[])
                           AS s(id, body_md5, model, questions_json)
                      JOIN {n} AS n ON n.id = s.id AND md5(n.{x}) = s.body_md5,
                           LATERAL (SELECT array(SELECT jsonb_array_elements_text(s.questions_json)) AS questions) AS q
                    ON CONFLICT (id) DO UPDATE SET body_md5 = EXCLUDED.body_md5, model = EXCLUDED.model,
                           questions = EXCLUDED.questions, created_at = now()
                     WHERE {t}.body_md5 <> EXCLUDED.body_md5
                    """
                ).format(t=table, n=documents, x=text),
                {"ids": [r[0] for r in rows], "md5s": [r[1] for r in rows], "models": [r[2] for r in rows],
                 "questions": [Jsonb(r[3]) for r in rows]},
            ).rowcount
        stale = conn.execute(  # no questions for the body as it is now, or questions of another model
            sql.SQL(
                "SELECT n.id, n.{x}, md5(n.{x}) "
                "FROM {n} AS n LEFT JOIN {t} AS e ON e.id = n.id "
                "WHERE e.id IS NULL OR e.body_md5 <> md5(n.{x}) OR e.model <> %s ORDER BY n.id"
            ).format(t=table, n=documents, x=text),
            (model,),
        ).fetchall()
        todo = [(doc_id, body, digest) for doc_id, body, digest in stale] if generate else []
        missing = 0 if generate else len(stale)  # no questions of this model for the body as it is now
        total_row = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(documents)).fetchone()
        total = int(total_row[0]) if total_row else 0
        empty = 0
        start = time.perf_counter()
        from tqdm.auto import tqdm  # a pass takes minutes: show it

        for doc_id, body, digest in tqdm(todo, desc="вопросы к документам", unit="док.", disable=not todo):
            questions = generate_questions(chat, model, body)
            empty += not questions
            conn.execute(  # autocommit: each answer is kept at once
                sql.SQL(
                    "INSERT INTO {t} (id, body_md5, model, questions) VALUES (%s, %s, %s, %s) "
                    "ON CONFLICT (id) DO UPDATE SET body_md5 = EXCLUDED.body_md5, model = EXCLUDED.model, "
                    "questions = EXCLUDED.questions, created_at = now()"
                ).format(t=table),
                (doc_id, digest, model, questions),
            )
        seconds = time.perf_counter() - start if todo else 0.0
    embedded = sync_expanded_vectors(lab)
    return ExpansionReport(documents=total, generated=len(todo), reused=total - len(todo) - missing,
                           dropped=max(dropped, 0), empty=empty, seconds=seconds, embedded=embedded,
                           shipped=max(took, 0), missing=missing)
