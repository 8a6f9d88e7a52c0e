"""The role a SQL agent's queries run under: it can read the shop's tables and nothing else (19_sql_agent).

Safety lives in Postgres, not in the prompt or in a filter of SQL text. The reader is a login role
of its own (one per database, ``shop_reader_<database>``) that

* is no superuser, creates nothing, bypasses no row security and belongs to no other role;
* has ``CONNECT`` on its database, ``USAGE`` on schema ``shop`` and ``SELECT`` on its tables, and no
  other privilege: the corpus, the knowledge base, the agent's checkpoints and ``pg_authid`` are
  "permission denied" to it;
* starts every session read-only, with ``search_path = shop``, a ``statement_timeout``, small
  ``work_mem`` and ``temp_file_limit`` (``READER_SETTINGS``, set on the role and, since a role may
  change its own defaults, given again as login options by ``open_reader``);
* runs each query in a ``READ ONLY`` transaction that is rolled back, through a server-side cursor
  that fetches at most ``ROW_CAP`` + 1 rows, and ends with ``DISCARD ALL``, so nothing a query
  changes in its session (settings, advisory locks) outlives it (``run_select``).

A separate login, not ``SET ROLE`` on the lab's own connection: a superuser session that switched
roles can switch back from inside a SELECT (``set_config('role', ...)``), a separate login cannot.
Its password is derived from the lab's own one (HMAC), so nothing new is stored, and in class mode
the hub can make the same role for each student (``ensure_reader_role``), since students may not
create roles themselves.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from labkit.core.errors import LabError
from labkit.store.connection import CONNECT_TIMEOUT, application_name
from labkit.store.locks import SHOP_LOCK, advisory_lock
from labkit.store.shop.schema import SCHEMA

__all__ = ["ROW_CAP", "STATEMENT_TIMEOUT", "READER_SETTINGS", "ReaderUnavailable", "QueryResult", "reader_role",
           "reader_password", "ensure_reader_role", "grant_reader", "open_reader", "run_select", "error_text"]

ROW_CAP = 50  # rows a query may return to the agent; more are cut (QueryResult.truncated)
STATEMENT_TIMEOUT = "5s"  # the longest one query may run
CONNECTION_LIMIT = 8
# The reader's session defaults, set on the role: whoever logs in as it gets them.
READER_SETTINGS = {
    "default_transaction_read_only": "on",
    "statement_timeout": STATEMENT_TIMEOUT,
    "lock_timeout": "1s",
    "idle_in_transaction_session_timeout": "30s",
    "search_path": SCHEMA,
    "work_mem": "4MB",
    "temp_file_limit": "64MB",
}
# The same settings for our own sessions, given at login: a role may change its own defaults of user-level
# settings (ALTER ROLE CURRENT_USER SET ...), not a login option. temp_file_limit needs a superuser either way.
_SESSION_OPTIONS = " ".join(f"-c {name}={value}" for name, value in READER_SETTINGS.items() if name != "temp_file_limit")
_SAFE_ATTRIBUTES = ("NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT NOREPLICATION NOBYPASSRLS")
_WRITE_PRIVILEGES = ("INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER")


class ReaderUnavailable(LabError):
    """The shop's read-only role is missing, unsafe or cannot log in (the message says why and what to do)."""


@dataclass(frozen=True)
class QueryResult:
    """What one query returned under the reader: column names and rows, or Postgres's error text."""

    sql: str
    columns: list[str] = field(default_factory=list)
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    truncated: bool = False  # the query had more than the row cap; `rows` holds the first ROW_CAP
    error: str = ""  # Postgres's own message (and its detail, hint and position), empty when the query ran
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.error


def reader_role(database: str) -> str:
    """The reader's role name for `database`: ``shop_reader_<database>`` (a long or unusual name gets a hash)."""
    slug = re.sub(r"[^a-z0-9_]+", "_", database.lower()).strip("_")
    if slug != database or len(slug) > 40:
        slug = f"{slug[:40]}_{hashlib.sha256(database.encode()).hexdigest()[:8]}".strip("_")
    return f"shop_reader_{slug}"


