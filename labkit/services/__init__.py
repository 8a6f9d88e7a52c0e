"""The edge: starting and finding services (embedded Postgres, the model server), the lab home, setup()."""
