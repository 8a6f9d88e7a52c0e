"""A long conversation keeps working: the planner's context is trimmed to fit the model's window.

The unit tests need no service; the last one sends a follow-up in a thread whose saved questions
alone are longer than the real model server's window (they are written into the checkpoint
directly: asking them one by one would only cost minutes).
"""

from __future__ import annotations

import uuid

import pytest

import labkit as lk
from labkit.agent.graph import CONTEXT_TOKENS, HISTORY_TOKENS, estimate_tokens
from labkit.agent.tools import DEFAULT_TOOLS

SYSTEM = "системная подсказка"
# About 500 real tokens of Russian each (the model server's tokenizer reads ~3 characters per token).
LONG = "Расскажите подробно, что происходило на рынках сырья, валют и акций в прошлом квартале, и почему. " * 15


def _thread(questions: list[str]) -> list[dict]:
    messages: list[dict] = []
    for question in questions:
        messages += [{"role": "user", "content": question}, {"role": "assistant", "content": "ответ"}]
    return messages


def test_earlier_questions_are_kept_newest_first_within_the_budget():
    earlier = [f"вопрос {i}: " + "слово " * 100 for i in range(20)]  # ~300 estimated tokens each
    current = [{"role": "user", "content": "А сколько про спорт?"}]
    context = lk.planner_context(SYSTEM, _thread(earlier) + current)
    assert context[0] == {"role": "system", "content": SYSTEM} and context[-1] == current[0]
    kept = [m["content"] for m in context[1:-1]]
    assert kept == earlier[-len(kept):] and 1 <= len(kept) < len(earlier), "the latest questions, in order"
    assert sum(estimate_tokens(m) for m in context[1:-1]) <= HISTORY_TOKENS


def test_a_short_thread_is_shown_whole_and_answers_stay_hidden():
    messages = _thread(["Сколько новостей про спорт?"]) + [{"role": "user", "content": "А про финансы?"}]
    assert lk.planner_context(SYSTEM, messages) == [{"role": "system", "content": SYSTEM},
                                                    messages[0], messages[2]]


def test_the_window_leaves_room_for_the_current_turn_and_the_tools():
    current = [{"role": "user", "content": "х" * 2 * (CONTEXT_TOKENS - 600)}]  # a huge pasted question
    context = lk.planner_context(SYSTEM, _thread(["короткий вопрос"]) + current, DEFAULT_TOOLS)
    assert context == [{"role": "system", "content": SYSTEM}, *current], "no room left: earlier questions go"
    short = lk.planner_context(SYSTEM, _thread(["короткий вопрос"]) + [{"role": "user", "content": "?"}], DEFAULT_TOOLS)
    assert [m["content"] for m in short] == [SYSTEM, "короткий вопрос", "?"], "with room, the same thread keeps it"


@pytest.mark.services
def test_a_thread_longer_than_the_window_still_gets_answers(lab_ro):
    thread = f"test-long-{uuid.uuid4().hex[:8]}"
    agent = lk.Agent(lab_ro)
    try:
        config = {"configurable": {"thread_id": thread}}
        agent.graph.update_state(config, {"messages": _thread([LONG] * 10)}, as_node="finalizer")
        assert sum(len(m["content"]) for m in agent.history(thread)) > 3 * CONTEXT_TOKENS, "longer than the window"
        result = agent.ask("Сколько новостей про спорт в базе?", thread_id=thread)
    finally:
        agent.close()
    assert result.model_error == "" and not result.requires_human, result.answer
    planner = result.trace.iloc[0]
    assert planner["node"] == "planner" and planner["prompt_tokens"] < CONTEXT_TOKENS
    assert [c["name"] for c in result.tool_calls] == ["get_metrics"]