def reader_password(lab_password: str, role: str) -> str:
    """The reader's password: an HMAC of its name under the lab's own database password (nothing stored)."""
    if not lab_password:
        raise ReaderUnavailable(
            "the lab's DATABASE_URL has no password, so the shop's read-only role cannot get one derived from it: "
            "give DATABASE_URL with a password (the embedded stack's has one)")
    digest = hmac.new(lab_password.encode(), f"labkit shop reader {role}".encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def ensure_reader_role(conn: psycopg.Connection[Any], role: str, password: str) -> None:
    """Create the reader role, or bring it back to what it must be; needs CREATEROLE (the lab's superuser, the hub)."""
    verifier = conn.pgconn.encrypt_password(password.encode(), role.encode(), b"scram-sha-256").decode()
    exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone()
    verb = "ALTER ROLE {} WITH" if exists else "CREATE ROLE {} WITH"
    conn.execute(sql.SQL(verb + " LOGIN " + _SAFE_ATTRIBUTES + " CONNECTION LIMIT {} PASSWORD {}").format(
        sql.Identifier(role), sql.Literal(CONNECTION_LIMIT), sql.Literal(verifier)))
    for setting, value in READER_SETTINGS.items():
        conn.execute(sql.SQL("ALTER ROLE {} SET {} = {}").format(sql.Identifier(role), sql.Identifier(setting),
                                                                  sql.Literal(value)))
    for (granted,) in conn.execute("SELECT g.rolname FROM pg_auth_members AS m JOIN pg_roles AS g ON g.oid = m.roleid "
                                   "WHERE m.member = %s::regrole", (role,)).fetchall():
        conn.execute(sql.SQL("REVOKE {} FROM {}").format(sql.Identifier(granted), sql.Identifier(role)))


def _unsafe(conn: psycopg.Connection[Any], role: str) -> str:
    """Why the existing role `role` is not a safe reader, or ""."""
    row = conn.execute(
        """
        SELECT r.rolsuper, r.rolcreaterole, r.rolcreatedb, r.rolbypassrls, r.rolreplication,
               (SELECT string_agg(m.roleid::regrole::text, ', ') FROM pg_auth_members AS m WHERE m.member = r.oid)
          FROM pg_roles AS r WHERE r.rolname = %s
        """, (role,)).fetchone()
    if row is None:
        return "it does not exist"
    names = ("SUPERUSER", "CREATEROLE", "CREATEDB", "BYPASSRLS", "REPLICATION")
    problems = [name for name, flag in zip(names, row[:5]) if flag]
    if row[5]:
        problems.append(f"member of {row[5]}")
    return ", ".join(problems)


def grant_reader(conn: psycopg.Connection[Any], role: str) -> None:
    """Give `role` exactly CONNECT, USAGE on ``shop`` and SELECT on its tables; refuse an unsafe role.

    Run by the database's owner (the lab, or the student in class mode); grants only what is missing and
    revokes any write privilege, so a second call changes nothing.
    """
    problem = _unsafe(conn, role)
    if problem:
        raise ReaderUnavailable(f"the role {role} cannot be the shop's read-only role: {problem}. "
                                "Run lk.setup() as the lab's superuser to recreate it (in class mode, ask the "
                                "instructor: the hub makes it).")
    database = conn.info.dbname
    can_connect, can_use = conn.execute("SELECT has_database_privilege(%s, %s, 'CONNECT'), "
                                        "has_schema_privilege(%s, %s, 'USAGE')", (role, database, role, SCHEMA)).fetchone() \
        or (False, False)
    if not can_connect:
        conn.execute(sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(sql.Identifier(database), sql.Identifier(role)))
    if not can_use:
        conn.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(sql.Identifier(SCHEMA), sql.Identifier(role)))
    checks = sql.SQL(", ").join(sql.SQL("has_table_privilege(%(role)s, c.oid, {})").format(sql.Literal(p))
                                for p in ("SELECT", *_WRITE_PRIVILEGES))
    for table, can_read, *writes in conn.execute(
            sql.SQL("SELECT c.relname, {} FROM pg_class AS c WHERE c.relnamespace = {}::regnamespace "
                    "AND c.relkind IN ('r', 'v', 'm', 'p') ORDER BY 1").format(checks, sql.Literal(SCHEMA)),
            {"role": role}).fetchall():
        target = sql.Identifier(SCHEMA, table)
        if any(writes):
            conn.execute(sql.SQL("REVOKE ALL ON {} FROM {}").format(target, sql.Identifier(role)))
            can_read = False
        if not can_read:
            conn.execute(sql.SQL("GRANT SELECT ON {} TO {}").format(target, sql.Identifier(role)))
    leaks = conn.execute(
        sql.SQL("SELECT c.relname FROM pg_class AS c WHERE c.relnamespace = {}::regnamespace AND c.relkind = 'r' "
                "AND ({})").format(sql.Literal(SCHEMA), sql.SQL(" OR ").join(
                    sql.SQL("has_table_privilege(%(role)s, c.oid, {})").format(sql.Literal(p)) for p in _WRITE_PRIVILEGES)),
        {"role": role}).fetchall()
    if leaks:  # granted to PUBLIC, so revoking from the reader does not help
        raise ReaderUnavailable(f"the role {role} may still write to shop.{leaks[0][0]} (a privilege granted to PUBLIC?): "
                                f"REVOKE it from PUBLIC and run again")


