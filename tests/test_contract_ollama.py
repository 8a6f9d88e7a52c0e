"""Contract tests: every request labkit sends to Ollama, checked against Ollama 0.13 itself.

The lab also runs on the Docker reference stack (ollama/ollama:0.13.0) and on a native Ollama,
neither of which can run here. So each request labkit makes (health check, model check, embed,
chat through ``ask_model``/``plan``/``evaluate_tool_choice``/``Agent``, the judge re-ranker's
chat with ``logprobs``, ``ps``) goes to
``FakeOllama`` (tests/fake_ollama.py), a FAKE server that answers with bodies copied or derived
from Ollama v0.13.0's docs/api.md and server source (``tests/ollama_contract/*.json``, each with its
``_source``) and records every request. After each test, no request may carry a key that is no
field of Ollama's request types (api/types.go): Ollama would ignore such a key silently.

This file never talks to our embedded model server: its behaviour is not Ollama's contract.
"""

from __future__ import annotations

import json
import math
import socket
import urllib.request
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

import ollama
import pytest
from fake_ollama import FIXTURES, FakeOllama, canonical_name, fixture, fixture_source, request_violations

import labkit.services.modelembedded as modelembedded
from labkit.agent.graph import Agent
from labkit.agent.planner import PLAN_TOKENS, plan
from labkit.agent.supervisor.documents import ANSWERABLE, CHECK, SYSTEM, SYSTEM_ABSTAIN, Chunk, DocumentAgent
from labkit.agent.tools import DEFAULT_TOOLS, tool_schema
from labkit.core.settings import NO_TOOLS_MODEL, Settings, get_settings, normalize_host
from labkit.evaluation.tool_choice import evaluate_tool_choice, load_agent_questions
from labkit.models.availability import ModelMissing, check_models
from labkit.models.chat import ask_model
from labkit.models.embedding import BATCH_SIZE, QWEN3_TASK, embed_documents, embed_query
from labkit.models.relevance import (
    TOP_LOGPROBS,
    JudgeUnavailable,
    first_token_alternatives,
    judge_messages,
    judge_relevance,
)
from labkit.services.modelserver.app import canonical_name as served_canonical_name
from labkit.services.modelserver.logprobs import TOP_LOGPROBS_ERROR

if TYPE_CHECKING:
    from labkit.core.context import Lab

COMPOSE_MODELS = {"EMBED_MODEL": "qwen3-embedding:0.6b", "CHAT_MODEL": "qwen3:1.7b", "ALT_CHAT_MODEL": "qwen3:0.6b"}
QUESTION = [{"role": "user", "content": "Сколько новостей про спорт?"}]


@pytest.fixture()
def serve() -> Iterator[Callable[..., FakeOllama]]:
    """Start FakeOllama servers for one test; afterwards, fail if any request broke Ollama's request types."""
    started: list[FakeOllama] = []

    def start(**config: Any) -> FakeOllama:
        fake = FakeOllama(**config)
        started.append(fake)
        return fake

    yield start
    for fake in started:
        fake.close()
    problems = [problem for fake in started for problem in fake.violations]
    assert not problems, "requests that Ollama 0.13 would not read as labkit means them:\n" + "\n".join(problems)


@pytest.fixture()
def fake(serve: Callable[..., FakeOllama]) -> FakeOllama:
    """A FakeOllama with every model of models.json and the plain chat reply."""
    return serve()


def _settings(monkeypatch: pytest.MonkeyPatch, fake: FakeOllama, stack: str = "embedded", **models: str) -> Settings:
    """Settings as labkit reads them from the environment, pointed at the fake (models default to compose's)."""
    monkeypatch.setenv("LAB_STACK", stack)
    monkeypatch.setenv("OLLAMA_HOST", fake.url)
    for variable, name in {**COMPOSE_MODELS, **models}.items():
        monkeypatch.setenv(variable, name)
    return get_settings()


def _chat_bodies(fake: FakeOllama) -> list[dict[str, Any]]:
    return cast("list[dict[str, Any]]", fake.bodies("/api/chat"))


