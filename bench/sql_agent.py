"""SQL execution accuracy of the shop's SQL agent with each local chat model, on the labelled data questions.

    .venv/bin/python bench/sql_agent.py [--split tune|report] [--models NAME ...] [--limit N] [--json FILE]

Every data question of ``labkit/data/shop/questions.jsonl`` (or one split of them) goes through the SQL
agent (``labkit.agent.sql.graph.SqlAgent``) with each chat model; its result is compared with the gold
query's result (``labkit.evaluation.sql_accuracy``). Prints, per model and split: execution accuracy with a
bootstrap 95 % interval, seconds per question, how many answers were right only after a corrected query,
how many runs ended with ``requires_human``; then every miss with its SQL. Figures are printed, nothing is
asserted. Postgres and the model server are the lab's (``./run.sh up``).
"""

from __future__ import annotations

import argparse
import json
import sys

import pandas as pd

import labkit as lk
from labkit.agent.sql.graph import SqlAgent
from labkit.evaluation.sql_accuracy import evaluate_sql_agent, load_sql_questions, sql_accuracy
from labkit.store.shop.loading import ensure_shop


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=list(lk.SPLITS), help="only this half of the questions (default: both)")
    parser.add_argument("--models", nargs="+", help="chat models (default: CHAT_MODEL and ALT_CHAT_MODEL)")
    parser.add_argument("--limit", type=int, help="only the first N questions of each split")
    parser.add_argument("--json", metavar="FILE", help="also write every row as JSON Lines")
    args = parser.parse_args()
    questions = load_sql_questions(split=args.split)
    if args.limit:
        questions = [q for split in lk.SPLITS for q in [q for q in questions if q.split == split][: args.limit]]
    frames = []
    with lk.setup(quiet=True, load=False) as lab:
        ensure_shop(lab)
        models = args.models or [lab.settings.chat_model, lab.settings.alt_chat_model]
        for model in models:
            with SqlAgent(lab, model=model) as agent:
                frame = evaluate_sql_agent(agent, questions)
            frame.insert(0, "model", model)
            frames.append(frame)
            for split, part in frame.groupby("split", sort=False):
                s = sql_accuracy(part)
                print(f"{model} {split}: {s.accuracy.mean:.0%} [{s.accuracy.low:.0%}, {s.accuracy.high:.0%}] of "
                      f"{s.questions}, {s.seconds_per_question:.1f} s per question, right after a corrected query "
                      f"{s.corrected}, handed to a human {s.handed_over}", flush=True)
    rows = pd.concat(frames, ignore_index=True)
    misses = rows[~rows["correct"]]
    with pd.option_context("display.max_colwidth", 110, "display.width", 250):
        print("\nmisses:\n" + misses[["model", "id", "errors", "sql", "first_error"]].to_string())
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            for record in rows.to_dict(orient="records"):
                out.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
