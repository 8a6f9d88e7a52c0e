"""A database of its own for one run, on the lab's server, dropped afterwards (``./run.sh ship-vectors``, the tests).

What a fresh clone's lab would hold, whatever the ``lab`` database has gathered: a new, empty
database of the same server, made before and dropped after, even while something still uses it.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from labkit.core.settings import Settings

__all__ = ["scratch_database"]


@contextlib.contextmanager
def scratch_database(settings: Settings, name: str) -> Iterator[Settings]:
    """`settings` pointing at a new database `name` of the lab's server, dropped afterwards (even when in use)."""
    url = settings.database_url or ""
    admin_url = make_conninfo(url, dbname="postgres")
    drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(drop)
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield dataclasses.replace(settings, database_url=make_conninfo(url, dbname=name))
    finally:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(drop)