# --- the fixtures and the fake itself ---------------------------------------------------------------------------

def test_every_fixture_cites_ollama_0_13_and_is_answered_without_its_source():
    files = sorted(FIXTURES.glob("*.json"))
    assert len(files) >= 12
    for path in files:
        raw = json.loads(path.read_text(encoding="utf-8"))
        source = fixture_source(path.stem)
        assert "_source" in raw and source.strip(), path.name
        assert "v0.13.0" in source, f"{path.name} must cite the Ollama tag"
        assert "_source" not in json.dumps(fixture(path.stem)), f"{path.name}: _source must be stripped"


def test_the_validator_catches_what_ollama_would_ignore(serve):
    # A typo in a request key or an option does nothing on Ollama; the fake must notice it.
    found = request_violations("ChatRequest", {
        "model": "qwen3:1.7b", "messages": [{"role": "user", "content": "x", "tool": "get_metrics"}],
        "thinking": False, "stream": False, "options": {"num_predict": 8, "max_tokens": 8},
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
            "topic": {"type": "string", "choices": ["a"]}}}}}],
    })
    assert [v.split(":")[0] for v in found] == [
        "ChatRequest.messages[0].tool", "ChatRequest.thinking", "ChatRequest.options.max_tokens",
        "ChatRequest.tools[0].function.parameters.properties.topic.choices"]
    assert request_violations("EmbedRequest", {"model": "m", "input": ["a"], "dimension": 8}) != []
    assert request_violations("ShowRequest", {"model": "m"}) == []
    # Over HTTP too: the recorded request carries the violation (a fake used here without the final check).
    with FakeOllama() as direct:
        data = json.dumps({"model": "qwen3:1.7b", "messages": QUESTION, "stream": False, "think": False,
                           "option": {"num_predict": 8}}).encode()
        request = urllib.request.Request(f"{direct.url}/api/chat", data=data, method="POST")
        with urllib.request.urlopen(request, timeout=5) as response:
            assert response.status == 200
        assert direct.violations == ["POST /api/chat: ChatRequest.option: not a field of api.ChatRequest "
                                     "(api/types.go, v0.13.0); Ollama ignores it silently"]


def test_canonical_name_is_ollamas_full_model_name():
    assert canonical_name("deepseek-r1:1.5b") == "registry.ollama.ai/library/deepseek-r1:1.5b"
    assert canonical_name("llama3.2") == "registry.ollama.ai/library/llama3.2:latest"
    assert canonical_name("me/tuned:q4") == "registry.ollama.ai/me/tuned:q4"
    for name in ("deepseek-r1:1.5b", "llama3.2", "me/tuned:q4", "host.example/me/tuned:q4"):
        assert served_canonical_name(name) == canonical_name(name), "the embedded server names models as Ollama does"


@pytest.mark.parametrize(("stack", "variable", "expected"), [
    ("embedded", None, "qwen2.5-coder-notools:0.5b"),  # served by the embedded model server without tools
    ("compose", None, NO_TOOLS_MODEL),  # pulled by the compose stack
    ("embedded", "my-model:1b", "my-model:1b"),
])
def test_each_stack_names_its_model_without_tools(monkeypatch, stack, variable, expected):
    monkeypatch.setenv("LAB_STACK", stack)
    if variable:
        monkeypatch.setenv("NO_TOOLS_MODEL", variable)
    else:
        monkeypatch.delenv("NO_TOOLS_MODEL", raising=False)
    assert get_settings().no_tools_model == expected


# --- health check: GET /api/version -----------------------------------------------------------------------------

def test_health_check_answers_on_the_normalized_host(fake):
    assert modelembedded.answers(normalize_host(f"127.0.0.1:{fake.port}"))
    assert fake.paths() == ["GET /api/version"]


