"""Integration tests of the embedded model server through the official `ollama` client (real models)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import httpx
import numpy as np
import ollama
import pytest

import labkit as lk
from labkit.core.settings import EMBEDDED_DEFAULTS
from labkit.models import embedding
from labkit.services.modelserver.app import VERSION, canonical_name
from labkit.services.pgembedded import free_port

pytestmark = pytest.mark.services

CHAT = "qwen2.5-coder:1.5b"
SMALL = "qwen2.5-coder:0.5b"
EMBED = "multilingual-e5-small:q4"
QWEN_EMBED = "qwen2.5-coder-embed:0.5b"  # llama.cpp embeddings of SMALL's GGUF
NO_TOOLS = "qwen2.5-coder-notools:0.5b"  # SMALL's GGUF registered without tool support (exercise 08)
SERVED = (CHAT, SMALL, EMBED, QWEN_EMBED, NO_TOOLS)
FAST = {"temperature": 0, "seed": 1, "num_predict": 64}

# Content of the seed article's SYSTEM prompt and its two tools.
SEED_SYSTEM = (
    "Ты аналитик новостной базы. Для вопросов о содержании новостей вызывай search_articles. "
    "Для вопросов со словом сколько вызывай get_metrics. "
    "Отвечай по-русски, коротко и только по данным инструментов."
)
SEED_TOOLS = [
    {"type": "function", "function": {
        "name": "search_articles",
        "description": "Гибридный поиск новостей по смыслу и по словам",
        "parameters": {"type": "object", "properties": {
            "query": {"type": "string", "description": "поисковый запрос"}}, "required": ["query"]}}},
    {"type": "function", "function": {
        "name": "get_metrics",
        "description": "Число новостей по теме. Темы: commodities, sport, monetary, tech, retail, energy, "
                       "incident, finance, realty",
        "parameters": {"type": "object", "properties": {
            "topic": {"type": "string", "description": "тема новостей"}}, "required": ["topic"]}}},
]


def _is_ours(host: str | None) -> bool:
    try:
        return httpx.get(f"{host}/api/version", timeout=5).json().get("version") == VERSION
    except (httpx.HTTPError, ValueError, TypeError):
        return False


def _start_server(*extra: str, env: dict[str, str] | None = None) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "labkit.services.modelserver", "--port", str(port), *extra],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    host = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while not _is_ours(host):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"model server on port {port} did not start (exit code {proc.poll()})")
        time.sleep(0.2)
    return proc, host


@pytest.fixture(scope="module")
def host(request) -> str:
    """The stack's model server when it is ours; otherwise a private one on a free port."""
    settings = request.getfixturevalue("settings")
    if _is_ours(settings.ollama_host):
        yield settings.ollama_host
        return
    proc, private = _start_server()
    yield private
    proc.terminate()
    proc.wait(timeout=30)


@pytest.fixture(scope="module")
def client(host) -> ollama.Client:
    return ollama.Client(host=host)


def seed_chat(client: ollama.Client, question: str, **kwargs):
    messages = [{"role": "system", "content": SEED_SYSTEM}, {"role": "user", "content": question}]
    return client.chat(model=CHAT, messages=messages, tools=SEED_TOOLS, options=FAST, **kwargs)


def test_lists_the_served_models(client, host):
    assert {m.model for m in client.list().models} == set(SERVED)
    assert httpx.get(host).text == "Ollama is running"
    assert client.show(CHAT).capabilities == ["completion", "tools"]
    assert client.show(EMBED).capabilities == ["embedding"]
    assert client.show(QWEN_EMBED).capabilities == ["embedding"]
    assert client.show(NO_TOOLS).capabilities == ["completion"]
    assert EMBEDDED_DEFAULTS["no_tools_model"] == NO_TOOLS


