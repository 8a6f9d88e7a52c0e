"""Command line of the lab: ``python -m labkit up|down|status|eval|expand|ask|bench|bench-rerank|bench-chunks|ship-vectors|grade|collect|site`` (01_corpus).

One argparse program; each sub-command lives in its own module with ``register`` (its
parser) and ``run`` (returns the exit code). One error policy for all of them: a user
error (a service down, bad data, a model that refuses) is ONE line on stderr and exit
code 1; bad arguments are one line and exit code 2; never a traceback for either.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import NoReturn

import httpx
import ollama
import psycopg

from labkit.cli import (
    ask,
    bench,
    bench_chunks,
    bench_rerank,
    collect,
    eval_agent,
    evaluate,
    expand,
    grade,
    ship_vectors,
    site,
    stack,
)
from labkit.core.corpus import DataError
from labkit.core.errors import LabError

__all__ = ["main", "build_parser", "USER_ERRORS"]

# What a service or the user's input can cause; anything else is a bug and keeps its traceback.
USER_ERRORS: tuple[type[BaseException], ...] = (
    LabError, LookupError, OSError, psycopg.Error, httpx.HTTPError, ollama.ResponseError,
)


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line: ``labkit eval: error: ...`` and exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def build_parser() -> Parser:
    """The whole command line: one sub-parser per command module."""
    parser = Parser(prog="labkit", description="Hybrid-search RAG lab: the stack and its tools.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=Parser)
    for module in (stack, evaluate, expand, ask, eval_agent, bench, bench_rerank, bench_chunks, ship_vectors, grade, collect,
                   site):
        module.register(sub)
    for name, command in sub.choices.items():  # each command reports its own argument errors
        command.set_defaults(parser=command, command=name)
    return parser


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if isinstance(exc, LabError) else f"{type(exc).__name__}: {text}"


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command and return its exit code."""
    args, unknown = build_parser().parse_known_args(list(sys.argv[1:] if argv is None else argv))
    if unknown:
        args.parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    try:
        return int(args.run(args) or 0)
    except DataError as exc:  # a malformed input file is the user's argument
        print(f"labkit {args.command}: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except USER_ERRORS as exc:
        print(f"labkit {args.command}: error: {_one_line(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"labkit {args.command}: interrupted", file=sys.stderr)
        return 130
