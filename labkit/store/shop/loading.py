"""The idempotent load of the shop: generated rows in, students' rows kept, bad data refused (19_sql_agent).

The same guarantees as the corpus load (``labkit.store.loading``, taught in 01_corpus), for four
tables that reference each other:

* the data is validated completely (``validate_shop``) before the database is touched;
* the loader owns only the rows it wrote, listed with their md5 in ``public.shop_loader_rows``: a row
  a student inserted is never changed or deleted; a loader row a student edited is kept and reported
  (``ShopLoadReport.kept``) until ``ensure_shop(lab, restore=True)``; a loader row that left the data
  is deleted unless a student edited it or a student's row still references it;
* all row changes are written in one transaction, under the advisory lock ``SHOP_LOCK`` (a bounded
  wait that names its holder) and with a ``lock_timeout``, so a student's open transaction on a shop
  table makes the load fail with a message instead of hanging;
* a second load of unchanged data changes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import psycopg
from psycopg import sql

from labkit.core.corpus import DataError
from labkit.core.shop.data import Order, OrderItem, Product, Return, ShopData, validate_shop
from labkit.core.shop.generate import shop_data
from labkit.store.locks import LOCK_WAIT_SECONDS, SHOP_LOCK, LockBusy, advisory_lock
from labkit.store.shop.schema import ROWS_TABLE, SCHEMA, TABLES, ensure_schema

if TYPE_CHECKING:
    from labkit.core.context import Lab

__all__ = ["ShopLoadReport", "ensure_shop", "LOCK_TIMEOUT"]

LOCK_TIMEOUT = "10s"  # the longest the load waits for a row or table lock a student's session holds

# Each table's row type and the SQL type of each column, in column order (the id first).
_ROWS: dict[str, tuple[type[Any], tuple[str, ...]]] = {
    "products": (Product, ("integer", "text", "text", "text", "text", "numeric", "integer", "boolean", "boolean")),
    "orders": (Order, ("integer", "integer", "date", "text", "text", "text", "numeric", "text", "text", "date")),
    "order_items": (OrderItem, ("integer", "integer", "integer", "integer", "numeric")),
    "returns": (Return, ("integer", "integer", "date", "integer", "text", "text", "text", "numeric")),
}
# Which tables reference a table's rows, through which column: a referenced stale row is handed over, not deleted.
_REFERENCED_BY: dict[str, tuple[tuple[str, str], ...]] = {
    "products": (("order_items", "product_id"),),
    "orders": (("order_items", "order_id"),),
    "order_items": (("returns", "order_item_id"),),
    "returns": (),
}


class ShopLoadReport(NamedTuple):
    """What one ``ensure_shop`` call did."""

    rows: dict[str, int]  # rows of the data per table
    changed: int  # rows the loader inserted, updated or deleted
    kept: dict[str, tuple[int, ...]]  # per table: ids left as a student made them (see the module docstring)

    @property
    def total(self) -> int:
        """Rows of the data in all tables."""
        return sum(self.rows.values())


class _Table:
    """The loader's SQL for one shop table: its name, columns and rows as ``unnest`` arrays."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.record, self.types = _ROWS[name]
        self.columns: tuple[str, ...] = self.record._fields
        self.ident = sql.Identifier(SCHEMA, name)
        self.content = sql.SQL(", ").join(sql.Identifier(c) for c in self.columns[1:])
        self.md5 = sql.SQL("md5(row({})::text)").format(self.content)
        self.arrays = sql.SQL(", ").join(sql.SQL("{}::{}[]").format(sql.Placeholder(f"col_{c}"), sql.SQL(t))
                                         for c, t in zip(self.columns, self.types))
        self.aliases = sql.SQL(", ").join(sql.Identifier(f"new_{c}") for c in self.columns)

    def arrays_of(self, rows: Sequence[Any]) -> dict[str, list[Any]]:
        return {f"col_{c}": [row[i] for row in rows] for i, c in enumerate(self.columns)}


