"""What the SQL agent knows of the database: the tables it may read, described from the catalog (19_sql_agent).

The description is read through the reader's own connection, so it lists exactly what the role
can see (``has_table_privilege``), and it is written as ``CREATE TABLE`` text with each column's
comment beside it: the form a code model has read most of. A text column with few distinct values
also lists them, read from the planner's statistics (``pg_stats``, filled by ANALYZE): a model that
sees 'Смартфон ТехноФон X2' writes that, not 'ТехноФон X2', which matches no row. Nothing is typed by
hand: a column added to the shop, or a comment changed, reaches the prompt on the next agent.
"""

from __future__ import annotations

from typing import Any

import psycopg

__all__ = ["describe_schema", "known_values", "column_values", "table_columns", "VALUES_UP_TO"]

VALUES_UP_TO = 20  # a text column with at most this many distinct values has them listed in the description
# The relations of a schema (bound as the first parameter) that the connection's role may read.
_READABLE = """c.relnamespace = %s::regnamespace AND c.relkind IN ('r', 'v', 'm', 'p')
           AND has_table_privilege(c.oid, 'SELECT')"""


def known_values(conn: psycopg.Connection[Any], schema: str, up_to: int) -> dict[tuple[str, str], list[str]]:
    """(table, column) -> every value of a text column with at most `up_to` distinct ones, from pg_stats."""
    rows = conn.execute(
        """
        SELECT s.tablename, s.attname, s.n_distinct, c.reltuples,
               s.most_common_vals::text::text[], s.histogram_bounds::text::text[]
          FROM pg_stats AS s
          JOIN pg_class AS c ON c.relname = s.tablename AND c.relnamespace = s.schemaname::regnamespace
          JOIN pg_attribute AS a ON a.attrelid = c.oid AND a.attname = s.attname
         WHERE s.schemaname = %s AND a.atttypid = 'text'::regtype
        """, (schema,)).fetchall()
    known = {}
    for table, column, n_distinct, tuples, common, bounds in rows:
        distinct = n_distinct if n_distinct > 0 else -n_distinct * max(tuples, 0)
        values = sorted(set(common or []) | set(bounds or []))
        if 0 < distinct <= up_to and len(values) >= round(distinct):  # the statistics hold every value
            known[(table, column)] = values
    return known


def describe_schema(conn: psycopg.Connection[Any], schema: str = "shop", values_up_to: int = VALUES_UP_TO) -> str:
    """The tables of `schema` that the connection's role may SELECT from, as commented DDL. Taught in 19_sql_agent.

    Text columns with at most `values_up_to` distinct values list them after the comment, unless the
    comment already names them all (0: list none).
    """
    known = known_values(conn, schema, values_up_to) if values_up_to else {}
    tables = conn.execute(
        """
        SELECT c.oid, c.relname, obj_description(c.oid, 'pg_class')
          FROM pg_class AS c
         WHERE """ + _READABLE + """
         ORDER BY c.oid
        """, (schema,)).fetchall()
    blocks = []
    for oid, name, comment in tables:
        columns = conn.execute(
            """
            SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull, col_description(a.attrelid, a.attnum),
                   (SELECT string_agg(CASE con.contype WHEN 'p' THEN ' PRIMARY KEY'
                                      ELSE format(' REFERENCES %%s(%%s)', rel.relname, ref.attname) END, '')
                      FROM pg_constraint AS con
                      LEFT JOIN pg_class AS rel ON rel.oid = con.confrelid
                      LEFT JOIN pg_attribute AS ref ON ref.attrelid = con.confrelid AND ref.attnum = con.confkey[1]
                     WHERE con.conrelid = a.attrelid AND con.conkey = ARRAY[a.attnum] AND con.contype IN ('p', 'f'))
              FROM pg_attribute AS a
             WHERE a.attrelid = %s AND a.attnum > 0 AND NOT a.attisdropped
             ORDER BY a.attnum
            """, (oid,)).fetchall()
        lines = []
        for column, sql_type, not_null, note, keys in columns:
            values = known.get((name, column), [])
            literals = ["'" + v.replace("'", "''") + "'" for v in values]
            if literals and not all(literal in (note or "") for literal in literals):
                note = (f"{note}. " if note else "") + "Значения: " + ", ".join(literals)
            lines.append(f"  {column} {sql_type}{keys or ''}{' NOT NULL' if not_null and not keys else ''},"
                         + (f" -- {note}" if note else ""))
        if lines:  # no comma after the last column: the comment follows the text
            last = lines[-1]
            head, sep, note = last.partition(", --")
            lines[-1] = f"{head} --{note}" if sep else last.rstrip(",")
        header = f"-- {comment}\n" if comment else ""
        blocks.append(f"{header}CREATE TABLE {name} (\n" + "\n".join(lines) + "\n);")
    return "\n\n".join(blocks)


def column_values(conn: psycopg.Connection[Any], schema: str = "shop", up_to: int = VALUES_UP_TO) -> dict[str, set[str]]:
    """Column name -> every value it holds, for the text columns of `schema` with at most `up_to` distinct values
    (what ``labkit.agent.sql.hints.unknown_values`` checks a query's literals against).

    A name in two tables (``status`` of orders and of returns) gets the values of both: a literal is
    refused only when no table's column of that name holds it.
    """
    values: dict[str, set[str]] = {}
    for (_, column), listed in known_values(conn, schema, up_to).items():
        values.setdefault(column, set()).update(listed)
    return values


def table_columns(conn: psycopg.Connection[Any], schema: str = "shop") -> dict[str, list[str]]:
    """Column name -> the tables of `schema` that have it (the ones the connection's role may read): where
    ``labkit.agent.sql.hints.column_hint`` sends a column Postgres did not find."""
    rows = conn.execute(
        """
        SELECT a.attname, c.relname
          FROM pg_attribute AS a JOIN pg_class AS c ON c.oid = a.attrelid
         WHERE """ + _READABLE + """ AND a.attnum > 0 AND NOT a.attisdropped
         ORDER BY c.oid, a.attnum
        """, (schema,)).fetchall()
    tables: dict[str, list[str]] = {}
    for column, table in rows:
        tables.setdefault(column, []).append(table)
    return tables
