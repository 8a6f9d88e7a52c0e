"""Class mode without the hub: labkit.services.classroom's roles and databases, and how labkit finds a student's services.

The Postgres tests run on a private cluster (tests/privatepg.py): they make roles and close
databases to PUBLIC, which the shared stack must never see. The rest needs no service.
"""

from __future__ import annotations

from types import SimpleNamespace

import psycopg
import pytest
from privatepg import PrivatePostgres, private_postgres
from psycopg.conninfo import conninfo_to_dict, make_conninfo

import labkit as lk
from labkit.core.settings import ClassModeError, client_name, get_settings
from labkit.core.shop.generate import shop_data
from labkit.services import classroom
from labkit.services.setup import model_client
from labkit.store.shop.loading import ensure_shop
from labkit.store.shop.reader import open_reader, reader_password, reader_role, run_select


@pytest.fixture(scope="module")
def cluster():
    with private_postgres() as running:
        yield running


def _other_database(url: str, database: str) -> str:
    return url.rsplit("/", 1)[0] + "/" + database


def _refused(url: str) -> str:
    """The error Postgres answers a connection with ('' if it let the connection in)."""
    try:
        psycopg.connect(url, connect_timeout=10).close()
    except psycopg.OperationalError as err:
        return str(err)
    return ""


# --- names and settings (no service) ------------------------------------------------------------

def test_student_names_are_safe_identifiers_and_never_shared():
    assert classroom.student_name("alice") == "lab_alice"
    odd = ["Alice", "a.lice", "a-lice", "a@lice", "алиса", "x" * 80, "a_lice"]
    names = [classroom.student_name(user) for user in odd]
    assert len(set(names)) == len(odd)  # "a.lice" and "a-lice" would both be a_lice without the hash
    assert all(n.startswith("lab_") and len(n) <= 63 and n.replace("_", "").isalnum() and n.isascii() for n in names)


def test_a_hub_server_without_its_database_refuses_in_russian(monkeypatch):
    monkeypatch.setenv("JUPYTERHUB_USER", "alice")
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("OLLAMA_HOST", "127.0.0.1:11435")
    with pytest.raises(ClassModeError, match="alice") as raised:
        get_settings()
    assert "DATABASE_URL" in str(raised.value) and "преподавател" in str(raised.value)
    assert "OLLAMA_HOST" not in str(raised.value)
    monkeypatch.setenv("LAB_STACK", "compose")  # the compose defaults (one shared database) are no way out
    with pytest.raises(ClassModeError):
        get_settings()


def test_a_hub_server_with_its_services_knows_its_student(monkeypatch):
    monkeypatch.setenv("JUPYTERHUB_USER", "alice")
    monkeypatch.setenv("DATABASE_URL", "postgresql://lab_alice:pw@127.0.0.1:55432/lab_alice")
    monkeypatch.setenv("OLLAMA_HOST", "127.0.0.1:11435")
    settings = get_settings()
    assert settings.student == "alice" and settings.database_url.endswith("/lab_alice")
    assert client_name() == "alice"
    monkeypatch.delenv("JUPYTERHUB_USER")
    assert get_settings().student is None and "@" in client_name()


def test_the_model_client_names_its_student_in_every_request(monkeypatch):
    monkeypatch.setenv("JUPYTERHUB_USER", "alice")
    assert model_client("http://127.0.0.1:1")._client.headers["X-Labkit-Client"] == "alice"
    assert model_client("http://127.0.0.1:1", client="bob")._client.headers["X-Labkit-Client"] == "bob"


# --- roles and databases on a real Postgres -------------------------------------------------------

@pytest.mark.services
def test_each_student_gets_a_database_nobody_else_can_enter(cluster: PrivatePostgres):
    alice = classroom.provision("alice", cluster.admin_url, cluster.home)
    bob = classroom.provision("bob", cluster.admin_url, cluster.home)
    superuser_password = cluster.admin_url.split(":")[2].split("@")[0]
    assert superuser_password not in alice and "postgres:" not in alice
    with psycopg.connect(alice) as conn:
        conn.execute("CREATE TABLE diary (note text)")
        conn.execute("INSERT INTO diary VALUES ('alice was here')")
        assert conn.execute("SELECT current_user, current_database()").fetchone() == ("lab_alice", "lab_alice")
        assert conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone()
    for database in ("lab_alice", "lab", "postgres", "template1"):
        assert "permission denied" in _refused(_other_database(bob, database)), database
    assert "password authentication failed" in _refused(alice.replace("lab_alice:", "lab_bob:"))