def test_bad_requests_get_clear_errors_and_keep_the_connection_usable(host):
    with httpx.Client(base_url=host, timeout=30) as http:  # one keep-alive connection
        unknown = http.post("/api/generate", json={"model": CHAT, "prompt": "hi"})
        assert unknown.status_code == 404 and "/api/chat" in unknown.json()["error"]
        broken = http.post("/api/chat", content=b"not json")
        assert broken.status_code == 400 and "JSON" in broken.json()["error"]
        no_role = http.post("/api/chat", json={"model": CHAT, "messages": [{"content": "x"}], "stream": False})
        assert no_role.status_code == 400 and "role" in no_role.json()["error"]
        assert http.get("/api/version").json()["version"] == VERSION


def test_embed_accepts_string_and_list(client):
    one = client.embed(model=EMBED, input="query: золото цена")
    many = client.embed(model=EMBED, input=["passage: Нефть Brent подешевела", "Ключ от квартиры"])
    assert len(one.embeddings) == 1 and len(many.embeddings) == 2
    vectors = np.array([*one.embeddings, *many.embeddings])
    assert vectors.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-3)
    assert one.prompt_eval_count > 0 and one.total_duration > 0
    # the prefix picks query vs passage encoding; the same text as a passage is a different vector
    as_passage = client.embed(model=EMBED, input="passage: золото цена").embeddings[0]
    assert not np.allclose(one.embeddings[0], as_passage)
    # unprefixed input is embedded as a passage
    assert np.allclose(client.embed(model=EMBED, input="Ключ от квартиры").embeddings[0], many.embeddings[1], atol=1e-6)


def test_gold_price_passage_beats_figure_skater(client):
    query = np.array(lk.embed_query(client, EMBED, "золото цена"))
    price, skater = np.array(lk.embed_documents(client, EMBED, [
        "Цена золота на мировых рынках обновила исторический максимум на фоне спроса центробанков",
        "Фигурист взял золото на чемпионате России, обновив личный рекорд",
    ]))
    assert query @ price > query @ skater


def test_embed_documents_batches_keep_order(client, host):
    texts = [f"Новость номер {i}" for i in range(embedding.BATCH_SIZE + 3)]
    vectors = lk.embed_documents(client, EMBED, texts)
    assert len(vectors) == len(texts)
    last = ollama.Client(host=host).embed(model=EMBED, input=lk.document_text(texts[-1], EMBED)).embeddings[0]
    assert np.allclose(vectors[-1], last, atol=1e-6)


@pytest.mark.parametrize("question, tool, arguments", [
    ("Что пишут про цену золота?", "search_articles", None),
    ("Сколько новостей про спорт в базе?", "get_metrics", {"topic": "sport"}),
])
def test_seed_questions_become_tool_calls(client, question, tool, arguments):
    reply = seed_chat(client, question)
    calls = reply.message.tool_calls or []
    assert [c.function.name for c in calls] == [tool], reply.message.content
    if arguments is not None:
        assert dict(calls[0].function.arguments) == arguments
    else:
        assert "золот" in calls[0].function.arguments["query"].lower()
    assert reply.message.content == "" and reply.done and reply.eval_count > 0


def test_plain_question_gets_plain_content(client):
    reply = seed_chat(client, "Привет! Ответь одним словом: как по-русски hello?")
    assert not reply.message.tool_calls
    assert reply.message.content.strip()
    assert reply.prompt_eval_count > 100 and reply.done_reason == "stop"


def test_tool_result_in_history_reaches_the_model(client):
    messages = [
        {"role": "system", "content": SEED_SYSTEM},
        {"role": "user", "content": "Сколько новостей про спорт в базе?"},
        {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "get_metrics",
                                                                          "arguments": {"topic": "sport"}}}]},
        {"role": "tool", "tool_name": "get_metrics", "content": "Новостей по теме sport: 7"},
    ]
    reply = client.chat(model=CHAT, messages=messages, think=False, keep_alive="5m", options=FAST)
    assert "7" in reply.message.content


