"""Shared fixtures: the real embedded stack, started once per test session."""

from __future__ import annotations

import pytest

import labkit as lk


@pytest.fixture(scope="session")
def settings() -> lk.Settings:
    """The running stack (started by `labkit.stack.ensure_stack` when nothing answers)."""
    return lk.ensure_stack()


@pytest.fixture()
def conn(settings):
    """A fresh autocommit connection to the lab database with the corpus loaded."""
    connection = lk.connect(settings)
    lk.ensure_corpus(connection, settings)
    try:
        yield connection
    finally:
        connection.close()