def test_health_check_takes_ollama_host_without_scheme(fake, monkeypatch):
    monkeypatch.setenv("OLLAMA_HOST", f"127.0.0.1:{fake.port}")  # the form Ollama's own docs use
    monkeypatch.delenv("LAB_STACK", raising=False)
    host = get_settings().ollama_host
    assert host is not None and host == fake.url
    assert modelembedded.answers(host)
    assert fake.paths() == ["GET /api/version"]


def test_health_check_is_false_on_a_closed_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    assert not modelembedded.answers(normalize_host(f"127.0.0.1:{port}"), timeout=2)


# --- model check at start-up: POST /api/show, GET /api/tags -------------------------------------------------------

def test_check_models_passes_with_three_documented_show_requests(fake, monkeypatch):
    settings = _settings(monkeypatch, fake, stack="compose")
    check_models(ollama.Client(host=settings.ollama_host), settings)
    assert fake.paths() == ["POST /api/show"] * 3, "no /api/tags when every model is there"
    assert fake.bodies("/api/show") == [{"model": name} for name in COMPOSE_MODELS.values()]


def test_a_missing_model_is_one_line_naming_ollama_pull(serve, monkeypatch):
    fake = serve(models={"qwen3-embedding:0.6b": ["embedding"], "qwen3:1.7b": ["completion", "tools", "thinking"]})
    settings = _settings(monkeypatch, fake)
    with pytest.raises(ModelMissing) as caught:
        check_models(ollama.Client(host=settings.ollama_host), settings)
    message = str(caught.value)
    assert "\n" not in message
    assert "`ollama pull qwen3:0.6b`" in message and "ALT_CHAT_MODEL" in message
    assert "docker compose" not in message
    assert "qwen3:1.7b" in message.split("has:")[-1], "the models the server has, from /api/tags"
    assert fake.paths() == ["POST /api/show"] * 3 + ["GET /api/tags"]
    assert [r.status for r in fake.requests] == [200, 200, 404, 200]


def test_a_chat_model_as_embed_model_is_reported(fake, monkeypatch):
    settings = _settings(monkeypatch, fake, EMBED_MODEL="qwen3:1.7b")
    with pytest.raises(ModelMissing) as caught:
        check_models(ollama.Client(host=settings.ollama_host), settings)
    message = str(caught.value)
    assert "\n" not in message
    assert "EMBED_MODEL=qwen3:1.7b cannot do embedding" in message
    assert "completion, tools, thinking" in message, "the capabilities /api/show listed"


def test_compose_stack_hint_runs_pull_inside_the_ollama_container(serve, monkeypatch):
    fake = serve(models={"qwen3-embedding:0.6b": ["embedding"], "qwen3:0.6b": ["completion", "tools", "thinking"]})
    settings = _settings(monkeypatch, fake, stack="compose")
    with pytest.raises(ModelMissing) as caught:
        check_models(ollama.Client(host=settings.ollama_host), settings)
    assert "`docker compose exec ollama ollama pull qwen3:1.7b`" in str(caught.value)


# --- embeddings: POST /api/embed ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("model", "sent"), [
    ("qwen3-embedding:0.6b", f"Instruct: {QWEN3_TASK}\nQuery:цена золота"),
    ("multilingual-e5-small:q4", "query: цена золота"),
])
def test_embed_query_sends_the_family_format(fake, model, sent):
    vector = embed_query(ollama.Client(host=fake.url), model, "цена золота")
    assert fake.bodies("/api/embed") == [{"model": model, "input": [sent]}]
    assert vector == FakeOllama.vector(sent)


@pytest.mark.parametrize(("model", "prefix"), [("qwen3-embedding:0.6b", ""), ("multilingual-e5-small:q4", "passage: ")])
def test_embed_documents_batches_and_keeps_the_order(fake, model, prefix):
    texts = [f"Новость номер {i}" for i in range(2 * BATCH_SIZE + 6)]
    vectors = embed_documents(ollama.Client(host=fake.url), model, texts)
    bodies = fake.bodies("/api/embed")
    assert [len(b["input"]) for b in bodies] == [BATCH_SIZE, BATCH_SIZE, 6]
    assert all(set(b) == {"model", "input"} and b["model"] == model for b in bodies)
    assert [t for b in bodies for t in b["input"]] == [prefix + t for t in texts]
    assert vectors == [FakeOllama.vector(prefix + t) for t in texts]


