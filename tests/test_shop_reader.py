"""The shop's reader role refuses every write and every other table by itself, with no help from labkit's checks.

Real Postgres, the lab's own database (its corpus, knowledge-base and checkpoint tables are the
secrets next door). The statements are sent straight to a connection of the role, not through
``run_select`` and not through the SQL check, and the session's read-only default is switched off
first: what refuses them is the role's lack of privilege.
"""

from __future__ import annotations

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

import labkit as lk
from labkit.store.shop.loading import ensure_shop
from labkit.store.shop.reader import (
    READER_SETTINGS,
    ROW_CAP,
    open_reader,
    reader_password,
    reader_role,
    run_select,
)

pytestmark = pytest.mark.services


@pytest.fixture(scope="module")
def lab_ro(settings):
    """The lab's database with the shop loaded (the corpus is there already: the stack's setup loaded it)."""
    with lk.open_lab(settings, load=False) as lab:
        ensure_shop(lab)
        yield lab


@pytest.fixture(scope="module")
def reader(lab_ro):
    connection = open_reader(lab_ro.conn, lab_ro.settings.database_url)
    yield connection
    connection.close()


@pytest.fixture()
def direct(lab_ro, reader):
    """A plain session of the reader role, opened with its password, read-only default switched off."""
    role = reader_role(lab_ro.conn.info.dbname)
    url = make_conninfo(lab_ro.settings.database_url, user=role,
                        password=reader_password(lab_ro.conn.info.password, role))
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET default_transaction_read_only = off")
        yield conn


def _counts(conn: psycopg.Connection) -> dict[str, int]:
    tables = conn.execute("SELECT relname FROM pg_class WHERE relnamespace = 'shop'::regnamespace AND relkind = 'r'")
    return {t: conn.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier("shop", t))).fetchone()[0]
            for (t,) in tables.fetchall()}


WRITES = [
    "INSERT INTO shop.orders (customer_id, ordered_on, channel, city, delivery, delivery_cost, payment, status) "
    "VALUES (1, '2026-01-01', 'онлайн', 'Тверь', 'курьер', 0, 'карта', 'отменён')",
    "UPDATE shop.products SET price = 1",
    "DELETE FROM shop.returns",
    "TRUNCATE shop.order_items",
    "DROP TABLE shop.orders",
    "ALTER TABLE shop.orders ADD COLUMN note text",
    "CREATE TABLE shop.stolen (x int)",
    "CREATE TABLE public.stolen (x int)",
    "CREATE SCHEMA stolen",
    "GRANT SELECT ON public.news TO PUBLIC",
    "COMMENT ON TABLE shop.orders IS 'x'",
    "CREATE INDEX ON shop.orders (city)",
    "SELECT nextval('shop.orders_id_seq')",
    "SELECT setval('shop.orders_id_seq', 1)",
    "SELECT pg_read_file('pg_hba.conf')",
    "COPY shop.orders TO PROGRAM 'true'",
]


@pytest.mark.parametrize("statement", WRITES)
def test_the_role_itself_refuses_every_write(lab_ro, direct, statement):
    before = _counts(lab_ro.conn)
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        direct.execute(statement)
    assert _counts(lab_ro.conn) == before


def test_the_role_reads_no_table_outside_the_shop(lab_ro, direct):
    others = lab_ro.conn.execute(
        """
        SELECT n.nspname, c.relname FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
         WHERE c.relkind IN ('r', 'p', 'v', 'm') AND n.nspname NOT IN ('shop', 'pg_catalog', 'information_schema')
           AND n.nspname NOT LIKE 'pg_toast%%' AND n.nspname NOT LIKE 'pg_temp%%'
        """).fetchall()
    assert {"news", "lab_corpus_rows", "shop_loader_rows"} <= {name for _, name in others}
    for schema, table in others:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            direct.execute(sql.SQL("SELECT * FROM {} LIMIT 1").format(sql.Identifier(schema, table)))


@pytest.mark.parametrize("secret", ["SELECT rolpassword FROM pg_authid", "SELECT passwd FROM pg_shadow",
                                    "SELECT * FROM pg_user_mapping", "SELECT * FROM pg_statistic",
                                    "SELECT query_to_xml('SELECT rolpassword FROM pg_authid', true, false, '')",
                                    "SELECT pg_ls_dir('.')", "SELECT current_setting('data_directory')",
                                    "SELECT * FROM pg_hba_file_rules"])
def test_the_role_reads_no_secret_of_the_server(direct, secret):
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        direct.execute(secret)


