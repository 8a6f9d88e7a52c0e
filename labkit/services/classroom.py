"""Class mode: a database and a Postgres role of their own for every student, made by JupyterHub.

No notebook teaches this; hub/README.md explains it. The hub (``hub/jupyterhub_config.py``)
runs as root beside the lab's stack and, before it starts a student's server, calls
``spawn_environment(user, settings)``: ``provision`` creates (or checks) the student's login role
and database on the one Postgres and returns the ``DATABASE_URL`` the server gets, together with
the one model server everybody shares. The instructor's superuser password stays in the hub.

A database per student, not a schema: everything in labkit and in the notebooks uses plain table
names (the corpus' tables, the agent's checkpoint tables), per-database extensions and
advisory locks keyed per database. With schemas, students would share those locks (one student's
corpus load would make the whole class wait) and one search_path slip would read a neighbour's
tables; with databases, ``REVOKE ALL ON DATABASE ... FROM PUBLIC`` keeps every other role out at
connection time, whatever a student runs once connected. The cost, about 8 MB on disk per empty
database, is nothing next to a student's kernel.

Each role is a plain login role (no superuser, no CREATEDB/CREATEROLE, at most ``CONNECTION_LIMIT``
connections) that owns only its own database. Its password is derived from the user name and a
secret in the lab home (``classroom.secret``, 0600), so it is the same at every spawn and nothing
per student is stored; it reaches Postgres only as a SCRAM verifier computed here. The server
databases ``postgres`` and ``template1`` and the instructor's database are closed to PUBLIC too.
A student's database starts empty (``template0`` + pgvector); the first ``lk.setup()`` loads the
corpus into it as in a solo lab. Each student also gets the SQL agent's read-only role
(``labkit.store.shop.reader``, ``shop_reader_<database>``, password derived from the student's),
since only a role that may create roles can make it; the student's own session grants it SELECT on
the shop's tables.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
import secrets
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit, urlunsplit

import psycopg
from psycopg import sql

from labkit.core.settings import Settings
from labkit.services.home import ensure_home, read_secret, write_secret
from labkit.store.connection import connection_options
from labkit.store.locks import CLASSROOM_LOCK, advisory_lock
from labkit.store.shop.reader import ensure_reader_role, reader_password, reader_role

__all__ = ["PREFIX", "CONNECTION_LIMIT", "SECRET_FILE", "student_name", "student_password", "provision",
           "remove_student", "spawn_environment", "sync_course"]

PREFIX = "lab_"  # of every student's role and database
CONNECTION_LIMIT = 10  # a notebook holds one to three; more would take slots from the class
SECRET_FILE = "classroom.secret"
ROLE_SETTINGS = {"temp_file_limit": "1GB", "idle_in_transaction_session_timeout": "10min"}
SHARED_DATABASES = ("postgres", "template1")  # closed to students, with the instructor's database


def student_name(user: str) -> str:
    """The role and database name of JupyterHub user `user`: ``lab_`` + the name in ``[a-z0-9_]``.

    A name that had to change (other characters, upper case, length) gets a hash of the original,
    so two users never share one.
    """
    slug = re.sub(r"[^a-z0-9_]+", "_", user.lower()).strip("_")
    if slug != user or len(slug) > 40:
        slug = f"{slug[:40]}_{hashlib.sha256(user.encode()).hexdigest()[:8]}".strip("_")
    return PREFIX + slug


def _secret(home: Path) -> bytes:
    """The class's secret in the lab home, made once."""
    path = ensure_home(home) / SECRET_FILE
    for _ in range(2):
        secret = read_secret(path)
        if secret:
            return secret.encode()
        try:
            write_secret(path, secrets.token_urlsafe(32) + "\n")
        except FileExistsError:  # another hub thread wrote it just now: read theirs
            continue
    raise RuntimeError(f"{path} is empty; remove it and spawn again")


def student_password(user: str, home: Path) -> str:
    """The Postgres password of `user`: HMAC-SHA256 of the name under the class's secret (URL-safe)."""
    digest = hmac.new(_secret(home), user.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def _url(admin_url: str, database: str, role: str | None = None, password: str | None = None) -> str:
    """`admin_url` pointed at `database`, logging in as `role` when given."""
    parts = urlsplit(admin_url)
    if parts.scheme not in ("postgres", "postgresql"):
        raise ValueError("the admin DATABASE_URL must be a postgresql:// URL")
    netloc = parts.netloc
    if role is not None:
        host = netloc.rpartition("@")[2]
        netloc = f"{quote(role, safe='')}:{quote(password or '', safe='')}@{host}"
    return urlunsplit((parts.scheme, netloc, "/" + quote(database, safe=""), parts.query, parts.fragment))


def _connect(url: str) -> psycopg.Connection[Any]:
    return psycopg.connect(url, autocommit=True, **connection_options(url))


def _ensure_role(conn: psycopg.Connection[Any], name: str, password: str) -> None:
    """Create the student's role or bring it back to what it should be (attributes, password, limits)."""
    verifier = conn.pgconn.encrypt_password(password.encode(), name.encode(), b"scram-sha-256").decode()
    exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (name,)).fetchone()
    verb = sql.SQL("ALTER ROLE {} WITH" if exists else "CREATE ROLE {} WITH").format(sql.Identifier(name))
    conn.execute(verb + sql.SQL(" LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS "
                                "CONNECTION LIMIT {} PASSWORD {}").format(sql.Literal(CONNECTION_LIMIT),
                                                                          sql.Literal(verifier)))
    for setting, value in ROLE_SETTINGS.items():
        conn.execute(sql.SQL("ALTER ROLE {} SET {} = {}").format(sql.Identifier(name), sql.Identifier(setting),
                                                                 sql.Literal(value)))


