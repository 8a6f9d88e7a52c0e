"""The LangGraph agent with the real model server and the real Postgres checkpointer.

Assertions check the tool choice and the graph's path, never the wording of answers.
The only fake is ``lk.FakeStubbornChat`` (a model that always sends an invalid call):
a real model does not fail on demand, and the error loop must be exercised.
"""

from __future__ import annotations

import json
import uuid

import pytest

import labkit as lk
from labkit.cli import main as cli_main

pytestmark = pytest.mark.services


@pytest.fixture()
def agent(lab_ro):
    instance = lk.Agent(lab_ro)
    yield instance
    instance.close()


def test_gold_question_uses_search_articles(agent):
    result = agent.ask("Что пишут про цену золота?")
    assert [c["name"] for c in result.tool_calls] == ["search_articles"]
    assert "золот" in result.tool_calls[0]["arguments"]["query"].lower()
    assert list(result.trace["node"]) == ["planner", "tools", "finalizer"]
    assert not result.requires_human and result.errors == 0 and result.answer
    planner = result.trace.iloc[0]
    assert planner["prompt_tokens"] > 0 and planner["eval_tokens"] > 0, "token counts come from the response"
    assert result.cited and set(result.cited) <= set(result.retrieved), "the answer cites news the search returned"
    assert result.faithful is True
    payload = result.to_dict()
    assert payload["cited_ids"] == result.cited and payload["retrieved_ids"] == result.retrieved


def test_trace_table_is_readable(agent):
    table = agent.ask("Что пишут про цену золота?").trace_table()
    assert list(table.columns)[:4] == ["узел", "инструмент", "аргументы", "успех"]
    text = table.to_string()
    assert "None" not in text and "<NA>" not in text and "True" not in text and "nan" not in text
    assert set(table["успех"]) <= {"", "да", "нет"} and "query=" in table["аргументы"].iloc[0]
    assert all(len(p) <= 80 and (not p.endswith("…") or p[-2] != " ") for p in table["результат"])


@pytest.mark.parametrize(("question", "expected"), [
    ("Расскажи про спорт.", ("search_articles", None)),  # an open request: no tool at all before
    ("Какие есть новости о технологиях?", ("search_articles", None)),  # the news themselves, not their count
    ("Что плохого пишут о Газпроме?", ("search_by_entity", {"company": "Газпром", "tone": "negative"})),
    ("Какая столица Франции?", None),  # small talk: no search
])
def test_the_three_kinds_of_miss_and_small_talk(lab_ro, question, expected):
    from labkit.agent.entity_tool import FINAL_SYSTEM, FINAL_TOOLS

    final = lk.Agent(lab_ro, tools=FINAL_TOOLS, system=FINAL_SYSTEM)
    try:
        result = final.ask(question)
    finally:
        final.close()
    assert lk.strip_markup(result.answer) == result.answer and result.answer
    if expected is None:
        assert result.tool_calls == [] and not result.requires_human
        return
    name, arguments = expected
    assert result.tool_calls[0]["name"] == name
    if arguments is not None:
        assert result.tool_calls[0]["arguments"] == arguments


def test_greeting_needs_no_tool(agent):
    result = agent.ask("Привет, как дела?")
    assert result.tool_calls == []
    assert list(result.trace["node"]) == ["planner"], "the graph ends right after the planner"
    assert result.answer and not result.requires_human


def _ask_with(lab, chat, question, **options) -> lk.AgentResult:
    """One question to an agent whose model is the given (fake) chat callable."""
    agent = lk.Agent(lab, chat=chat, **options)
    try:
        return agent.ask(question)
    finally:
        agent.close()


def test_error_loop_stops_after_three_errors(lab_ro):
    fake = lk.FakeStubbornChat()
    result = _ask_with(lab_ro, fake, "Сколько новостей про погоду?")
    assert result.requires_human and result.errors == 3 and fake.requests == 3
    assert [c["ok"] for c in result.tool_calls] == [False, False, False]
    assert list(result.trace["node"]) == ["planner", "tools"] * 3 + ["give_up"]
    assert "weather" in result.answer and "человеку" in result.answer
    tool_rows = result.trace[result.trace["node"] == "tools"]
    assert tool_rows["preview"].str.contains("Допустимые значения").all(), "the error lists the allowed topics"


def test_recursion_limit_gives_an_honest_result(lab_ro):
    result = _ask_with(lab_ro, lk.FakeStubbornChat(), "Сколько новостей про погоду?",
                       max_errors=100, recursion_limit=7)
    assert result.requires_human and "7 шагов" in result.answer
    assert len(result.trace) == 7, "the trace of the steps made before the limit is kept"


class FakeDeadServer:
    """A FAKE chat client whose server is gone (the ollama client raises ConnectionError)."""

    def __call__(self, **_):
        raise ConnectionError("Failed to connect to Ollama")


def test_dead_model_server_gives_an_honest_result(lab_ro):
    result = _ask_with(lab_ro, FakeDeadServer(), "Что пишут про цену золота?")
    assert result.requires_human and "ConnectionError" in result.answer and result.tool_calls == []


