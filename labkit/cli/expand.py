"""``expand``: the search questions of every document, for the expanded search modes (taught in 11_beyond_rrf).

    ./run.sh expand [--corpus news] [--no-generate] [--json]

Loads the questions the corpus ships for its default chat model (no chat call), then asks the
lab's chat model for the documents still without questions (minutes on 2 cores; a re-run asks
nothing). Until this has run, ``eval`` reports the expanded modes as unavailable.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from labkit.core.corpora import CORPORA, DEFAULT_CORPUS, corpus_named
from labkit.retrieval.questions import ensure_expansion
from labkit.services.setup import setup

__all__ = ["register", "run"]


def register(sub: Any) -> None:
    """Add the ``expand`` command to the sub-parsers `sub`."""
    parser = sub.add_parser("expand", help="write the search questions the expanded modes read (once per document)",
                            description="Give every document its search questions: the corpus' shipped ones, "
                                        "then the chat model's for the rest.")
    parser.add_argument("--corpus", choices=list(CORPORA), default=DEFAULT_CORPUS.name,
                        help=f"the corpus whose documents to expand (default {DEFAULT_CORPUS.name})")
    parser.add_argument("--no-generate", dest="generate", action="store_false",
                        help="only load the shipped questions; never call the chat model")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Expand the corpus' documents and print what was done; 1 when documents are left without questions."""
    with setup(quiet=True, corpus=corpus_named(args.corpus)) as lab:
        report = ensure_expansion(lab, generate=args.generate)
        model = lab.chat_model
    if args.json:
        print(json.dumps({"chat_model": model, **report._asdict()}, ensure_ascii=False, indent=2))
    else:
        print(f"{report.documents} documents, chat model {model}: {report.shipped} took the shipped questions, "
              f"{report.generated} asked the chat model now ({report.seconds:.0f} s, {report.empty} without usable "
              f"questions), {report.reused - report.shipped} had them already, {report.missing} left without.")
    return 1 if report.missing else 0
