"""The shop of «ТехноМир» as data: its catalogue, generated orders and returns, and their checks (19_sql_agent)."""