# --- chat: POST /api/chat ----------------------------------------------------------------------------------------

def test_ask_model_states_think_stream_and_options(fake):
    client = ollama.Client(host=fake.url)
    reply = ask_model(client.chat, "qwen3:1.7b", QUESTION, think=True, num_predict=64)
    (body,) = _chat_bodies(fake)
    assert body["think"] is True and body["stream"] is False
    assert body["options"] == {"temperature": 0.0, "num_predict": 64}
    assert body["messages"] == QUESTION
    assert not body.get("tools"), "the client sends [] for no tools; Ollama asks for tools only if len > 0 (routes.go L1993)"
    documented = fixture("chat_plain")
    assert reply.ok and reply.content == documented["message"]["content"]
    assert (reply.prompt_tokens, reply.eval_tokens) == (documented["prompt_eval_count"], documented["eval_count"])
    assert reply.timings["prompt"] == pytest.approx(documented["prompt_eval_duration"] / 1e9), "nanoseconds"
    assert reply.timings["eval"] == pytest.approx(documented["eval_duration"] / 1e9)


def test_tools_follow_ollamas_documented_schema(fake):
    client = ollama.Client(host=fake.url)
    ask_model(client.chat, "qwen3:1.7b", QUESTION, think=False, tools=[tool_schema(t) for t in DEFAULT_TOOLS], num_predict=32)
    (body,) = _chat_bodies(fake)
    (documented,) = fixture("chat_tools_request")["tools"]
    assert body["tools"] == [tool_schema(func) for func in DEFAULT_TOOLS]
    for tool in body["tools"]:
        assert set(tool) == set(documented) and tool["type"] == "function"
        function, parameters = tool["function"], tool["function"]["parameters"]
        assert set(function) == set(documented["function"]) and function["name"] and function["description"]
        assert set(parameters) == set(documented["function"]["parameters"]) and parameters["type"] == "object"
        assert parameters["properties"] and set(parameters["required"]) <= set(parameters["properties"])
        for prop in parameters["properties"].values():
            assert prop["type"] == "string" and prop["description"]
            assert set(prop) <= {"type", "description", "enum"}, "ToolProperty fields (api/types.go L285-291)"


def test_plan_sends_think_false_and_parses_tool_calls(serve):
    fake = serve(chat_reply="chat_tool_calls")
    step = plan(ollama.Client(host=fake.url).chat, "qwen3:1.7b", QUESTION, DEFAULT_TOOLS)
    (body,) = _chat_bodies(fake)
    assert body["think"] is False and body["stream"] is False
    assert body["options"]["num_predict"] == PLAN_TOKENS and len(body["tools"]) == len(DEFAULT_TOOLS)
    assert step.calls == [{"name": "get_weather", "arguments": {"city": "Tokyo"}}]
    assert type(step.calls[0]["arguments"]) is dict
    assert step.ok and step.content == "" and step.error == ""


def test_a_reply_that_only_thought_is_not_ok(serve):
    fake = serve(chat_reply="chat_thinking_only")
    reply = ask_model(ollama.Client(host=fake.url).chat, "qwen3:1.7b", QUESTION, think=True, num_predict=128)
    assert reply.content == "" and reply.thinking == fixture("chat_thinking_only")["message"]["thinking"]
    assert not reply.ok and reply.error == ""


def test_inline_think_moves_to_thinking(serve):
    fake = serve(chat_reply="chat_inline_think")
    reply = ask_model(ollama.Client(host=fake.url).chat, NO_TOOLS_MODEL, QUESTION, think=False, num_predict=64)
    assert reply.content == "В базе 7 новостей про спорт."
    assert reply.thinking == "Вопрос о количестве новостей про спорт."
    assert reply.ok