def _upsert(conn: psycopg.Connection[Any], table: _Table, rows: Sequence[Any], owned: dict[int, str], restore: bool
            ) -> tuple[list[int], int, list[int], list[int]]:
    """Insert or update the loader's rows of `table` (`owned`: the ids it wrote, with their md5); returns (ids now
    holding their row, rows changed, ids kept as a student made them, the loader's unedited rows that left the data)."""
    ids = {row.id for row in rows}
    current = {r[0]: (r[1], tuple(r[2:])) for r in conn.execute(
        sql.SQL("SELECT id, {md5}, {content} FROM {table} WHERE id = ANY(%s)").format(
            md5=table.md5, content=table.content, table=table.ident), (sorted(ids | set(owned)),))}
    inserts, updates, loaded, kept = [], [], [], []
    for row in rows:
        found = current.get(row.id)
        if found is None:
            inserts.append(row)
        elif found[1] == tuple(row)[1:]:
            loaded.append(row.id)  # already the data, whoever wrote it
        elif row.id in owned and (found[0] == owned[row.id] or restore):
            updates.append((row, found[0]))  # ours and unedited (the data changed), or a restore was asked for
        else:
            kept.append(row.id)  # a student's edit, or a student's row under a generated id
    gone = sorted(set(owned) - ids)
    stale = [i for i in gone if i in current and current[i][0] == owned[i]]
    kept += [i for i in gone if i in current and current[i][0] != owned[i]]
    changed = 0
    if inserts:  # DO NOTHING: a row a student inserted meanwhile stays theirs
        done = {r[0] for r in conn.execute(
            sql.SQL("INSERT INTO {table} ({columns}) SELECT * FROM unnest({arrays}) "
                    "ON CONFLICT (id) DO NOTHING RETURNING id").format(
                table=table.ident, columns=sql.SQL(", ").join(sql.Identifier(c) for c in table.columns),
                arrays=table.arrays), table.arrays_of(inserts)).fetchall()}
        loaded += [r.id for r in inserts if r.id in done]
        kept += [r.id for r in inserts if r.id not in done]
        changed += len(done)
    if updates:  # only rows still as they were read: an edit made meanwhile is kept
        assignments = sql.SQL(", ").join(sql.SQL("{} = {}").format(sql.Identifier(c), sql.Identifier(f"new_{c}"))
                                         for c in table.columns[1:])
        done = {r[0] for r in conn.execute(
            sql.SQL("UPDATE {table} SET {assignments} FROM unnest({arrays}, %(seen)s::text[]) AS d({aliases}, seen) "
                    "WHERE {table}.id = new_id AND {md5} = seen RETURNING {table}.id").format(
                table=table.ident, assignments=assignments, arrays=table.arrays, aliases=table.aliases,
                md5=table.md5), {**table.arrays_of([r for r, _ in updates]), "seen": [m for _, m in updates]}).fetchall()}
        loaded += [r.id for r, _ in updates if r.id in done]
        kept += [r.id for r, _ in updates if r.id not in done]
        changed += len(done)
    return loaded, changed, kept, stale


def _delete_stale(conn: psycopg.Connection[Any], table: _Table, stale: list[int], md5s: dict[int, str]) -> list[int]:
    """Delete the loader's unedited rows that left the data and nothing references; returns the ids deleted."""
    if not stale:
        return []
    unreferenced = sql.SQL(" ").join(
        sql.SQL("AND NOT EXISTS (SELECT 1 FROM {child} AS c WHERE c.{column} = t.id)").format(
            child=sql.Identifier(SCHEMA, child), column=sql.Identifier(column))
        for child, column in _REFERENCED_BY[table.name])
    return [r[0] for r in conn.execute(
        sql.SQL("DELETE FROM {table} AS t WHERE id = ANY(%s) AND {md5} = ANY(%s) {unreferenced} RETURNING id").format(
            table=table.ident, md5=sql.SQL("md5(row({})::text)").format(
                sql.SQL(", ").join(sql.Identifier("t", c) for c in table.columns[1:])), unreferenced=unreferenced),
        (stale, [md5s[i] for i in stale])).fetchall()]


def _record(conn: psycopg.Connection[Any], table: _Table, loaded: list[int], forgotten: list[int]) -> None:
    """The ownership list: the md5 of each loaded row as the table holds it; ids that left the data forgotten."""
    rows = sql.Identifier(ROWS_TABLE)
    if forgotten:
        conn.execute(sql.SQL("DELETE FROM {} WHERE table_name = %s AND id = ANY(%s)").format(rows),
                     (table.name, forgotten))
    if loaded:
        conn.execute(
            sql.SQL("INSERT INTO {rows} (table_name, id, row_md5) SELECT %s, id, {md5} FROM {table} WHERE id = ANY(%s) "
                    "ON CONFLICT (table_name, id) DO UPDATE SET row_md5 = EXCLUDED.row_md5 "
                    "WHERE {rows}.row_md5 IS DISTINCT FROM EXCLUDED.row_md5").format(
                rows=rows, md5=table.md5, table=table.ident), (table.name, loaded))


