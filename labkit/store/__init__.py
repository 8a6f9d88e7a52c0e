"""Postgres: the connection, locks, schema, loading a corpus, cached embeddings and vector tables."""