def test_stream_yields_chunks_then_done(client):
    chunks = list(client.chat(model=CHAT, messages=[{"role": "user", "content": "Назови три планеты."}],
                              stream=True, options=dict(FAST, num_predict=20)))
    assert len(chunks) >= 3
    assert all(not c.done for c in chunks[:-1]) and chunks[-1].done
    assert "".join(c.message.content or "" for c in chunks).strip()
    assert chunks[-1].eval_count > 0 and chunks[-1].total_duration > chunks[-1].eval_duration > 0


def test_stream_with_tools_delivers_the_call(client):
    chunks = list(seed_chat(client, "Сколько новостей про спорт в базе?", stream=True))
    calls = [call for c in chunks for call in (c.message.tool_calls or [])]
    assert [c.function.name for c in calls] == ["get_metrics"]
    assert chunks[-1].done


def test_format_schema_yields_parseable_json(client):
    schema = {"type": "object", "properties": {"city": {"type": "string"}, "year": {"type": "integer"}},
              "required": ["city", "year"]}
    reply = client.chat(model=CHAT, messages=[{"role": "user", "content": "В каком городе и году основан МГУ?"}],
                        format=schema, options=FAST)
    data = json.loads(reply.message.content)
    assert isinstance(data["city"], str) and isinstance(data["year"], int)


@pytest.mark.parametrize("call", [
    lambda c: c.chat(model="llama3:8b", messages=[{"role": "user", "content": "hi"}]),
    lambda c: c.embed(model="nomic-embed-text", input="hi"),
    lambda c: c.show("llama3:8b"),
], ids=["chat", "embed", "show"])
def test_unknown_model_names_the_served_ones(client, call):
    with pytest.raises(ollama.ResponseError) as info:
        call(client)
    assert info.value.status_code == 404
    assert all(name in str(info.value) for name in SERVED)


def test_each_embedding_model_has_its_own_dimension(client):
    """e5 and the llama.cpp embedder on one server: 384 vs 896, each as /api/show says."""
    for model, width in ((EMBED, 384), (QWEN_EMBED, 896)):
        vectors = client.embed(model=model, input=["Банк России сохранил ключевую ставку"]).embeddings
        shown = client.show(model)
        assert len(vectors[0]) == width == shown.modelinfo[f"{shown.details.family}.embedding_length"]
        assert np.isclose(np.linalg.norm(vectors[0]), 1.0, atol=1e-4)


def _refusal(call) -> str:
    with pytest.raises(ollama.ResponseError) as info:
        call()
    assert info.value.status_code == 400, info.value.error
    return info.value.error


HI = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize("model, call, message", [
    (CHAT, lambda c, m: c.chat(model=m, messages=HI, think=True), '"{}" does not support thinking'),
    (SMALL, lambda c, m: c.chat(model=m, messages=HI, think="high"), '"{}" does not support thinking'),
    (CHAT, lambda c, m: list(c.chat(model=m, messages=HI, think=True, stream=True)), '"{}" does not support thinking'),
    (CHAT, lambda c, m: c.chat(model=m, messages=[], think=True), '"{}" does not support thinking'),
    (EMBED, lambda c, m: c.chat(model=m, messages=HI, think=True), '"{}" does not support thinking'),
    (EMBED, lambda c, m: c.chat(model=m, messages=HI), '"{}" does not support chat'),
    (QWEN_EMBED, lambda c, m: c.chat(model=m, messages=HI, tools=SEED_TOOLS), '"{}" does not support chat'),
    (NO_TOOLS, lambda c, m: c.chat(model=m, messages=HI, tools=SEED_TOOLS), "{} does not support tools"),
    (NO_TOOLS, lambda c, m: list(c.chat(model=m, messages=HI, tools=SEED_TOOLS, stream=True)),
     "{} does not support tools"),
    (NO_TOOLS, lambda c, m: c.chat(model=m, messages=[], tools=SEED_TOOLS), "{} does not support tools"),
    (CHAT, lambda c, m: c.embed(model=m, input="x"), "{} does not support embedding"),
    (SMALL, lambda c, m: c.embeddings(model=m, prompt="x"), "{} does not support embedding"),
], ids=["think", "think-high", "think-stream", "think-load", "think-embed-model", "chat-embed-model",
        "tools-embed-model", "tools-no-tools-model", "tools-no-tools-stream", "tools-no-tools-load", "embed-chat-model",
        "legacy-embeddings-chat-model"])
