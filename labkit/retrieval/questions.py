"""Document expansion at load time: the chat model writes search questions for each document (11_beyond_rrf).

A short news text and a reader's query often share no word and sit far apart for a small
embedder. ``ensure_expansion`` asks the lab's chat model, once per document of the lab's corpus,
for ``QUESTIONS`` short Russian queries the document answers, and keeps them in the corpus'
expansion table (``Corpus.derived("expansion")``, owned by ``labkit.retrieval.branches.expanded``,
which also searches the expanded texts).

Nothing is generated twice: a row is reused while its ``id``, ``body_md5`` and ``model``
match; a changed body is regenerated for that document only; rows of deleted documents
go. Each answer is written as soon as it arrives, so an interrupted run loses nothing.
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
from typing import TYPE_CHECKING, Any, NamedTuple

from psycopg import sql

from labkit.models.chat import ask_model
from labkit.retrieval.branches.expanded import expansion_ddl, sync_expanded_vectors
from labkit.store.locks import EXPANSION_LOCK, advisory_lock

if TYPE_CHECKING:
    from labkit.core.context import Lab

__all__ = ["QUESTIONS", "EXPANSION_PROMPT", "ExpansionReport", "parse_questions", "generate_questions",
           "ensure_expansion"]

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
    reused: int
    dropped: int  # rows of deleted documents removed
    empty: int  # answers that gave no usable question (stored as an empty list)
    seconds: float  # wall time of the generation (0 when nothing was generated)
    embedded: int  # expanded documents (re)embedded afterwards


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
    lab: Lab, *, send: Callable[..., Any] | None = None, wait_seconds: float = LOCK_WAIT_SECONDS
) -> ExpansionReport:
    """Generate the missing or stale questions of every document, then embed the expanded texts.

    `send` defaults to ``lab.models.chat`` (tests pass a counting wrapper). Idempotent: a second
    call makes no chat call and embeds nothing.
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
        todo = conn.execute(
            sql.SQL(
                "SELECT n.id, n.{x}, md5(n.{x}) FROM {n} AS n LEFT JOIN {t} AS e ON e.id = n.id "
                "WHERE e.id IS NULL OR e.body_md5 <> md5(n.{x}) OR e.model <> %s ORDER BY n.id"
            ).format(t=table, n=documents, x=text),
            (model,),
        ).fetchall()
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
    return ExpansionReport(documents=total, generated=len(todo), reused=total - len(todo), dropped=max(dropped, 0),
                           empty=empty, seconds=seconds, embedded=embedded)
