"""Postgres of a test's own: a private embedded cluster, or a scratch database on the lab's server.

A private cluster in a fresh lab home is for tests that change cluster-wide things (roles, grants):
class-mode tests make roles and revoke PUBLIC's access to databases, so they get a cluster of their
own, stopped and deleted afterwards. A scratch database is for tests that load or edit a corpus
without touching the lab's own `lab` database (``labkit.store.scratch.scratch_database``, re-exported here).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from labkit.services import pgembedded
from labkit.store.scratch import scratch_database

__all__ = ["scratch_database", "PrivatePostgres", "private_postgres"]


@dataclass(frozen=True)
class PrivatePostgres:
    """A running private cluster: its lab home and the superuser's URL of its `lab` database."""

    home: Path
    admin_url: str
    port: int


@contextlib.contextmanager
def private_postgres() -> Iterator[PrivatePostgres]:
    """Start an embedded Postgres in a new lab home (as root: under /var/lib, where its system user can reach it)."""
    as_root = hasattr(os, "geteuid") and os.geteuid() == 0
    parent = Path(tempfile.mkdtemp(prefix="labkit-class-", dir="/var/lib" if as_root else None))
    parent.chmod(0o755)
    home = parent / "home"
    try:
        instance, _ = pgembedded.start(home, pgembedded.free_port())
        yield PrivatePostgres(home, pgembedded.database_url(home, instance.port, "lab"), instance.port)
    finally:
        with contextlib.suppress(Exception):
            pgembedded.stop(home)
        shutil.rmtree(parent, ignore_errors=True)