def test_unsupported_capability_is_ollamas_400(client, model, call, message):
    """Ollama 0.13's words (routes.go ChatHandler, handleScheduleError); none of these models can think.

    The tools refusal names the model canonically, as scheduleRunner's ``fmt.Errorf("%s %w", name, err)`` does.
    """
    name = canonical_name(model) if "tools" in message and "chat" not in message else model
    assert _refusal(lambda: call(client, model)) == message.format(name)


def test_the_model_without_tools_still_chats_without_them(client):
    reply = client.chat(model=NO_TOOLS, messages=HI, options=FAST)
    assert reply.message.content and not reply.message.tool_calls


def test_think_false_or_absent_is_an_ordinary_request(client, host):
    for think in (False, None):
        assert client.chat(model=SMALL, messages=[], think=think).done_reason == "load"
    assert "thinking" not in client.show(CHAT).capabilities
    with httpx.Client(base_url=host, timeout=30) as http:  # values the official client would not send
        for think, error in (("max", 'invalid think value: "max" (must be "high", "medium", "low", true, or false)'),
                             (1, 'think must be a boolean or string ("high", "medium", "low", true, or false)')):
            answer = http.post("/api/chat", json={"model": CHAT, "messages": HI, "think": think, "stream": False})
            assert (answer.status_code, answer.json()["error"]) == (400, error)


def test_pull_succeeds_for_served_models_only(client):
    assert client.pull(CHAT).status == "success"
    assert [p.status for p in client.pull(EMBED, stream=True)][-1] == "success"
    with pytest.raises(ollama.ResponseError, match="cannot download weights") as info:
        client.pull("llama3:8b")
    assert CHAT in str(info.value)


