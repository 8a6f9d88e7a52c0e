"""The connection to Postgres: one autocommit session with pgvector types and a named application (taught in 01_corpus)."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

import psycopg
from pgvector.psycopg import register_vector
from psycopg.conninfo import conninfo_to_dict

from labkit.core.errors import LabError
from labkit.core.settings import Settings
from labkit.store.locks import advisory_lock

__all__ = ["DatabaseUnavailable", "CONNECT_TIMEOUT", "application_name", "connection_options", "connect"]


CONNECT_TIMEOUT = 10  # seconds psycopg waits for Postgres to accept a connection


class DatabaseUnavailable(LabError):
    """Postgres did not accept a connection (the message says where and what to do)."""


def _redacted(url: str) -> str:
    return re.sub(r"//([^:/@]+):[^@]*@", r"//\1:***@", url)


def application_name() -> str:
    """How the lab's sessions appear in ``pg_stat_activity``: ``labkit <pid> <command>``.

    The command is the ``python -m labkit`` sub-command, else the program's name (``pytest``,
    ``ipykernel_launcher``); Postgres keeps the first 63 characters.
    """
    argv = sys.argv or [""]
    program = Path(argv[0] or "python")
    if program.stem == "__main__":  # python -m package ...
        command = program.parent.name + (f" {argv[1]}" if program.parent.name == "labkit" and len(argv) > 1 else "")
    else:
        command = program.stem if program.stem not in ("", "-", "-c") else "python"
    return f"labkit {os.getpid()} {command}"[:63]


def connection_options(url: str) -> dict[str, Any]:
    """Keyword arguments for ``psycopg.connect(url, ...)``: a connect timeout and, unless the URL or
    ``PGAPPNAME`` already names one, the lab's ``application_name``."""
    options: dict[str, Any] = {"connect_timeout": CONNECT_TIMEOUT}
    try:
        named = "application_name" in conninfo_to_dict(url) or bool(os.environ.get("PGAPPNAME"))
    except psycopg.ProgrammingError:  # a malformed URL: psycopg.connect reports it
        named = False
    if not named:
        options["application_name"] = application_name()
    return options


def connect(settings: Settings) -> psycopg.Connection[Any]:
    """An autocommit connection to ``settings.database_url`` with pgvector types registered. Taught in 01_corpus."""
    if not settings.database_url:
        raise DatabaseUnavailable("no database URL in settings: start the stack with `./run.sh up`")
    try:
        conn = psycopg.connect(settings.database_url, autocommit=True, **connection_options(settings.database_url))
    except psycopg.OperationalError as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DatabaseUnavailable(
            f"cannot connect to Postgres at {_redacted(settings.database_url)}: {reason}. "
            "Start the stack with `./run.sh up` (or `python -m labkit up`) and check `./run.sh status`."
        ) from None
    if conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone() is None:
        with advisory_lock(conn):
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    register_vector(conn)
    return conn

