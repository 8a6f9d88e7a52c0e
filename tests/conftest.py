"""Shared fixtures and the three test tiers.

Tiers, by marker (registered in pyproject.toml):

* **unit**: neither marker. Runs with service discovery and connections blocked, so
  ``pytest -m "not services and not system"`` (``./run.sh test --quick``) proves which logic is
  testable without any service.
* **integration**: ``@pytest.mark.services`` (or a module-level ``pytestmark``): needs the running
  stack, real Postgres and the model server. ``-m "services and not system"``.
* **system**: ``@pytest.mark.system``: executes notebooks, drives a browser or JupyterHub, or kills
  services (chaos). ``-m system``; most are marked ``services`` too.

Tests run tier by tier (unit, then integration, then system), so a quick failure shows first;
nothing depends on that order. Within a tier, the tests that wait for a background pool's notebook
(``BACKGROUND_RUNS``) come after the rest: the foreign stack's runs, started by its guard test, go on while the grading
runs, the hub and the widget notebooks (which mostly wait on processes) take their turn. The tests marked
``disruptive`` (they kill the lab's model server or Postgres) come last: a model server started anew has lost the
prompts it had read, so a long system prompt read before the kill (the SQL agent's: 2,500 tokens, 40 s on 2 cores)
would be read again by every test after it. A test marked ``after_course`` asks what a lesson asks and takes its
turn in the system tier, after the course's notebooks (``runs_in``): the model server's prompt cache then serves it.
The end of a run prints the time spent per tier.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import psycopg
import pytest
from nbrun import EXECUTED, Runs, executions

import labkit as lk
import labkit.services.setup
import labkit.services.stack

TIERS = ("unit", "integration", "system")


class ServiceUsed(AssertionError):
    """A test without the `services` marker tried to reach a service."""


def tier(keywords: Mapping[str, object]) -> str:
    """The tier of a test, from its item's or report's keywords (its markers' names among them)."""
    if "system" in keywords:
        return "system"
    return "integration" if "services" in keywords else "unit"


# Fixtures whose notebook runs go on in the background once started (tests/test_foreign_stack.py): the tests that
# wait for their results come after the rest of their tier (only the ``disruptive`` ones follow), so every test
# between the runs' start and them runs meanwhile.
BACKGROUND_RUNS = ("foreign_runs",)


def waits_in_background(item: pytest.Item) -> bool:
    """Does `item` wait for one notebook of a background pool (``BACKGROUND_RUNS``)?"""
    callspec = getattr(item, "callspec", None)
    return (callspec is not None and "path" in callspec.params
            and any(name in getattr(item, "fixturenames", ()) for name in BACKGROUND_RUNS))


def phase(item: pytest.Item) -> int:
    """`item`'s place in its tier: 0 the rest, 1 waits for a background pool's notebook, 2 kills a shared service."""
    if item.get_closest_marker("disruptive") is not None:
        return 2
    return 1 if waits_in_background(item) else 0


def runs_in(item: pytest.Item) -> str:
    """The tier whose turn `item` runs in: its own, but the system tier for a test marked ``after_course``.

    Such a test asks what a lesson asks. The system tier's first files run the course's notebooks (test_browser.py's
    site, test_notebooks.py), so the model server has read the lesson's prompts when the test asks the same: its
    prompt cache serves them instead of a second cold read. Its time still counts as its own tier's.
    """
    return "system" if item.get_closest_marker("after_course") is not None else tier(item.keywords)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Unit tests first, then integration, then system; within a tier by ``phase`` (stable: the order is kept otherwise)."""
    items.sort(key=lambda item: (TIERS.index(runs_in(item)), phase(item)))


_seconds: dict[str, float] = dict.fromkeys(TIERS, 0.0)
_counts: dict[str, int] = dict.fromkeys(TIERS, 0)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Add the phase's duration (setup, call, teardown: fixtures included) to its test's tier."""
    name = tier(report.keywords)
    _seconds[name] += report.duration
    if report.when == "setup":
        _counts[name] += 1


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    ran = [name for name in TIERS if _counts[name]]
    if ran:
        terminalreporter.write_sep("-", "time per tier (test durations, setup and teardown included)")
        terminalreporter.write_line(", ".join(f"{name} {_seconds[name]:.0f} s ({_counts[name]} tests)" for name in ran))


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
    """A fresh lab context (own connection, corpus loaded) on the running stack, for a test that writes."""
    with lk.open_lab(settings) as context:
        yield context


@pytest.fixture()
def conn(lab: lk.Lab) -> psycopg.Connection:
    """The lab's connection, for tests that run SQL directly."""
    return lab.conn


@pytest.fixture(scope="module")
def lab_ro(settings: lk.Settings) -> Iterator[lk.Lab]:
    """One lab context per test module (models checked, connected, corpus loaded once), for tests that only read.

    A test that changes the database or the session (loads, inserts, even in a rolled-back
    transaction, sets search_path, closes the connection) takes the function-scoped `lab`.
    """
    with lk.open_lab(settings) as context:
        yield context


@pytest.fixture(scope="module")
def conn_ro(lab_ro: lk.Lab) -> psycopg.Connection:
    """`lab_ro`'s connection, for read-only tests that run SQL directly."""
    return lab_ro.conn


@pytest.fixture(scope="session")
def expansion(settings: lk.Settings) -> lk.ExpansionReport:
    """The questions the course ships for its default chat model, loaded (no chat call): every search mode can run.

    A test that compares all modes asks for it; without it the expanded modes are reported unavailable.
    """
    with lk.open_lab(settings) as context:
        return lk.ensure_expansion(context, generate=False)


@pytest.fixture(scope="session")
def executed_notebooks(request: pytest.FixtureRequest, settings: lk.Settings) -> Iterator[Runs]:
    """Every notebook executed at most once per session, with its CI parameters, into build/executed/.

    One test per notebook (tests/test_notebooks.py::test_notebook_executes) reports each run; the
    exercise checks, the course site and the browser read the same copies. The notebooks of the
    selected per-notebook tests start at the first request, two at a time (`nbrun.Runs`); any other
    notebook runs when a test first needs it: ``result(path)`` for one (the executed notebook, or
    that run's failure), ``complete()`` for the whole course (build/executed/ once all have run).
    So `pytest tests/test_checks.py` executes only the exercise notebooks it reads.
    """
    with executions(request, "executed_notebooks", EXECUTED) as runs:
        yield runs
