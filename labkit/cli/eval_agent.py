"""``eval-agent``: the whole agent on the labelled agent questions, tool choice and faithfulness (taught in 06_agent).

    ./run.sh eval-agent [--questions FILE.jsonl] [--split tune|report] [--model NAME] [--tools final|lesson] [--json]

Each question goes through the agent (a fresh thread each); the first tool call is judged
against the labels and the answer is checked against what the tools returned
(``labkit.agent.faithfulness``). Prints the share of right choices and of faithful answers, each
with a bootstrap 95 % interval, and the seconds per question.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from labkit.agent.graph import Agent
from labkit.cli.ask import AGENTS
from labkit.core.corpus import SPLITS
from labkit.evaluation.significance import bootstrap_ci
from labkit.evaluation.tool_choice import evaluate_agent, load_agent_questions
from labkit.services.setup import setup

__all__ = ["register", "run"]


def register(sub: Any) -> None:
    """Add the ``eval-agent`` command to the sub-parsers `sub`."""
    parser = sub.add_parser("eval-agent", help="the agent on the labelled questions: tool choice and faithful answers",
                            description="Run the agent on every labelled agent question and score it.")
    parser.add_argument("--questions", metavar="FILE.jsonl", help="labelled questions (default: the lab's set)")
    parser.add_argument("--split", choices=list(SPLITS), help="only this part of the questions (default: all)")
    parser.add_argument("--model", help="chat model (default: CHAT_MODEL of the settings)")
    parser.add_argument("--tools", choices=list(AGENTS), default="final", help="final (default) or lesson")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Evaluate, then print the summary (or JSON with every row)."""
    tools, system = AGENTS[args.tools]
    questions = load_agent_questions(args.questions, tools=tools, split=args.split)  # bad files fail before services
    if not questions:
        args.parser.error("no questions to ask (check --questions, --split and --tools)")
    with setup(quiet=True) as lab:
        agent = Agent(lab, model=args.model, tools=tools, system=system)
        try:
            rows = evaluate_agent(agent, questions)
        finally:
            agent.close()
    correct = bootstrap_ci(rows["correct"].astype(float))
    judged = rows["faithful"].dropna().astype(float)
    faithful = bootstrap_ci(judged) if len(judged) else None
    summary = {"model": agent.model, "tools": args.tools, "split": args.split or "all", "questions": len(rows),
               "correct": correct._asdict(), "answers_with_data": len(judged),
               "faithful": faithful._asdict() if faithful else None,
               "seconds_per_question": round(float(rows["seconds"].mean()), 2)}
    if args.json:
        print(json.dumps({**summary, "rows": rows.to_dict(orient="records")}, ensure_ascii=False, default=str))
        return 0
    print(rows[["question", "expected", "tool", "arguments", "correct", "faithful"]].to_string())
    print(f"\n{agent.model} ({args.tools}), {len(rows)} questions ({summary['split']}): "
          f"right tool and arguments {correct.mean:.0%} [{correct.low:.0%}, {correct.high:.0%}]; "
          + (f"faithful {faithful.mean:.0%} [{faithful.low:.0%}, {faithful.high:.0%}] of {len(judged)} answers with data; "
             if faithful else "no answer with data; ")
          + f"{summary['seconds_per_question']} s per question.")
    return 0