def _sync(conn: psycopg.Connection[Any], data: ShopData, restore: bool) -> tuple[int, dict[str, tuple[int, ...]]]:
    """Every row change of a load, inside the caller's transaction: parents first, stale rows children first."""
    tables = {name: _Table(name) for name in TABLES}
    changed = 0
    kept: dict[str, list[int]] = {}
    stale: dict[str, list[int]] = {}
    loaded: dict[str, list[int]] = {}
    owned_md5: dict[str, dict[int, str]] = {}
    for name, rows in zip(TABLES, data):
        owned_md5[name] = dict(conn.execute(
            sql.SQL("SELECT id, row_md5 FROM {} WHERE table_name = %s").format(sql.Identifier(ROWS_TABLE)),
            (name,)).fetchall())
        loaded[name], count, kept[name], stale[name] = _upsert(conn, tables[name], rows, owned_md5[name], restore)
        changed += count
    for name in reversed(TABLES):
        deleted = _delete_stale(conn, tables[name], stale[name], owned_md5[name])
        kept[name] += [i for i in stale[name] if i not in set(deleted)]  # still referenced: handed over
        changed += len(deleted)
        gone = set(owned_md5[name]) - {row.id for row in data[TABLES.index(name)]}
        _record(conn, tables[name], loaded[name], sorted(gone))
    return changed, {name: tuple(sorted(set(ids))) for name, ids in kept.items()}


def _table_locks(conn: psycopg.Connection[Any]) -> str:
    """Who holds locks on the shop's tables now (for the message when the load could not get one)."""
    rows = conn.execute(
        """
        SELECT DISTINCT l.pid, coalesce(a.application_name, ''), c.relname, l.mode
          FROM pg_locks AS l JOIN pg_class AS c ON c.oid = l.relation
          LEFT JOIN pg_stat_activity AS a ON a.pid = l.pid
         WHERE c.relnamespace = 'shop'::regnamespace AND l.granted AND l.pid <> pg_backend_pid()
         ORDER BY 1, 3
        """).fetchall()
    return "; ".join(f"pid {pid} ({app or 'no application_name'}) holds {mode} on shop.{table}"
                     for pid, app, table, mode in rows) or "a session that has just ended"


def ensure_shop(lab: Lab, data: ShopData | None = None, *, restore: bool = False,
                wait_seconds: float = LOCK_WAIT_SECONDS, lock_timeout: str = LOCK_TIMEOUT) -> ShopLoadReport:
    """Create schema ``shop`` and load the shop's rows into it, idempotently. Taught in 19_sql_agent.

    `data` defaults to the course's shop (``shop_data()``); it is validated completely first
    (``DataError`` naming the table and row). Students' rows are kept, see the module docstring.
    `wait_seconds` bounds the wait for another load (``SHOP_LOCK``), `lock_timeout` the wait for a
    table or row lock a student's open transaction holds; past either, ``LockBusy`` names the holder.
    """
    data = data if data is not None else shop_data()
    validate_shop(data)
    conn = lab.conn
    with advisory_lock(conn, SHOP_LOCK, wait_seconds):
        try:
            with conn.transaction():  # the schema and every row change, or nothing
                conn.execute("SELECT set_config('lock_timeout', %s, true)", (lock_timeout,))
                ensure_schema(conn)
                changed, kept = _sync(conn, data, restore)
                unanalyzed = {row[0] for row in conn.execute(
                    "SELECT relname FROM pg_stat_user_tables WHERE schemaname = %s "
                    "AND last_analyze IS NULL AND last_autoanalyze IS NULL", (SCHEMA,))}
                for name in TABLES:  # fresh statistics: the planner's, and the values the SQL agent is shown
                    if changed or name in unanalyzed:
                        conn.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(SCHEMA, name)))
        except psycopg.errors.LockNotAvailable:
            raise LockBusy(f"waited {lock_timeout} for a lock on the shop's tables: {_table_locks(conn)}. "
                           "Commit or roll back that session's transaction (or restart its kernel) and load again."
                           ) from None
        except psycopg.IntegrityError as err:  # a row the checks let through and the database did not
            raise DataError(f"the database refused the shop's data, nothing was loaded: {err.diag.message_primary}"
                            + (f" ({err.diag.message_detail})" if err.diag.message_detail else "")) from None
    return ShopLoadReport(rows={name: len(rows) for name, rows in zip(TABLES, data)}, changed=changed, kept=kept)
