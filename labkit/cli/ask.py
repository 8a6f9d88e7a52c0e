"""``ask``: one question to the agent from the shell (taught in 06_agent).

    ./run.sh ask "QUESTION" [--model NAME] [--tools final|lesson] [--json] [--thread ID]

By default the course's final agent answers: three tools (search_articles, get_metrics and
exercise 09's search_by_entity); ``--tools lesson`` gives 06_agent's agent with two.

The JSON object (``tool_calls``, ``answer``, ``requires_human``, ``cited_ids``, ...) is a public
contract: extend it, never break it. The text form lists the news the answer cites under it. A model the server does not have, or a model server
that fails during the answer, is an error (one line on stderr, exit code 1), not an answer.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from labkit.agent.entity_tool import FINAL_SYSTEM, FINAL_TOOLS
from labkit.agent.faithfulness import result_items
from labkit.agent.graph import Agent
from labkit.agent.planner import SYSTEM_PROMPT
from labkit.agent.tools import DEFAULT_TOOLS
from labkit.core.errors import LabError
from labkit.models.availability import check_models
from labkit.services.setup import PROBE_TIMEOUT, model_client, setup

AGENTS = {"final": (FINAL_TOOLS, FINAL_SYSTEM), "lesson": (DEFAULT_TOOLS, SYSTEM_PROMPT)}

__all__ = ["register", "run", "AgentFailed"]


class AgentFailed(LabError):
    """The model server failed while the agent answered, or the model cannot take tools."""


def register(sub: Any) -> None:
    """Add the ``ask`` command to the sub-parsers `sub`."""
    parser = sub.add_parser("ask", help="ask the agent a question from the shell",
                            description="Ask the lab's LangGraph agent one question.")
    parser.add_argument("question", help="the question, in quotes")
    parser.add_argument("--model", help="chat model (default: CHAT_MODEL of the settings)")
    parser.add_argument("--tools", choices=list(AGENTS), default="final",
                        help="final: the course's agent with search_by_entity (default); lesson: 06_agent's two tools")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    parser.add_argument("--thread", help="thread id: continue a saved conversation (new one if omitted)")
    parser.add_argument("--agent", choices=["course", "supervisor"], default="course",
                        help="course: the course's agent over articles (default); supervisor: routes to the knowledge base "
                             "and the shop's SQL agent (issue 23)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Ask, then print the answer and the tool calls (or JSON)."""
    if not args.question.strip():
        args.parser.error("the question is empty")
    if getattr(args, "agent", "course") == "supervisor":
        return run_supervisor(args)
    with setup(quiet=True) as lab:
        if args.model:  # before any question: a typo is one line naming the models there are
            check_models(model_client(lab.settings.ollama_host, PROBE_TIMEOUT), lab.settings,
                         [("--model", args.model, "tools")])
        tools, system = AGENTS[args.tools]
        agent = Agent(lab, model=args.model, tools=tools, system=system)
        try:
            result = agent.ask(args.question, thread_id=args.thread)
        finally:
            agent.close()
    if result.model_error:
        raise AgentFailed(f"model {agent.model} did not answer: {result.model_error} (thread {result.thread_id})")
    if args.json:
        print(json.dumps(result.to_dict(), ensure_ascii=False, default=str))
        return 0
    calls = "; ".join(f"{c['name']}({json.dumps(c['arguments'], ensure_ascii=False)})" for c in result.tool_calls)
    print("Вопрос:", result.question)
    print("Вызовы:", calls or "инструмент не вызывали")
    print("Ответ:", result.answer)
    news = result_items(result.sources)
    for doc_id in result.cited:
        print(f"  [{doc_id}] {news.get(doc_id, '(не из найденного)')}")
    if result.requires_human:
        print("Нужен человек: агент не смог ответить по данным.")
    print(f"Поток: {result.thread_id} ({result.seconds:.1f} с)")
    return 0


def run_supervisor(args: argparse.Namespace) -> int:
    """The supervisor over the knowledge base and the shop: JSON adds route and SQL tool calls."""
    from labkit.agent.supervisor import Supervisor
    from labkit.core.corpora.kb import KB

    with setup(quiet=True, corpus=KB) as kb:
        supervisor = Supervisor(kb, chat_model=args.model, kb_lab=kb)
        try:
            result = supervisor.ask(args.question, thread_id=args.thread)
        finally:
            supervisor.close()
    if args.json:
        print(json.dumps(result.to_dict(), ensure_ascii=False, default=str))
        return 0
    print("Вопрос:", result.question)
    print("Маршрут:", " → ".join(result.route) or "без инструментов", f"({result.kind})")
    for call in result.tool_calls:
        print(f"  {call['agent']}: {call['sql'] or call['arguments']}")
    print("Ответ:", result.answer)
    for doc_id, section in result.citations:
        print(f"  [{doc_id}] {section}")
    if result.requires_human:
        print("Нужен человек: агент не смог ответить по данным.")
    print(f"Поток: {result.thread_id} ({result.seconds:.1f} с)")
    return 0