class FakeSilentChat:
    """A FAKE model that answers every request with `content` (by default nothing) and no tool call."""

    def __init__(self, content: str = "") -> None:
        self.content = content

    def __call__(self, **_):
        from ollama import ChatResponse, Message

        return ChatResponse(model="fake-silent", message=Message(role="assistant", content=self.content))


def test_a_mute_model_is_reported_not_returned_as_empty(lab_ro):
    result = _ask_with(lab_ro, FakeSilentChat(), "Привет!")
    assert result.requires_human and result.answer and list(result.trace["node"]) == ["planner", "reply", "give_up"]


@pytest.mark.parametrize("markup", ["<tools></tools>", '<tool_call>\n{"name": "search_articles", "argu',
                                    '```json\n{"name": "nothing"}\n```'])
def test_model_markup_never_reaches_an_answer(lab_ro, markup):
    """A real model wrote ``<tools></tools>`` as its answer; the fake repeats such markup on demand."""
    news = _ask_with(lab_ro, FakeSilentChat(markup), "Расскажи про нефть.")
    assert [c["name"] for c in news.tool_calls] == ["search_articles"], "a question about the news still searches"
    assert news.faithful is True and "<" not in news.answer and "{" not in news.answer and news.cited
    chat = _ask_with(lab_ro, FakeSilentChat(markup), "Привет!")
    assert chat.tool_calls == [] and chat.requires_human and "<" not in chat.answer and "{" not in chat.answer


def test_ask_json_sport_then_resume_thread_in_another_graph(lab_ro, capsys):
    thread = f"test-{uuid.uuid4().hex[:8]}"
    question = "Сколько новостей про спорт в базе?"
    assert cli_main(["ask", question, "--json", "--thread", thread]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert set(payload) >= {"question", "tool_calls", "answer", "requires_human", "trace", "seconds"}
    assert payload["question"] == question and payload["requires_human"] is False
    assert payload["tool_calls"] == [{"name": "get_metrics", "arguments": {"topic": "sport"}}]
    assert [step["node"] for step in payload["trace"]] == ["planner", "tools", "finalizer"]
    assert isinstance(payload["seconds"], float) and payload["answer"]

    # A second, independent graph (new checkpointer connection) reads the thread from Postgres.
    resumed = lk.Agent(lab_ro)
    try:
        history = resumed.history(thread)
        assert history[0] == {"role": "user", "content": question}
        assert history[1]["tool_calls"][0]["function"] == {"name": "get_metrics", "arguments": {"topic": "sport"}}
        assert history[-1]["role"] == "assistant" and history[-1]["content"] == payload["answer"]
        follow_up = resumed.ask("А сколько про финансы?", thread_id=thread)
        longer = resumed.history(thread)
    finally:
        resumed.close()
    assert longer[: len(history)] == history and len(longer) > len(history)
    assert {"role": "user", "content": "А сколько про финансы?"} in longer
    # the planner saw the earlier question (not its answer) and counted again instead of guessing
    assert [(c["name"], c["arguments"]) for c in follow_up.tool_calls] == [("get_metrics", {"topic": "finance"})]



def test_a_search_for_a_subject_the_news_never_name_says_so_before_quoting(agent, lab_ro):
    assert agent.scope.foreign("погода") and not agent.scope.foreign("ключевая ставка")
    result = lk.call_tool("search_articles", {"query": "погода"}, lab=lab_ro)
    assert result.ok and lk.cited_ids(result.content), "a vector search always has neighbours"
    state = {"question": "Сколько новостей про погоду?", "results": [result.content], "trace": [],
             "tool_calls": [{"name": "search_articles", "arguments": {"query": "погода"}, "ok": True}]}
    answer = agent._finalizer(state)["answer"]
    assert answer.startswith("Новостей об этом в базе нет") and "«погода»" in answer
    assert set(lk.cited_ids(answer)) == set(lk.cited_ids(result.content)), "the neighbours are quoted with their ids"
    state["tool_calls"][0]["arguments"] = {"query": "ключевая ставка"}
    state["results"] = [lk.call_tool("search_articles", {"query": "ключевая ставка"}, lab=lab_ro).content]
    assert not agent._finalizer(state)["answer"].startswith("Новостей об этом в базе нет")


def test_a_topic_the_news_never_spell_is_not_declared_absent(agent, lab_ro):
    """«спорт» is in no news text, yet it is a topic of the base (seven sport news): its news are retold, not disowned."""
    assert agent.scope.foreign("спорт"), "the word itself is in no news: the case this guards"
    result = lk.call_tool("search_articles", {"query": "спорт"}, lab=lab_ro)
    state = {"question": "Какие есть новости про спорт?", "results": [result.content], "trace": [],
             "tool_calls": [{"name": "search_articles", "arguments": {"query": "спорт"}, "ok": True}]}
    answer = agent._finalizer(state)["answer"]
    assert answer and not answer.startswith("Новостей об этом в базе нет")