def _can_make_roles(conn: psycopg.Connection[Any]) -> bool:
    row = conn.execute("SELECT rolsuper OR rolcreaterole FROM pg_roles WHERE rolname = current_user").fetchone()
    return bool(row and row[0])


def _reader_url(lab_url: str, role: str, password: str) -> str:
    return make_conninfo(lab_url, user=role, password=password)


def open_reader(conn: psycopg.Connection[Any], lab_url: str) -> psycopg.Connection[Any]:
    """A connection as the shop's reader, the role made or repaired first when the lab may. Taught in 19_sql_agent.

    `conn` is the lab's own connection (its user owns the database), `lab_url` its DATABASE_URL. The
    connection is autocommit: ``run_select`` opens a read-only transaction per query.
    """
    role = reader_role(conn.info.dbname)
    password = reader_password(conn.info.password or str(conninfo_to_dict(lab_url).get("password") or ""), role)
    with advisory_lock(conn, SHOP_LOCK):  # two kernels may set the role up at once
        if _can_make_roles(conn):
            ensure_reader_role(conn, role, password)
        elif _unsafe(conn, role) == "it does not exist":
            raise ReaderUnavailable(
                f"the shop's read-only role {role} does not exist and {conn.info.user} may not create roles. "
                "In class mode the hub makes it when your server starts: ask the instructor to restart it.")
        grant_reader(conn, role)
    try:
        reader = psycopg.connect(_reader_url(lab_url, role, password), autocommit=True, prepare_threshold=None,
                                 connect_timeout=CONNECT_TIMEOUT, application_name=f"{application_name()} shop"[:63],
                                 options=_SESSION_OPTIONS)
    except psycopg.OperationalError as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ReaderUnavailable(f"cannot log in as the shop's read-only role {role}: {reason}") from None
    return reader


def error_text(exc: psycopg.Error, query: str, offset: int = 0) -> str:
    """Postgres's own words for a failed query: the message, its detail and hint, and where in `query` it points.

    `offset` is how many characters of the statement the server saw came before `query` (a cursor's
    ``DECLARE ... FOR``), so the position is shown in the text the model wrote, psql-style.
    """
    diag = exc.diag
    lines = [f"ERROR:  {diag.message_primary or str(exc).strip().splitlines()[0]}"]
    position = int(diag.statement_position or 0) - offset
    if 0 < position <= len(query) + 1:
        before = query[: position - 1]
        number = before.count("\n") + 1
        line = query.splitlines()[number - 1] if query.splitlines() else ""
        column = len(before) - (before.rfind("\n") + 1)
        prefix = f"LINE {number}: "
        lines += [prefix + line, " " * (len(prefix) + column) + "^"]
    if diag.message_detail:
        lines.append(f"DETAIL:  {diag.message_detail}")
    if diag.message_hint:
        lines.append(f"HINT:  {diag.message_hint}")
    return "\n".join(lines)


def run_select(reader: psycopg.Connection[Any], query: str, row_cap: int = ROW_CAP,
               timeout: str = STATEMENT_TIMEOUT) -> QueryResult:
    """Run one query as the reader: read-only, time-limited, at most `row_cap` rows. Taught in 19_sql_agent.

    A query Postgres refuses or cancels is a ``QueryResult`` whose ``error`` holds Postgres's text (for the
    model to correct); a lost connection raises ``psycopg.OperationalError`` (the database is gone).
    """
    start = time.perf_counter()
    cursor_name = f"shop_{uuid.uuid4().hex[:8]}"
    offset = len(f'DECLARE "{cursor_name}" CURSOR FOR ')
    try:
        try:
            with reader.transaction():
                reader.execute("SET TRANSACTION READ ONLY")
                reader.execute("SELECT set_config('statement_timeout', %s, true)", (timeout,))
                with reader.cursor(name=cursor_name) as cursor:
                    cursor.execute(query.encode())  # bytes: the text goes to the server as written, % and {} too
                    rows = cursor.fetchmany(row_cap + 1)
                    columns = [d.name for d in cursor.description or []]
                raise psycopg.Rollback  # nothing a query did is kept
        except psycopg.Error as exc:
            if reader.broken or reader.closed:
                raise
            return QueryResult(query, error=error_text(exc, query, offset), seconds=time.perf_counter() - start)
    finally:
        if not (reader.broken or reader.closed):
            reader.execute("DISCARD ALL")  # settings, advisory locks, prepared statements: back to the role's defaults
    return QueryResult(query, columns, [tuple(r) for r in rows[:row_cap]], len(rows) > row_cap,
                       seconds=time.perf_counter() - start)
