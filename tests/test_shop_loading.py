"""ensure_shop loads the shop like the corpus: idempotent, students' rows kept, bad data refused, bounded waits.

Real Postgres, in a scratch database of the lab's server (dropped after the module).
"""

from __future__ import annotations

import re
import time

import psycopg
import pytest
from privatepg import scratch_database

import labkit as lk
from labkit.core.corpus import DataError
from labkit.core.shop.generate import shop_data
from labkit.store.locks import SHOP_LOCK, LockBusy, advisory_lock
from labkit.store.shop.loading import ensure_shop
from labkit.store.shop.schema import FIRST_STUDENT_ID, TABLES

pytestmark = pytest.mark.services

SCRATCH = "labkit_scratch_shop_loading"


@pytest.fixture(scope="module")
def scratch_settings(settings):
    with scratch_database(settings, SCRATCH) as scratch:
        yield scratch


@pytest.fixture()
def lab(scratch_settings):
    """A lab on the scratch database without the shop."""
    with lk.open_lab(scratch_settings, load=False) as context:
        context.conn.execute("DROP SCHEMA IF EXISTS shop CASCADE")
        context.conn.execute("DROP TABLE IF EXISTS shop_loader_rows")
        yield context


@pytest.fixture(scope="module")
def data():
    return shop_data()


def _snapshot(conn: psycopg.Connection) -> dict[str, list[tuple]]:
    """Every row of every shop table, and the loader's list."""
    tables = {name: conn.execute(f"SELECT * FROM shop.{name} ORDER BY id").fetchall() for name in TABLES}
    tables["owned"] = conn.execute("SELECT * FROM shop_loader_rows ORDER BY 1, 2").fetchall()
    return tables


def _student_order(conn: psycopg.Connection) -> int:
    """A student's own order with one line, inserted the way a student would: no id given."""
    order = conn.execute(
        "INSERT INTO shop.orders (customer_id, ordered_on, channel, city, delivery, delivery_cost, payment, status) "
        "VALUES (1, '2026-10-30', 'онлайн', 'Тверь', 'курьер', 490, 'карта', 'в доставке') RETURNING id").fetchone()[0]
    conn.execute("INSERT INTO shop.order_items (order_id, product_id, quantity, price) VALUES (%s, 1, 1, 100)", (order,))
    return order


def test_the_first_load_writes_the_shop_and_a_second_changes_nothing(lab, data):
    first = ensure_shop(lab, data)
    assert first.changed == data.rows() == first.total and not any(first.kept.values())
    for name, rows in zip(TABLES, data):
        assert lab.conn.execute(f"SELECT count(*) FROM shop.{name}").fetchone()[0] == len(rows) == first.rows[name]
    before = _snapshot(lab.conn)
    again = ensure_shop(lab, data)
    assert again.changed == 0 and not any(again.kept.values()) and _snapshot(lab.conn) == before


def test_every_table_and_column_has_a_russian_comment(lab, data):
    ensure_shop(lab, data)
    comments = lab.conn.execute(
        """
        SELECT c.relname, a.attname, col_description(c.oid, a.attnum), obj_description(c.oid, 'pg_class')
          FROM pg_class AS c JOIN pg_attribute AS a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
         WHERE c.relnamespace = 'shop'::regnamespace AND c.relkind = 'r'
        """).fetchall()
    assert {row[0] for row in comments} == set(TABLES)
    for table, column, comment, table_comment in comments:
        for text in (comment, table_comment):
            assert text and re.search("[а-яё]", text), f"shop.{table}.{column} has no Russian comment"


def test_rows_a_student_inserted_or_edited_are_kept_and_a_restore_brings_back_only_the_loaders(lab, data):
    ensure_shop(lab, data)
    order = _student_order(lab.conn)
    assert order >= FIRST_STUDENT_ID, "a student's row gets an id no generated row has"
    lab.conn.execute("UPDATE shop.orders SET city = 'Тверь' WHERE id = 5")
    lab.conn.execute("UPDATE shop.products SET price = 1 WHERE id = 2")
    report = ensure_shop(lab, data)
    assert report.changed == 0 and report.kept["orders"] == (5,) and report.kept["products"] == (2,)
    assert lab.conn.execute("SELECT city FROM shop.orders WHERE id = 5").fetchone() == ("Тверь",)
    restored = ensure_shop(lab, data, restore=True)
    assert restored.changed == 2 and not any(restored.kept.values())
    assert lab.conn.execute("SELECT city FROM shop.orders WHERE id = 5").fetchone() == (data.orders[4].city,)
    assert lab.conn.execute("SELECT city FROM shop.orders WHERE id = %s", (order,)).fetchone() == ("Тверь",)
    assert lab.conn.execute("SELECT count(*) FROM shop.order_items WHERE order_id = %s", (order,)).fetchone() == (1,)


