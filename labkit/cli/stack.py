"""``up``, ``down`` and ``status``: manage the lab's two services (taught in 01_corpus)."""

from __future__ import annotations

import argparse
from typing import Any

from labkit.services import stack

__all__ = ["register"]


def register(sub: Any) -> None:
    """Add the three stack commands to the sub-parsers `sub`."""
    up = sub.add_parser("up", help="start the embedded Postgres and model server (reuses running ones)")
    up.add_argument("--db-only", action="store_true", help="start only Postgres (model side comes from OLLAMA_HOST)")
    up.set_defaults(run=run_up)
    sub.add_parser("down", help="stop the embedded services (data is kept)").set_defaults(run=run_down)
    sub.add_parser(
        "status", help="print DATABASE_URL=... and OLLAMA_HOST=... lines; exit 1 if a service is down"
    ).set_defaults(run=run_status)


def run_up(args: argparse.Namespace) -> int:
    """Start what is down, then print the status; 0 when the needed services answer."""
    stack.up(with_model=not args.db_only)
    current = stack.status()
    return 0 if (current.db.up if args.db_only else current.ok) else 1


def run_down(args: argparse.Namespace) -> int:
    """Stop the embedded services."""
    stack.down()
    return 0


def run_status(args: argparse.Namespace) -> int:
    """Print the status lines; 1 when a service is down."""
    return 0 if stack.status().ok else 1
