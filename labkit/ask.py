"""``./run.sh ask "QUESTION" [--model NAME] [--json] [--thread ID]``: one question to the agent (taught in 06_agent)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ask", description="Ask the lab's LangGraph agent one question.")
    parser.add_argument("question", help="the question, in quotes")
    parser.add_argument("--model", help="chat model (default: CHAT_MODEL of the settings)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    parser.add_argument("--thread", help="thread id: continue a saved conversation (new one if omitted)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the agent on one question; print the answer and the tool calls (or JSON). Returns the exit code."""
    args = _parser().parse_args(argv)
    if not args.question.strip():
        print("ask: the question is empty", file=sys.stderr)
        return 2
    from .agent import Agent
    from .db import ensure_corpus
    from .stack import StackError, ensure_stack

    try:
        settings = ensure_stack()
        agent = Agent(settings, model=args.model)
        ensure_corpus(agent.conn, settings)
    except (StackError, OSError, RuntimeError) as exc:
        print(f"ask: the stack is not available: {exc}", file=sys.stderr)
        return 1
    try:
        result = agent.ask(args.question, thread_id=args.thread)
    finally:
        agent.close()
    if args.json:
        print(json.dumps(result.to_dict(), ensure_ascii=False, default=str))
        return 0
    calls = "; ".join(f"{c['name']}({json.dumps(c['arguments'], ensure_ascii=False)})" for c in result.tool_calls)
    print("Вопрос:", result.question)
    print("Вызовы:", calls or "инструмент не вызывали")
    print("Ответ:", result.answer)
    if result.requires_human:
        print("Нужен человек: агент не смог ответить по данным.")
    print(f"Поток: {result.thread_id} ({result.seconds:.1f} с)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
