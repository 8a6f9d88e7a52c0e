"""Command line of the lab: ``python -m labkit up|down|status|eval|ask|bench`` (taught in 01_corpus)."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

__all__ = ["main"]

# Sub-commands implemented elsewhere as `main(argv) -> int`, imported only when used.
DELEGATED = {
    "eval": ("labkit.evaluation", "compare search modes on labelled queries (recall@k, MRR, nDCG)"),
    "ask": ("labkit.ask", "ask the agent a question from the shell"),
    "bench": ("labkit.bench", "benchmark search at scale (exact vs HNSW)"),
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m labkit", description="Hybrid-search RAG lab: stack and tools.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    up = sub.add_parser("up", help="start the embedded Postgres and model server (reuses running ones)")
    up.add_argument("--db-only", action="store_true", help="start only Postgres (model side comes from OLLAMA_HOST)")
    sub.add_parser("down", help="stop the embedded services (data is kept)")
    sub.add_parser("status", help="print DATABASE_URL=... and OLLAMA_HOST=... lines; exit 1 if a service is down")
    for name, (_module, help_text) in DELEGATED.items():
        delegated = sub.add_parser(name, help=help_text, add_help=False)
        delegated.add_argument("args", nargs=argparse.REMAINDER)
    return parser


def _delegate(name: str, argv: list[str]) -> int:
    module_name = DELEGATED[name][0]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        if err.name != module_name:
            raise
        print(f"`{name}` is not available: module {module_name} is missing from this checkout.", file=sys.stderr)
        return 2
    return int(module.main(argv) or 0)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one sub-command and return its exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in DELEGATED:  # their own parsers see every argument, `--help` included
        return _delegate(argv[0], argv[1:])
    args = _parser().parse_args(argv)

    from . import stack

    try:
        if args.command == "down":
            stack.down()
            return 0
        if args.command == "up":
            stack.up(with_model=not args.db_only)
    except stack.StackError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    current = stack.status()
    needed_up = current.db.up if getattr(args, "db_only", False) else current.ok
    return 0 if needed_up else 1