def test_model_without_tools_gives_a_reply_error_not_an_exception(fake):
    reply = ask_model(ollama.Client(host=fake.url).chat, NO_TOOLS_MODEL, QUESTION, think=False,
                      tools=[tool_schema(t) for t in DEFAULT_TOOLS], num_predict=64)
    assert [r.status for r in fake.requests] == [400]
    assert f"«{canonical_name(NO_TOOLS_MODEL)} does not support tools»" in reply.error
    assert NO_TOOLS_MODEL in reply.error and "инструментов" in reply.error and "не поддерживает" in reply.error
    assert reply.content == "" and reply.calls == [] and not reply.ok


def test_model_without_thinking_gives_a_reply_error_only_when_asked_to_think(fake):
    chat = ollama.Client(host=fake.url).chat
    refused = ask_model(chat, "qwen2.5-coder:1.5b", QUESTION, think=True, num_predict=64)
    assert '«"qwen2.5-coder:1.5b" does not support thinking»' in refused.error
    assert "рассуждений" in refused.error and not refused.ok
    answered = ask_model(chat, "qwen2.5-coder:1.5b", QUESTION, think=False, num_predict=64)
    assert answered.ok and answered.error == ""
    assert [r.status for r in fake.requests] == [400, 200]


def test_embedding_model_cannot_chat(fake):
    reply = ask_model(ollama.Client(host=fake.url).chat, "qwen3-embedding:0.6b", QUESTION, think=False)
    assert '«"qwen3-embedding:0.6b" does not support chat»' in reply.error and "чат" in reply.error


def test_a_missing_chat_model_raises(fake):
    with pytest.raises(ollama.ResponseError) as caught:
        ask_model(ollama.Client(host=fake.url).chat, "qwen3:8b", QUESTION, think=False, tools=[tool_schema(t) for t in DEFAULT_TOOLS])
    assert caught.value.status_code == 404 and caught.value.error == "model 'qwen3:8b' not found"


# --- evaluate_tool_choice and the Agent on a model without tools ---------------------------------------------------

def test_tool_choice_evaluation_reports_a_model_without_tools(fake):
    questions = load_agent_questions()
    frame = evaluate_tool_choice(ollama.Client(host=fake.url).chat, questions, NO_TOOLS_MODEL)
    assert len(frame) == len(questions) > 0
    assert set(frame["tool"]) == {"ошибка"} and not frame["correct"].any()
    assert frame["error"].str.contains("не поддерживает").all()
    bodies = _chat_bodies(fake)
    assert len(bodies) == len(questions)
    assert all(b["think"] is False and b["tools"] and b["stream"] is False for b in bodies)


