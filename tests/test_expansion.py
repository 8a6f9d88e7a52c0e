"""Document expansion (taught in 11_beyond_rrf): questions generated once per document, the expanded and PRF modes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from psycopg import sql

import labkit as lk
from labkit.retrieval.branches.expanded import EXPANDED_TEXT_SQL, EXPANDED_VEC_TABLE, EXPANSION_TABLE
from labkit.retrieval.questions import ensure_expansion, load_shipped, parse_questions

ROOT = Path(__file__).resolve().parent.parent
NEW_MODES = ["expanded", "expanded_lexical", "hybrid_expanded", "hybrid_prf"]
ODD_QUERIES = ["", "   ", "🙂🙂", "'; DROP TABLE news; --", "a & b | !c <-> :*", "\x00\ud800", "золото " * 500]


def test_parse_questions_strips_numbering_and_junk():
    answer = ("Вот запросы:\n1. Цена золота выросла\n2) Почему дорожает золото?\n- «Рекорд цены золота»\n"
              "Запрос 4: лишний запрос про золото\n")
    assert parse_questions(answer) == ["Цена золота выросла", "Почему дорожает золото?", "Рекорд цены золота"]


def test_parse_questions_drops_garbage_repeats_and_the_body():
    body = "Цена золота обновила максимум"
    assert parse_questions("", body) == []
    assert parse_questions("```\n{}\n```\nSure! Here you go\n42", body) == []
    assert parse_questions("Цена золота обновила максимум.\nзолото\nЦена золота\nцена золота", body) == ["Цена золота"]
    assert parse_questions("x " * 300 + "\nслово " * 20) == []


def _labkit(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "labkit", *args], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=600)


class CountingChat:
    """The real chat client, counted."""

    def __init__(self, lab: lk.Lab) -> None:
        self.lab, self.calls = lab, 0

    def __call__(self, **kwargs: Any) -> Any:
        self.calls += 1
        return self.lab.models.chat(**kwargs)


@pytest.fixture()
def scratch(lab: lk.Lab) -> Iterator[lk.Lab]:
    """The lab on a private schema holding a two-document copy of ``news`` (public tables stay untouched)."""
    schema = f"test_expansion_{uuid.uuid4().hex[:10]}"
    conn = lab.conn
    conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    try:
        conn.execute(sql.SQL("SET search_path TO {}, public").format(sql.Identifier(schema)))
        conn.execute("CREATE TABLE news (LIKE public.news INCLUDING ALL)")
        conn.execute("INSERT INTO news (id, body, company, tone, topic) "
                     "SELECT id, body, company, tone, topic FROM public.news WHERE id IN (1, 6)")
        yield lab
    finally:
        conn.execute("SET search_path TO public")
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


def _rows(lab: lk.Lab, table: str) -> dict[int, tuple[Any, ...]]:
    rows = lab.conn.execute(sql.SQL("SELECT * FROM {} ORDER BY 1").format(sql.Identifier(table))).fetchall()
    return {row[0]: row for row in rows} if table == EXPANSION_TABLE else {row[1]: row for row in rows}


@pytest.mark.services
def test_the_shipped_questions_cost_no_chat_call_and_only_fit_the_body_they_were_written_for(scratch):
    lab = scratch
    chat = CountingChat(lab)
    shipped = {row[0]: row for row in load_shipped(lab.corpus.expansion)}
    first = ensure_expansion(lab, send=chat, generate=False)
    assert (chat.calls, first.shipped, first.missing, first.embedded) == (0, 2, 0, 2)
    stored = _rows(lab, EXPANSION_TABLE)
    assert {i: (row[1], row[2], row[3]) for i, row in stored.items()} == {i: shipped[i][1:] for i in (1, 6)}
    assert ensure_expansion(lab, send=chat, generate=False)[-2:] == (0, 0)  # nothing to take again

    lab.conn.execute("UPDATE news SET body = body || ' Подробности позже.' WHERE id = 6")
    changed = ensure_expansion(lab, send=chat, generate=False)
    assert (chat.calls, changed.shipped, changed.missing, changed.reused) == (0, 0, 1, 1)  # written for the old body
    assert _rows(lab, EXPANSION_TABLE)[6] == stored[6]  # kept, and not searched while stale


@pytest.mark.services
def test_questions_are_generated_once_and_only_for_changed_documents(scratch):
    lab = scratch
    chat = CountingChat(lab)
    first = ensure_expansion(lab, send=chat, shipped=False)  # generation itself: not the corpus' shipped questions
    assert (chat.calls, first.generated, first.documents, first.embedded) == (2, 2, 2, 2)
    stored = _rows(lab, EXPANSION_TABLE)
    assert sorted(stored) == [1, 6] and all(row[2] == lab.chat_model for row in stored.values())

    again = ensure_expansion(lab, send=chat, shipped=False)
    assert (chat.calls, again.generated, again.reused, again.embedded) == (2, 0, 2, 0)
    assert _rows(lab, EXPANSION_TABLE) == stored  # not even created_at moved

    lab.conn.execute("UPDATE news SET body = body || ' Подробности позже.' WHERE id = 6")
    stale_text = dict(lab.conn.execute(EXPANDED_TEXT_SQL, {"chat_model": lab.chat_model}).fetchall())
    assert stale_text[6].endswith("Подробности позже.")  # a stale row's questions are not searched
    changed = ensure_expansion(lab, send=chat, shipped=False)
    assert (chat.calls, changed.generated, changed.reused) == (3, 1, 1)
    after = _rows(lab, EXPANSION_TABLE)
    assert after[1] == stored[1] and after[6][1] != stored[6][1]

    lab.conn.execute("DELETE FROM news WHERE id = 1")
    dropped = ensure_expansion(lab, send=chat, shipped=False)
    assert (chat.calls, dropped.generated, dropped.dropped) == (3, 0, 1)
    assert sorted(_rows(lab, EXPANSION_TABLE)) == [6]
    lk.search_expanded(lab, "золото", 3)  # a search brings the vector rows in line too
    assert sorted(_rows(lab, EXPANDED_VEC_TABLE)) == [6]


@pytest.mark.services
@pytest.mark.parametrize("mode", NEW_MODES)
def test_new_modes_take_any_string(lab_ro, expansion, mode):
    search = lk.SEARCH_MODES[mode]
    for query in ODD_QUERIES:
        hits = search(lab_ro, query, 3)
        assert isinstance(hits, list) and len(hits) <= 3 and all(isinstance(h, lk.Hit) for h in hits)
    assert lk.ids(search(lab_ro, "цена золота", 3))  # and a real query finds something
    assert lab_ro.conn.execute("SELECT count(*) FROM news").fetchone()[0] == 30


@pytest.mark.services
def test_expanded_modes_evaluate_end_to_end(lab_ro, expansion):
    queries = lk.load_queries()[:4]
    report = lk.evaluate(lab_ro, queries, NEW_MODES)
    assert report.modes == tuple(NEW_MODES)
    for q in report.queries:
        for mode in NEW_MODES:
            ranking = q.rankings[mode]
            assert len(set(ranking)) == len(ranking) and (len(ranking) == 10 or mode == "expanded_lexical")
    means = report.to_frame()
    assert ((means >= 0) & (means <= 1)).all().all()
    assert means.loc["expanded", "recall@3"] > 0


@pytest.mark.services
def test_the_expand_command_loads_the_shipped_questions_and_names_what_is_left(settings):
    """`./run.sh expand` is the command eval names; --no-generate never calls a chat model."""
    done = _labkit("expand", "--no-generate", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["chat_model"], report["generated"], report["missing"]) == (settings.chat_model, 0, 0)

    other = _labkit("expand", "--no-generate", env=dict(os.environ, CHAT_MODEL=settings.alt_chat_model))
    assert other.returncode == 1 and "0 asked the chat model" in other.stdout and "30 left without" in other.stdout