def _ensure_database(conn: psycopg.Connection[Any], name: str) -> None:
    """Create the student's database (owned by their role) or give it back to them; close it to everyone else."""
    database, role = sql.Identifier(name), sql.Identifier(name)
    if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is None:
        conn.execute(sql.SQL("CREATE DATABASE {} OWNER {} TEMPLATE template0").format(database, role))
    else:
        conn.execute(sql.SQL("ALTER DATABASE {} OWNER TO {}").format(database, role))
    conn.execute(sql.SQL("REVOKE ALL ON DATABASE {} FROM PUBLIC").format(database))


def provision(user: str, admin_url: str, home: Path) -> str:
    """Make JupyterHub user `user`'s role and database on the Postgres at `admin_url`; return their DATABASE_URL.

    Idempotent: a second call changes nothing but the role's attributes, if someone altered them.
    `admin_url` is a superuser's URL (the lab's ``DATABASE_URL``); `home` holds the class secret.
    """
    name = student_name(user)
    password = student_password(user, home)
    with _connect(admin_url) as conn, advisory_lock(conn, CLASSROOM_LOCK, wait_seconds=60):
        _ensure_role(conn, name, password)
        _ensure_database(conn, name)
        reader = reader_role(name)  # the SQL agent's read-only role: students may not create roles themselves
        ensure_reader_role(conn, reader, reader_password(password, reader))
        instructor = unquote(urlsplit(admin_url).path.lstrip("/"))
        for database in dict.fromkeys([*SHARED_DATABASES, instructor] if instructor else SHARED_DATABASES):
            conn.execute(sql.SQL("REVOKE CONNECT, TEMPORARY ON DATABASE {} FROM PUBLIC").format(
                sql.Identifier(database)))
    with _connect(_url(admin_url, name)) as conn:  # pgvector needs a superuser to be created
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    return _url(admin_url, name, name, password)


def remove_student(user: str, admin_url: str) -> None:
    """Drop `user`'s database (closing its sessions), role and shop reader role: the end of a course."""
    name = sql.Identifier(student_name(user))
    with _connect(admin_url) as conn, advisory_lock(conn, CLASSROOM_LOCK, wait_seconds=60):
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(name))
        conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(name))
        conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(reader_role(student_name(user)))))


def spawn_environment(user: str, settings: Settings) -> dict[str, str]:
    """What a student's server needs in its environment: their own database and the shared model server.

    `settings` are the hub's, with concrete addresses (``labkit.ensure_stack()``): its
    ``database_url`` is the superuser's and never leaves this function.
    """
    if not settings.database_url or not settings.ollama_host:
        raise ValueError("spawn_environment needs settings with concrete services (labkit.ensure_stack())")
    return {
        "DATABASE_URL": provision(user, settings.database_url, settings.home),
        "OLLAMA_HOST": settings.ollama_host,
        "EMBED_MODEL": settings.embed_model,
        "CHAT_MODEL": settings.chat_model,
        "ALT_CHAT_MODEL": settings.alt_chat_model,
        "NO_TOOLS_MODEL": settings.no_tools_model,
    }


def sync_course(user: str, sources: Sequence[Path], python: Path) -> list[Path]:
    """Bring each course folder of `sources` (``notebooks/``, ``solutions/``) into `user`'s home, up to date.

    ``labkit.services.coursecopy`` does the work, run by `python` as that user: new notebooks are copied,
    notebooks the student never changed follow the course, and a changed one is kept with the new version
    beside it. A link or file a student puts in the way can only lead where they may write themselves.
    Returns the folders in their home.
    """
    import pwd  # Unix only, like the hub

    entry = pwd.getpwnam(user)
    as_user: dict[str, Any] = {}
    if os.geteuid() != entry.pw_uid:
        as_user = {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}
    targets = []
    for source in sources:
        target = Path(entry.pw_dir) / source.name
        subprocess.run([str(python), "-m", "labkit.services.coursecopy", str(source), str(target)], check=True,
                       timeout=120, cwd=entry.pw_dir, capture_output=True,
                       env={"HOME": entry.pw_dir, "PATH": os.defpath}, **as_user)
        targets.append(target)
    return targets