def test_the_role_is_plain_and_starts_every_session_read_only(lab_ro, direct):
    role = reader_role(lab_ro.conn.info.dbname)
    flags = lab_ro.conn.execute("SELECT rolsuper, rolcreaterole, rolcreatedb, rolbypassrls, rolinherit, "
                                "(SELECT count(*) FROM pg_auth_members WHERE member = r.oid) "
                                "FROM pg_roles AS r WHERE rolname = %s", (role,)).fetchone()
    assert flags == (False, False, False, False, False, 0)
    with psycopg.connect(direct.info.dsn, password=direct.info.password) as fresh:
        settings = dict(fresh.execute("SELECT name, setting FROM pg_settings WHERE name = ANY(%s)",
                                      (list(READER_SETTINGS),)).fetchall())
    assert settings["default_transaction_read_only"] == "on" and settings["search_path"] == "shop"
    assert settings["statement_timeout"] == "5000"  # milliseconds


def test_a_role_that_changed_its_own_defaults_still_gets_read_only_sessions(lab_ro, direct):
    """Postgres lets any role set its own session defaults; open_reader's login options win over them."""
    direct.execute("ALTER ROLE CURRENT_USER SET default_transaction_read_only = off")
    direct.execute("ALTER ROLE CURRENT_USER SET statement_timeout = 0")
    reader = open_reader(lab_ro.conn, lab_ro.settings.database_url)  # the lab may: it also puts the defaults back
    try:
        assert run_select(reader, "SELECT current_setting('default_transaction_read_only'), "
                                  "current_setting('statement_timeout')").rows == [("on", "5s")]
        with psycopg.connect(direct.info.dsn, password=direct.info.password) as fresh:
            assert fresh.execute("SHOW default_transaction_read_only").fetchone() == ("on",)
    finally:
        reader.close()


def test_a_query_is_capped_timed_out_and_leaves_nothing_behind(reader):
    many = run_select(reader, "SELECT * FROM order_items")
    assert many.ok and many.truncated and len(many.rows) == ROW_CAP and many.columns[0] == "id"
    slow = run_select(reader, "SELECT pg_sleep(3)", timeout="200ms")
    assert "canceling statement due to statement timeout" in slow.error
    sticky = run_select(reader, "SELECT set_config('statement_timeout', '0', false), pg_advisory_lock(42)")
    assert sticky.ok
    after = run_select(reader, "SELECT current_setting('statement_timeout'), "
                               "(SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid())")
    assert after.rows == [("5s", 0)], "DISCARD ALL after each query: the role's settings again, no lock kept"


def test_postgres_own_error_points_into_the_models_sql(reader):
    wrong = run_select(reader, "SELECT nme\n  FROM products WHERE code = '%' || '{x'")
    assert wrong.error.splitlines() == [
        'ERROR:  column "nme" does not exist',
        "LINE 1: SELECT nme",
        "               ^",
        'HINT:  Perhaps you meant to reference the column "products.name".',
    ]
    assert run_select(reader, "SELECT '%s {0} %%' AS text").rows == [("%s {0} %%",)]
    assert "permission denied for table news" in run_select(reader, "SELECT * FROM public.news").error


def test_an_agent_s_rows_are_checked_against_the_gold_query_run_as_the_reader(reader):
    """What 20_supervisor shows under its answers and eval-agent counts: the last SQL step against the gold query."""
    gold = "SELECT count(*) FROM orders WHERE payment = 'СБП'"
    (count,) = run_select(reader, gold).rows[0]
    right = lk.check_against_gold(reader, gold, [(count,)])
    assert right.correct and right.gold_rows == [(count,)]
    wrong = lk.check_against_gold(reader, gold, [(count + 1,)])
    assert not wrong.correct and wrong.got_rows == [(count + 1,)] and wrong.gold_rows == [(count,)]
    assert not lk.check_against_gold(reader, gold, None).correct  # no query of the agent ran
    with pytest.raises(lk.DataError, match="gold query"):
        lk.check_against_gold(reader, "SELECT * FROM no_such_table", [(1,)])
    written = {"agent": "data", "sql": "SELECT count(*) AS n FROM orders WHERE payment IN ('СБП')", "error": ""}
    other = {"agent": "data", "sql": "SELECT count(*) FROM orders", "error": ""}
    failed = {"agent": "data", "sql": "SELECT count(*) FROM ordres", "error": 'relation "ordres" does not exist'}

    class Answer:  # the fields of a SupervisorResult that last_sql_call reads
        tool_calls = [other, written, failed, {"agent": "documents", "sql": "", "error": ""}]

    assert lk.last_sql_call(Answer()) is written  # the last that ran: the failed one and the search are skipped
    assert lk.check_sql_step(reader, gold, written).correct
    assert not lk.check_sql_step(reader, gold, other).correct
    assert not lk.check_sql_step(reader, gold, None).correct
