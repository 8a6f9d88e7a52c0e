"""The shop's schema in Postgres: its tables with Russian comments, the idempotent load, the read-only role (19_sql_agent)."""