@pytest.mark.services
def test_a_student_role_has_no_superuser_powers(cluster: PrivatePostgres):
    alice = classroom.provision("alice", cluster.admin_url, cluster.home)
    with psycopg.connect(alice, autocommit=True) as conn:
        row = conn.execute("SELECT rolsuper, rolcreatedb, rolcreaterole, rolconnlimit FROM pg_roles "
                           "WHERE rolname = current_user").fetchone()
        assert row == (False, False, False, classroom.CONNECTION_LIMIT)
        for statement in ("CREATE DATABASE stolen", "CREATE ROLE helper", "ALTER ROLE lab_bob PASSWORD 'x'",
                          "SELECT pg_read_file('pg_hba.conf')", "COPY (SELECT 1) TO PROGRAM 'true'"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement)


@pytest.mark.services
def test_provisioning_again_keeps_the_data_and_restores_the_role(cluster: PrivatePostgres):
    first = classroom.provision("carol", cluster.admin_url, cluster.home)
    with psycopg.connect(first) as conn:
        conn.execute("CREATE TABLE kept AS SELECT 42 AS answer")
    with psycopg.connect(cluster.admin_url, autocommit=True) as admin:
        admin.execute("ALTER ROLE lab_carol CREATEDB PASSWORD 'guessable'")
    again = classroom.provision("carol", cluster.admin_url, cluster.home)
    assert again == first  # the same password at every spawn: an open kernel keeps working
    with psycopg.connect(again) as conn:
        assert conn.execute("SELECT answer FROM kept").fetchone() == (42,)
        assert conn.execute("SELECT rolcreatedb FROM pg_roles WHERE rolname = current_user").fetchone() == (False,)


@pytest.mark.services
def test_a_student_database_holds_a_whole_lab(cluster: PrivatePostgres, settings: lk.Settings, monkeypatch):
    """What a notebook's setup cell does in class mode: the corpus loads and search runs as the student's role."""
    monkeypatch.setenv("JUPYTERHUB_USER", "dave")
    monkeypatch.setenv("DATABASE_URL", classroom.provision("dave", cluster.admin_url, cluster.home))
    monkeypatch.setenv("OLLAMA_HOST", settings.ollama_host)
    student = get_settings()
    with lk.open_lab(student) as lab:
        assert lab.conn.info.user == "lab_dave" and lab.loaded.documents > 0
        assert lk.search_hybrid(lab, "ключевая ставка", top_k=3)


@pytest.mark.services
def test_a_student_gets_the_shops_read_only_role_they_could_not_make_themselves(cluster: PrivatePostgres):
    """The SQL agent's reader in class mode: made by the hub, granted by the student, reading only their shop."""
    url = classroom.provision("fay", cluster.admin_url, cluster.home)
    with psycopg.connect(url, autocommit=True) as conn:
        lab = SimpleNamespace(conn=conn)
        ensure_shop(lab)  # the loader needs only the lab's connection
        conn.execute("CREATE TABLE diary (note text)")
        with open_reader(conn, url) as reader:
            assert reader.info.user == reader_role("lab_fay")
            assert run_select(reader, "SELECT count(*) FROM products").rows == [(len(shop_data().products),)]
            assert "permission denied" in run_select(reader, "SELECT * FROM public.diary").error
    classroom.provision("gus", cluster.admin_url, cluster.home)
    role = reader_role("lab_fay")
    password = reader_password(conninfo_to_dict(url)["password"], role)
    assert "permission denied" in _refused(make_conninfo(url, user=role, password=password, dbname="lab_gus"))
    classroom.remove_student("fay", cluster.admin_url)
    with psycopg.connect(cluster.admin_url) as admin:
        assert admin.execute("SELECT count(*) FROM pg_roles WHERE rolname = %s", (reader_role("lab_fay"),)).fetchone() == (0,)


@pytest.mark.services
def test_removing_a_student_drops_database_and_role(cluster: PrivatePostgres):
    url = classroom.provision("erin", cluster.admin_url, cluster.home)
    with psycopg.connect(url) as conn:
        classroom.remove_student("erin", cluster.admin_url)  # closes the open session too
        with pytest.raises(psycopg.OperationalError):
            conn.execute("SELECT 1")
    with psycopg.connect(cluster.admin_url) as admin:
        assert admin.execute("SELECT count(*) FROM pg_database WHERE datname = 'lab_erin'").fetchone() == (0,)
        assert admin.execute("SELECT count(*) FROM pg_roles WHERE rolname = 'lab_erin'").fetchone() == (0,)
