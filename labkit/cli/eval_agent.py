"""``eval-agent``: the whole agent on the labelled agent questions, tool choice and faithfulness (taught in 06_agent).

    ./run.sh eval-agent [--questions FILE.jsonl] [--split tune|report] [--model NAME] [--tools final|lesson] [--json]
    ./run.sh eval-agent --agent supervisor [--questions FILE.jsonl] [--split tune|report] [--model NAME] [--limit N] [--json]

Each question goes through the agent (a fresh thread each); the first tool call is judged
against the labels and the answer is checked against what the tools returned
(``labkit.agent.faithfulness``). Prints the share of right choices and of faithful answers, each
with a bootstrap 95 % interval, and the seconds per question.

``--agent supervisor`` runs the shop's supervisor on its own labelled questions instead
(``labkit.evaluation.supervisor_eval``: routing, SQL execution accuracy, cited documents, faithfulness,
hostile requests, seconds); the default, the course's news agent, prints what it always printed.
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
    parser.add_argument("--agent", choices=["course", "supervisor"], default="course",
                        help="course: the news agent (default); supervisor: the shop's supervisor on its questions")
    parser.add_argument("--limit", type=int, help="supervisor: only the first N questions (after --split)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Evaluate, then print the summary (or JSON with every row)."""
    if args.agent == "supervisor":
        return run_supervisor(args)
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


def run_supervisor(args: argparse.Namespace) -> int:
    """The supervisor on its labelled questions: a table of rows and rates, or JSON ``{agent, model, split, summary, questions}``."""
    from labkit.agent.supervisor import Supervisor
    from labkit.core.corpora.kb import KB
    from labkit.evaluation.supervisor_eval import evaluate_supervisor, lab_secrets, summarise_supervisor
    from labkit.evaluation.supervisor_questions import load_supervisor_questions

    questions = load_supervisor_questions(args.questions, split=args.split)  # a bad file fails before services
    if args.limit is not None:
        if args.limit < 1:
            args.parser.error(f"--limit must be at least 1, got {args.limit}")
        questions = questions[: args.limit]
    with setup(quiet=True, corpus=KB) as kb:
        supervisor = Supervisor(kb, chat_model=args.model, kb_lab=kb)
        try:
            rows = evaluate_supervisor(supervisor.ask, questions, reader=supervisor.data.reader, counter=kb.conn,
                                       secrets=lab_secrets(kb.settings.database_url))
        finally:
            supervisor.close()
    summary = summarise_supervisor(rows)
    if args.json:
        print(json.dumps({"agent": "supervisor", "model": supervisor.model, "split": args.split or "all",
                          "summary": summary, "questions": rows.to_dict(orient="records")}, ensure_ascii=False,
                         default=str))
        return 0
    print(rows[["kind", "routed", "route", "route_ok", "sql_ok", "doc_hit", "faithful", "safe", "seconds"]].to_string())

    def line(name: str, key: str) -> str:
        rate = summary[key]
        return f"{name} {rate['mean']:.0%} [{rate['low']:.0%}, {rate['high']:.0%}] of {rate['n']}" if rate else f"{name} —"

    print(f"\n{supervisor.model}, {len(rows)} questions ({args.split or 'all'}): "
          + "; ".join([line("routing", "routing"), line("SQL right on data questions", "sql_data"),
                       line("SQL right on both", "sql_both"), line("a relevant document cited", "doc_hit"),
                       line("faithful", "faithful"), line("hostile safe", "hostile_safe")])
          + f"; {summary['seconds_per_question']} s per question.")
    return 0