class RefusingLab:
    """A FAKE lab that fails on any use: the agent's no-tools path must reach neither Postgres nor a tool."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the agent used lab.{name}")


def test_agent_on_a_model_without_tools_hands_over_to_a_human(fake):
    from langgraph.checkpoint.memory import InMemorySaver

    agent = Agent(cast("Lab", RefusingLab()), model=NO_TOOLS_MODEL, chat=ollama.Client(host=fake.url).chat,
                  checkpointer=InMemorySaver())
    result = agent.ask("Сколько новостей про спорт?")
    agent.close()
    assert result.requires_human
    assert "не поддерживает" in result.answer and "инструментов" in result.answer
    assert list(result.trace["node"]) == ["planner"] and result.tool_calls == []
    assert [r.status for r in fake.requests] == [400]


def test_agent_sends_tool_history_as_ollama_documents_it(serve):
    # The documented reply asks for get_weather, which is no tool of the lab: call_tool refuses it before
    # any SQL, so the planner is asked again with the call and its error in the history, until max_errors.
    # No scope check: it would read the corpus' words from Postgres (and drop a call on the weather, which the
    # news do not cover); here only the messages sent to the server are at stake.
    from langgraph.checkpoint.memory import InMemorySaver

    fake = serve(chat_reply="chat_tool_calls")
    agent = Agent(cast("Lab", RefusingLab()), model="qwen3:1.7b", chat=ollama.Client(host=fake.url).chat,
                  checkpointer=InMemorySaver(), max_errors=2, scope=False)
    result = agent.ask("Какая погода в Токио?")
    agent.close()
    assert result.requires_human and result.errors == 2
    assert list(result.trace["node"]) == ["planner", "tools", "planner", "tools", "give_up"]
    first, second = _chat_bodies(fake)
    assert first["messages"][-1] == {"role": "user", "content": "Какая погода в Токио?"}
    _, assistant, tool = fixture("chat_history_request")["messages"]
    sent_assistant, sent_tool = second["messages"][-2:]
    # The official client drops empty values ("content": ""); Go decodes a missing string as "": the same message.
    assert set(sent_assistant) | {"content"} == set(assistant) and sent_assistant.get("content", "") == ""
    assert sent_assistant["role"] == "assistant"
    assert sent_assistant["tool_calls"] == [{"function": {"name": "get_weather", "arguments": {"city": "Tokyo"}}}]
    assert [set(c["function"]) for c in sent_assistant["tool_calls"]] == [set(assistant["tool_calls"][0]["function"])]
    assert set(sent_tool) == set(tool) and sent_tool["role"] == "tool" and sent_tool["tool_name"] == "get_weather"
    assert "Неизвестный инструмент" in sent_tool["content"]


# --- notebook 06: GET /api/ps ------------------------------------------------------------------------------------

def test_ps_gives_what_notebook_06_reads(serve):
    fake = serve(loaded=["qwen3-embedding:0.6b", "qwen3:1.7b"])
    loaded = ollama.Client(host=fake.url).ps().models
    assert [m.model for m in loaded] == ["qwen3-embedding:0.6b", "qwen3:1.7b"]
    for m in loaded:
        assert m.details is not None and m.details.parameter_size and m.details.quantization_level
        assert m.size and m.context_length == 4096
        assert isinstance(m.expires_at, datetime) and m.expires_at.tzinfo is not None
    assert fake.paths() == ["GET /api/ps"] and fake.bodies("/api/ps") == [None]



# --- the judge re-ranker (17_kb_rerank): POST /api/chat with logprobs ---------------------------------------------

def _yes_no(yes: float, no: float) -> list[dict[str, Any]]:
    """``chat_logprobs.json``'s entry with its tokens renamed to yes/no: Ollama's shape, our words and values."""
    (entry,) = fixture("chat_logprobs")["logprobs"]
    entry.update(token="yes", logprob=yes, bytes=list(b"yes"))
    first, second = entry["top_logprobs"]
    first.update(token="yes", logprob=yes, bytes=list(b"yes"))
    second.update(token="No", logprob=no, bytes=list(b"No"))
    return [entry]


def test_the_logprobs_fixture_has_ollamas_documented_fields():
    reply = fixture("chat_logprobs")
    fields = fixture("request_fields")["ChatRequest"]["fields"]
    assert (fields["logprobs"], fields["top_logprobs"]) == ("bool", "int")
    (entry,) = reply["logprobs"]
    assert set(entry) == {"token", "logprob", "bytes", "top_logprobs"}
    assert all(set(alt) == {"token", "logprob", "bytes"} for alt in entry["top_logprobs"])
    assert all(bytes(item["bytes"]).decode() == item["token"] for item in [entry, *entry["top_logprobs"]])


def test_judge_asks_for_logprobs_as_ollama_documents_them(serve):
    fake = serve(logprobs=_yes_no(math.log(0.75), math.log(0.25)))
    judgement = judge_relevance(ollama.Client(host=fake.url).chat, "qwen3:1.7b", "золото", "Цена золота выросла")
    (body,) = _chat_bodies(fake)
    assert body["logprobs"] is True and body["top_logprobs"] == TOP_LOGPROBS and body["stream"] is False
    assert body["think"] is False and body["options"] == {"temperature": 0.0, "num_predict": 1}
    assert body["messages"] == judge_messages("золото", "Цена золота выросла")
    assert judgement.probability == pytest.approx(0.75)
    assert judgement.prompt_tokens == fixture(fake.chat_reply)["prompt_eval_count"]


def test_judge_reads_the_documented_reply_itself(serve):
    # Ollama's own example answers "Hi" (alternatives Hello, Hey): neither word, so no preference at all
    fake = serve(chat_reply="chat_logprobs")
    chat = ollama.Client(host=fake.url).chat
    reply = chat(model="qwen3:1.7b", messages=QUESTION, think=False, logprobs=True, top_logprobs=2)
    assert first_token_alternatives(reply) == [("Hello", -0.3), ("Hey", -0.45)]
    assert first_token_alternatives(reply.model_dump()) == [("Hello", -0.3), ("Hey", -0.45)]
    assert judge_relevance(chat, "qwen3:1.7b", "золото", "Цена золота").probability == 0.5


def test_top_logprobs_out_of_range_is_ollamas_400_and_ours_says_the_same(serve):
    fake = serve()
    with pytest.raises(ollama.ResponseError) as caught:
        ollama.Client(host=fake.url).chat(model="qwen3:1.7b", messages=QUESTION, logprobs=True, top_logprobs=21)
    documented = fixture("errors")["top_logprobs_range"]
    assert caught.value.status_code == documented["status"] and caught.value.error == documented["template"]
    assert TOP_LOGPROBS_ERROR == documented["template"] and TOP_LOGPROBS <= 20


def test_an_ollama_without_logprobs_is_a_clear_lab_error(serve):
    fake = serve(serves_logprobs=False)
    with pytest.raises(JudgeUnavailable, match="0.12.11"):
        judge_relevance(ollama.Client(host=fake.url).chat, "qwen3:1.7b", "золото", "Цена золота")


def test_a_missing_judge_model_is_a_clear_lab_error(fake):
    with pytest.raises(JudgeUnavailable, match="qwen3:8b.*model 'qwen3:8b' not found.*404"):
        judge_relevance(ollama.Client(host=fake.url).chat, "qwen3:8b", "золото", "Цена золота")


WARRANTY = [Chunk(5001, 5, "Гарантия › Сроки", "Гарантийный срок на ноутбуки составляет 24 месяца.")]


def test_the_document_agents_check_and_answer_differ_only_after_the_question(serve):
    # Ollama's documented logprobs list neither «yes» nor «no»: P(yes) 0.5, above the threshold, so the agent answers
    fake = serve()
    agent = DocumentAgent(None, model="qwen3:1.7b", chat=ollama.Client(host=fake.url).chat)
    reply = agent.answer("Какой гарантийный срок у ноутбука?", WARRANTY)
    check, answer = fake.bodies("/api/chat")
    assert reply.answerable == 0.5 >= ANSWERABLE and reply.check is not None and agent.scores
    assert check["logprobs"] is True and check["options"]["num_predict"] == 1 and "logprobs" not in answer
    assert check["messages"][0] == answer["messages"][0] == {"role": "system", "content": SYSTEM}
    assert check["messages"][-1]["content"] == f"{answer['messages'][-1]['content']}\n\n{CHECK}"
    assert reply.answer == fixture("chat_plain")["message"]["content"] and reply.citations == [(5, "Гарантия › Сроки")]


def test_on_an_ollama_without_logprobs_the_document_agent_asks_the_model_to_abstain_itself(serve):
    fake = serve(serves_logprobs=False)
    agent = DocumentAgent(None, model="qwen3:1.7b", chat=ollama.Client(host=fake.url).chat)
    first, second = (agent.answer("Какой гарантийный срок у ноутбука?", WARRANTY) for _ in range(2))
    check, answer, again = fake.bodies("/api/chat")  # one check only: the agent learnt from it
    assert check["messages"][-1]["content"].endswith(CHECK) and not agent.scores
    assert answer["messages"][0]["content"] == SYSTEM_ABSTAIN and again["messages"] == answer["messages"]
    assert first.answerable is None and first.check is not None and second.check is None
    assert first.answer == second.answer == fixture("chat_plain")["message"]["content"] and not first.abstained
