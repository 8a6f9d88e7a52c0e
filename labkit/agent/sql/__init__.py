"""The SQL agent: the model writes one SELECT per step from the shop's schema, a read-only role runs it (19_sql_agent)."""