def test_rows_that_left_the_data_go_unless_a_student_edited_or_still_references_them(lab, data):
    ensure_shop(lab, data)
    last, before_last = data.orders[-1].id, data.orders[-2].id
    lab.conn.execute("UPDATE shop.orders SET city = 'Тверь' WHERE id = %s", (before_last,))
    lab.conn.execute("INSERT INTO shop.order_items (order_id, product_id, quantity, price) VALUES (%s, 1, 1, 100)",
                     (data.orders[-3].id,))
    gone = {data.orders[-1].id, before_last, data.orders[-3].id}
    fewer = data._replace(orders=tuple(o for o in data.orders if o.id not in gone),
                          items=tuple(i for i in data.items if i.order_id not in gone),
                          returns=tuple(r for r in data.returns
                                        if next(i for i in data.items if i.id == r.order_item_id).order_id not in gone))
    report = ensure_shop(lab, fewer)
    left = {row[0] for row in lab.conn.execute("SELECT id FROM shop.orders WHERE id = ANY(%s)", (sorted(gone),))}
    assert last not in left, "the loader's own unedited order went, with its lines"
    assert before_last in left and data.orders[-3].id in left, "edited or still referenced: handed over"
    assert set(report.kept["orders"]) == {before_last, data.orders[-3].id}
    assert ensure_shop(lab, fewer).kept["orders"] == (), "handed-over rows are no longer the loader's"


def test_bad_data_is_refused_before_the_database_is_touched(lab, data):
    broken = data._replace(items=(data.items[0]._replace(product_id=999), *data.items[1:]))
    with pytest.raises(DataError, match="order_items 1: product 999 does not exist"):
        ensure_shop(lab, broken)
    assert lab.conn.execute("SELECT to_regnamespace('shop')").fetchone() == (None,), "not even the schema was made"
    ensure_shop(lab, data)
    before = _snapshot(lab.conn)
    with pytest.raises(DataError):
        ensure_shop(lab, broken)
    assert _snapshot(lab.conn) == before


def test_data_the_database_refuses_changes_nothing(lab, data):
    ensure_shop(lab, data)
    lab.conn.execute("ALTER TABLE shop.orders ADD CONSTRAINT not_in_kazan CHECK (city <> 'Казань') NOT VALID")
    before = _snapshot(lab.conn)
    moved = data._replace(orders=tuple(o._replace(city="Казань") if o.id == 1 else o for o in data.orders))
    with pytest.raises(DataError, match="the database refused the shop's data, nothing was loaded.*not_in_kazan"):
        ensure_shop(lab, moved)
    assert _snapshot(lab.conn) == before


def test_a_students_open_transaction_makes_the_load_fail_fast_naming_it(lab, data, scratch_settings):
    ensure_shop(lab, data)
    with lk.connect(scratch_settings) as student:
        pid = student.info.backend_pid
        with student.transaction():
            student.execute("LOCK TABLE shop.orders IN ACCESS EXCLUSIVE MODE")
            start = time.monotonic()
            with pytest.raises(LockBusy) as busy:
                ensure_shop(lab, data, lock_timeout="500ms")
            assert time.monotonic() - start < 10
    assert f"pid {pid}" in str(busy.value) and "shop.orders" in str(busy.value)
    assert ensure_shop(lab, data).changed == 0, "released: the next load goes through"


def test_a_second_loader_waits_a_bounded_time_for_the_first(lab, data, scratch_settings):
    with lk.connect(scratch_settings) as other, advisory_lock(other, SHOP_LOCK):
        with pytest.raises(LockBusy, match="loading the shop"):
            ensure_shop(lab, data, wait_seconds=0.2)
