"""The databases of one grading run: a template with the corpus, the grader's reference copy, one copy per notebook.

Every student notebook runs on its own database, made with ``CREATE DATABASE ... TEMPLATE``
from the run's template and owned by a login role made for that student: no superuser, a
connection limit, statement and temp-file limits, CONNECT revoked from everyone else. So a
notebook that drops the corpus' table or deletes rows changes only its own copy, and it cannot drop
another database, alter the server's roles or read server files. Each copy also gets the shop's
read-only role (``labkit.store.shop.reader``), which a student may not create: the SQL agent of
exercise 21 runs its queries under it. Everything the run made is dropped at its end (``drop_all``),
whatever happened in between.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from labkit.store.connection import connection_options
from labkit.store.shop.reader import ensure_reader_role, reader_password, reader_role

__all__ = ["Role", "RunDatabases", "ROLE_SETTINGS", "CONNECTION_LIMIT"]

# Limits of every student role: a runaway query, an idle open transaction or a huge sort stops there.
ROLE_SETTINGS = {"statement_timeout": "60s", "idle_in_transaction_session_timeout": "120s", "temp_file_limit": "512MB"}
CONNECTION_LIMIT = 10  # a notebook needs two or three; more would take slots from everyone on the server

_PUBLIC_TABLES = """
SELECT format('%I.%I', n.nspname, c.relname)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
"""


@dataclass(frozen=True)
class Role:
    """A student's login role for this run."""

    name: str
    password: str


class RunDatabases:
    """Create and drop the databases and roles of one grading run (names start with ``grade_<run>_``)."""

    def __init__(self, admin_url: str, run_id: str) -> None:
        self.admin_url = admin_url
        self.prefix = f"grade_{run_id}_"
        self._databases: list[str] = []
        self._roles: list[str] = []
        self._lock = threading.Lock()

    @property
    def template(self) -> str:
        return self.prefix + "template"

    def url(self, database: str, role: Role | None = None) -> str:
        """The admin URL pointed at `database`, as `role` when given."""
        parts = urlsplit(self.admin_url)
        if parts.scheme not in ("postgres", "postgresql"):  # a key=value conninfo
            credentials = {"user": role.name, "password": role.password} if role else {}
            return make_conninfo(self.admin_url, dbname=database, **credentials)
        netloc = parts.netloc
        if role is not None:
            netloc = f"{quote(role.name, safe='')}:{quote(role.password, safe='')}@{netloc.rpartition('@')[2]}"
        return urlunsplit((parts.scheme, netloc, "/" + quote(database, safe=""), parts.query, parts.fragment))

    @contextmanager
    def _admin(self, database: str | None = None) -> Iterator[psycopg.Connection[Any]]:
        url = self.admin_url if database is None else self.url(database)
        with psycopg.connect(url, autocommit=True, **connection_options(url)) as conn:
            yield conn

    def _create(self, name: str, *, template: str | None = None, owner: str | None = None) -> None:
        statement = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
        if template:
            statement += sql.SQL(" TEMPLATE {}").format(sql.Identifier(template))
        if owner:
            statement += sql.SQL(" OWNER {}").format(sql.Identifier(owner))
        with self._lock:
            self._databases.append(name)
        with self._admin() as conn:
            conn.execute(statement)
            conn.execute(sql.SQL("REVOKE ALL ON DATABASE {} FROM PUBLIC").format(sql.Identifier(name)))

    def create_template(self) -> str:
        """An empty database for the corpus; returns its admin URL (load it, close every connection, then seal it)."""
        self._create(self.template)
        return self.url(self.template)

    def seal_template(self) -> None:
        """No one connects to the template any more (copying it needs that); copies stay possible."""
        with self._admin() as conn:
            conn.execute(sql.SQL("ALTER DATABASE {} WITH ALLOW_CONNECTIONS false").format(sql.Identifier(self.template)))

    def create_reference(self) -> str:
        """The grader's own copy of the template (references are computed there); returns its admin URL."""
        name = self.prefix + "reference"
        self._create(name, template=self.template)
        return self.url(name)

    def create_role(self, label: str) -> Role:
        """A login role for one student, with the limits of ROLE_SETTINGS."""
        role = Role(self.prefix + label, secrets.token_urlsafe(24))
        name = sql.Identifier(role.name)
        with self._lock:
            self._roles.append(role.name)
        with self._admin() as conn:
            conn.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD {} NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION "
                                 "CONNECTION LIMIT {}").format(name, sql.Literal(role.password),
                                                               sql.Literal(CONNECTION_LIMIT)))
            for setting, value in ROLE_SETTINGS.items():
                conn.execute(sql.SQL("ALTER ROLE {} SET {} = {}").format(name, sql.Identifier(setting), sql.Literal(value)))
        return role

    def create_database(self, label: str, role: Role) -> str:
        """A copy of the template owned by `role` (its tables too), with the shop's reader role its lab derives
        (``open_reader``); returns the URL `role` connects with."""
        name = self.prefix + label
        self._create(name, template=self.template, owner=role.name)
        reader = reader_role(name)
        with self._lock:
            self._roles.append(reader)
        with self._admin(name) as conn:
            for (table,) in conn.execute(_PUBLIC_TABLES).fetchall():
                conn.execute(sql.SQL("ALTER TABLE {} OWNER TO {}").format(sql.SQL(table), sql.Identifier(role.name)))
            ensure_reader_role(conn, reader, reader_password(role.password, reader))
        return self.url(name, role)

    def drop_database(self, label: str) -> None:
        """Drop one notebook's database, closing whatever is still connected to it, and its shop reader role."""
        name, reader = self.prefix + label, reader_role(self.prefix + label)
        with self._admin() as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
            conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(reader)))
        with self._lock:
            if name in self._databases:
                self._databases.remove(name)
            if reader in self._roles:
                self._roles.remove(reader)

    def drop_role(self, role: Role) -> None:
        with self._admin() as conn:
            conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role.name)))
        with self._lock:
            if role.name in self._roles:
                self._roles.remove(role.name)

    def drop_all(self) -> list[str]:
        """Drop every database and role the run made and did not drop yet; returns what could not be dropped."""
        left: list[str] = []
        with self._lock:
            databases, roles = list(reversed(self._databases)), list(self._roles)
        try:
            with self._admin() as conn:
                for name in databases:
                    try:
                        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
                    except psycopg.Error as exc:
                        left.append(f"database {name}: {' '.join(str(exc).split())}")
                for name in roles:
                    try:
                        conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))
                    except psycopg.Error as exc:
                        left.append(f"role {name}: {' '.join(str(exc).split())}")
        except psycopg.Error as exc:
            left += [f"{what}: {' '.join(str(exc).split())}" for what in databases + roles]
        with self._lock:
            self._databases.clear()
            self._roles.clear()
        return left
