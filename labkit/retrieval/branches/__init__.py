"""Branches: each ranks a corpus' documents by one signal (words, vectors, BM25, latent terms, ...)."""
