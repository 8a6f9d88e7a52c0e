"""The supervisor with its database gone: one clear Russian line on every route, never a traceback.

The database cannot be stopped under the other tests, so it goes away the way a client sees a server
that went down: the lab's connection and the SQL agent's reader connection are closed after they were
opened (real psycopg connections; every statement on them fails with psycopg's own ``OperationalError``).
Routing still asks the real model server; the database is gone before or after it, whichever step reads it first.
"""

from __future__ import annotations

import pytest

import labkit as lk
from labkit.agent.markup import has_markup
from labkit.agent.supervisor import Supervisor
from labkit.agent.supervisor.graph import DB_DOWN
from labkit.core.corpora.kb import KB
from labkit.store.shop.loading import ensure_shop

pytestmark = pytest.mark.services

QUESTIONS = ("Как вернуть телевизор, если он сломался через неделю?",  # the knowledge base
             "Сколько заказов оформили в марте 2025 года?")  # the shop's data


def test_the_database_down_gives_one_clear_line_on_every_route(settings):
    with lk.open_lab(settings, corpus=KB) as lab:
        ensure_shop(lab)
        supervisor = Supervisor(lab, kb_lab=lab)
        try:
            supervisor.data.reader.close()  # the data agent's read-only connection, opened while the database was up
            lab.conn.close()
            for question in QUESTIONS:
                result = supervisor.ask(question)
                assert result.answer == DB_DOWN and result.degraded == DB_DOWN, result.answer
                assert result.requires_human and not has_markup(result.answer)
                assert "Traceback" not in result.answer and "psycopg" not in result.answer
        finally:
            supervisor.close()
