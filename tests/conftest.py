"""Shared fixtures: the real embedded stack for tests marked ``services``; nothing for the rest.

A test that needs Postgres or the model server says so with ``@pytest.mark.services`` (or a
module-level ``pytestmark``). Every other test runs with service discovery and connections
blocked, so ``pytest -m "not services"`` proves which logic is testable without any service.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

import labkit as lk
import labkit.services.setup
import labkit.services.stack


class ServiceUsed(AssertionError):
    """A test without the `services` marker tried to reach a service."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked ``after_notebooks`` run last: they read what the notebook runs wrote (build/executed/)."""
    items.sort(key=lambda item: item.get_closest_marker("after_notebooks") is not None)  # stable: order kept


@pytest.fixture(autouse=True)
def _services_only_when_marked(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if request.node.get_closest_marker("services"):
        return

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise ServiceUsed(f"{request.node.nodeid} reaches a service but is not marked @pytest.mark.services")

    for target, name in [(labkit.services.stack, "ensure_stack"), (labkit.services.stack, "up"), (labkit.services.setup, "ensure_stack"),
                         (psycopg, "connect"), (psycopg.Connection, "connect")]:
        monkeypatch.setattr(target, name, refuse)


@pytest.fixture(scope="session")
def settings() -> lk.Settings:
    """The running stack's settings (started by `labkit.services.stack.ensure_stack` when nothing answers)."""
    return lk.ensure_stack()


@pytest.fixture()
def lab(settings: lk.Settings) -> Iterator[lk.Lab]:
    """A fresh lab context (own connection, corpus loaded) on the running stack."""
    with lk.open_lab(settings) as context:
        yield context


@pytest.fixture()
def conn(lab: lk.Lab) -> psycopg.Connection:
    """The lab's connection, for tests that run SQL directly."""
    return lab.conn