def test_model_still_loading_gets_a_clear_answer():
    proc, fresh = _start_server("--load-timeout", "0.5")
    try:
        client = ollama.Client(host=fresh, timeout=120)
        started, answers = time.monotonic(), []
        while time.monotonic() - started < 180:
            try:
                reply = client.chat(model=SMALL, messages=[{"role": "user", "content": "Скажи: да"}],
                                    options=dict(FAST, num_predict=4))
            except ollama.ResponseError as exc:
                assert exc.status_code == 503 and "still loading" in exc.error and SMALL in exc.error
                answers.append(exc.error)
                time.sleep(0.5)
                continue
            assert reply.done and reply.message.content is not None
            break
        else:
            pytest.fail(f"{SMALL} never answered; last: {answers[-1:]}")
        assert SMALL in [m.model for m in client.ps().models]
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_refuses_to_bind_beyond_loopback():
    done = subprocess.run([sys.executable, "-m", "labkit.services.modelserver", "--host", "0.0.0.0", "--port", "1"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "loopback" in done.stderr


def test_unparsable_call_is_regenerated_under_the_tools_schema():
    """A garbled call (which the model cannot be made to write on demand) is retried under the schema."""
    from labkit.services.modelserver.chat_api import _resolve
    from labkit.services.modelserver.convert import to_openai_request
    from labkit.services.modelserver.registry import ChatEngine
    from labkit.services.modelserver.weights import prepare_model

    engine = ChatEngine(str(prepare_model(SMALL)), n_ctx=1024, threads=2)
    body = {"messages": [{"role": "system", "content": SEED_SYSTEM},
                         {"role": "user", "content": "Сколько новостей про спорт в базе?"}],
            "tools": SEED_TOOLS, "options": FAST}
    garbled = '```json\n{"name": "get_metrics", "arguments": {"topic": "sport"\n```'
    results: list = []
    content, calls = _resolve(garbled, [], engine, to_openai_request(body, engine.n_ctx), body, results)
    assert content == "" and len(results) == 1  # exactly one regeneration
    assert len(calls) == 1 and calls[0]["function"]["name"] in {"search_articles", "get_metrics"}
    assert isinstance(calls[0]["function"]["arguments"], dict)


def test_chat_serves_logprobs_in_ollamas_shape(client):
    """The fields of Ollama's ``logprobs`` (tests/ollama_contract/chat_logprobs.json), from llama.cpp's own numbers."""
    question = [{"role": "user", "content": 'Is Moscow the capital of Russia? Answer "yes" or "no".'}]
    reply = client.chat(model=SMALL, messages=question, think=False, logprobs=True, top_logprobs=5,
                        options=dict(FAST, num_predict=3))
    raw = reply.model_dump(exclude_none=True)["logprobs"]
    assert len(raw) == reply.eval_count
    for entry in raw:
        assert set(entry) <= {"token", "logprob", "bytes", "top_logprobs"} and entry["logprob"] <= 0
        top = entry["top_logprobs"]
        assert len(top) == 5 and [t["logprob"] for t in top] == sorted((t["logprob"] for t in top), reverse=True)
        assert entry["token"] in [t["token"] for t in top], "temperature 0 picks the most likely token"
    assert "".join(entry["token"] for entry in raw) == reply.message.content
    first = reply.logprobs[0].top_logprobs
    assert first[0].token.strip().lower() == "yes" and lk.yes_probability([(t.token, t.logprob) for t in first]) > 0.5
    without_top = client.chat(model=SMALL, messages=question, think=False, logprobs=True, options=dict(FAST, num_predict=1))
    assert [e.top_logprobs for e in without_top.logprobs] == [None] and without_top.logprobs[0].token == first[0].token
    assert client.chat(model=SMALL, messages=question, think=False, options=dict(FAST, num_predict=1)).logprobs is None


def test_logprob_bytes_are_the_tokens_utf8_even_for_half_a_letter(host):
    body = {"model": SMALL, "messages": [{"role": "user", "content": "Напиши слово «щавель»."}], "stream": False,
            "think": False, "logprobs": True, "top_logprobs": 3, "options": dict(FAST, num_predict=6)}
    entries = httpx.post(f"{host}/api/chat", json=body, timeout=120).json()["logprobs"]
    for entry in [e for item in entries for e in [item, *item["top_logprobs"]]]:
        raw = bytes(entry.get("bytes", []))
        assert raw.decode("utf-8", "replace") == entry["token"]


def test_streamed_pieces_carry_their_tokens_logprobs(client):
    chunks = list(client.chat(model=SMALL, messages=[{"role": "user", "content": "Назови три планеты."}],
                              stream=True, logprobs=True, top_logprobs=2, options=dict(FAST, num_predict=8)))
    entries = [entry for chunk in chunks for entry in (chunk.logprobs or [])]
    assert len(entries) == chunks[-1].eval_count and all(len(e.top_logprobs) == 2 for e in entries)
    assert "".join(e.token for e in entries) == "".join(c.message.content or "" for c in chunks)


def test_bad_top_logprobs_get_ollamas_400(host):
    for value, needle in [(21, "top_logprobs must be between 0 and 20"), (-1, "top_logprobs must be between 0 and 20"),
                          (2.5, "cannot unmarshal number 2.5")]:
        body = {"model": SMALL, "messages": [{"role": "user", "content": "hi"}], "stream": False, "logprobs": True,
                "top_logprobs": value}
        answer = httpx.post(f"{host}/api/chat", json=body, timeout=30)
        assert answer.status_code == 400 and needle in answer.json()["error"]
