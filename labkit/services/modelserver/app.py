"""HTTP routing of the Ollama-compatible API, standard library only (behind every notebook from 01_corpus on).

Endpoints: GET / /api/version /api/tags /api/ps; POST /api/show /api/embed /api/embeddings
/api/chat (with Ollama's ``logprobs``/``top_logprobs``, logprobs.py) /api/pull; and labkit's own
GET /api/labkit/queue, the chat queue now (fairqueue.py). Errors are JSON {"error": ...} so `ollama.ResponseError` shows them.
A request the model cannot serve gets Ollama 0.13's 400 answers: `"NAME" does not support
thinking` for `think` on these models (none can think), `"NAME" does not support chat` for
chat with an embedding model, `registry.ollama.ai/library/NAME does not support tools` for
chat with tools to a model registered without them, and `NAME does not support embedding`
for embedding with a chat model (where Ollama itself would try to embed with it). A field of the wrong JSON type is
refused with a 400 before any model loads; an unknown path gets 404, a wrong method 405.
Reading requests safely, Host/Origin checks and the connection cap live in transport.py.
Chat generations take turns fairly across clients (the ``X-Labkit-Client`` header) in fairqueue.py;
a full queue is Ollama's 503 "server busy".
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any

from labkit.services.modelserver import transport
from labkit.services.modelserver.access import allowed_origins
from labkit.services.modelserver.chat_api import EngineError, chat, chat_stream
from labkit.services.modelserver.convert import RequestError, check_chat_request, check_types, created_at, ollama_stats
from labkit.services.modelserver.fairqueue import CLIENT_HEADER, MAX_QUEUE, FairQueue, QueueFull, client_label
from labkit.services.modelserver.registry import (
    MODELS,
    ModelFailed,
    ModelInfo,
    ModelLoading,
    ModelNotFound,
    Registry,
    e5_weights,
)
from labkit.services.modelserver.transport import ClientGone, HttpError, JsonHandler
from labkit.services.modelserver.weights import model_file

__all__ = ["VERSION", "make_server", "canonical_name"]

VERSION = "0.6.5-labkit"  # raised when the served models or endpoints change (0.6.5: logprobs on /api/chat)
log = logging.getLogger("labkit.services.modelserver")
_ERRORS: dict[type[Exception], int] = {
    ModelNotFound: 404, RequestError: 400, EngineError: 400, ModelLoading: 503, ModelFailed: 500,
}
_ERROR_TYPES = tuple(_ERRORS)
_THINK_LEVELS = ("high", "medium", "low")


def canonical_name(model: str) -> str:
    """Ollama's canonical model name (types/model/name.go): host, namespace and tag filled in as ``ParseName`` does."""
    rest, tag = model, "latest"
    if ":" in model.rsplit("/", 1)[-1]:
        rest, tag = model.rsplit(":", 1)
    parts = rest.split("/")
    parts = ["registry.ollama.ai", "library", *parts] if len(parts) == 1 else (
        ["registry.ollama.ai", *parts] if len(parts) == 2 else parts)
    return f"{'/'.join(parts)}:{tag}"


def _details(info: ModelInfo) -> dict[str, Any]:
    return {"parent_model": "", "format": "gguf", "family": info.family, "families": [info.family],
            "parameter_size": info.parameter_size, "quantization_level": info.quantization}


def _thinks(value: Any) -> bool:
    """Whether a request's `think` asks for thinking, validated as Ollama's ThinkValue does."""
    if value is None or isinstance(value, bool):
        return bool(value)
    if isinstance(value, str):
        if value not in _THINK_LEVELS:
            raise RequestError(f'invalid think value: {json.dumps(value)} (must be "high", "medium", "low", true, or false)')
        return True
    raise RequestError('think must be a boolean or string ("high", "medium", "low", true, or false)')


def _listing(info: ModelInfo) -> dict[str, Any]:
    path = model_file(info.gguf) if info.gguf else e5_weights()
    size = path.stat().st_size if path is not None and path.is_file() else 0
    return {"name": info.name, "model": info.name, "modified_at": "2026-01-01T00:00:00Z", "size": size,
            "digest": info.digest, "details": _details(info)}


class Handler(JsonHandler):
    """One connection's requests; the registry lives on the server object (plumbing in transport.py)."""

    server: ModelServer

    def _routes(self) -> dict[str, dict[str, Callable[[], None]]]:
        read = {"GET": self._root, "HEAD": self._root}
        return {"/": read, "/api/version": {"GET": self._version, "HEAD": self._version},
                "/api/tags": {"GET": self._tags, "HEAD": self._tags}, "/api/ps": {"GET": self._ps},
                "/api/chat": {"POST": self._chat}, "/api/embed": {"POST": self._embed},
                "/api/embeddings": {"POST": self._embeddings}, "/api/show": {"POST": self._show},
                "/api/pull": {"POST": self._pull}, "/api/labkit/queue": {"GET": self._queue}}

    def _body(self) -> dict[str, Any]:
        body = self.json_body()
        if not isinstance(body, dict):
            raise RequestError("request body must be a JSON object")
        return body

    def respond(self) -> None:
        """Route the request (404 for an unknown path, 405 for a wrong method) and map errors to statuses."""
        methods = self._routes().get(self.path.split("?")[0].rstrip("/") or "/")
        if methods is None:
            self.send_json(404, {"error": f"{self.command} {self.path[:200]} is not served here; endpoints: GET / "
                                          "/api/version /api/tags /api/ps /api/labkit/queue, POST /api/chat /api/embed "
                                          "/api/embeddings /api/show /api/pull"})
            return
        route = methods.get(self.command)
        if route is None:  # gin's HandleMethodNotAllowed (routes.go L1481)
            self._headers_out.append(("Allow", ", ".join(methods)))
            self.send_json(405, {"error": f"method {self.command} not allowed for {self.path[:200]}; "
                                          f"use {' or '.join(methods)}"})
            return
        try:
            route()
        except HttpError as exc:
            self.fail(exc.status, exc.message)
        except QueueFull:
            self.fail(503, transport.BUSY)  # Ollama's words when its queue is full, with its status
        except _ERROR_TYPES as exc:
            self.fail(_ERRORS[type(exc)], str(exc))
        except (ClientGone, ConnectionAbortedError):  # the latter: it left the chat queue
            log.info("client closed the connection during %s", self.path)
            self.close_connection = True
        except Exception as exc:
            log.exception("error in %s", self.path)
            self.fail(500, f"internal error: {exc}")

    # --- endpoints --------------------------------------------------------------
    def _root(self) -> None:
        self.send_json(200, b"Ollama is running", "text/plain; charset=utf-8")

    def _version(self) -> None:
        self.send_json(200, {"version": VERSION})

    def _queue(self) -> None:
        self.send_json(200, self.server.queue.snapshot())

    def _tags(self) -> None:
        self.send_json(200, {"models": [_listing(info) for info in MODELS.values()]})

    def _ps(self) -> None:
        models = [dict(_listing(i), expires_at="2999-01-01T00:00:00Z", size_vram=0,
                       context_length=self.server.registry.window(i))
                  for i in self.server.registry.loaded()]
        self.send_json(200, {"models": models})

    def _show(self) -> None:
        body = self._body()
        check_types(body, "ShowRequest", {"model": (str, "string"), "name": (str, "string")})
        info = self.server.registry.info(body.get("model") or body.get("name") or "")
        self.send_json(200, {"modelfile": "", "parameters": "", "template": "", "license": "",
                             "details": _details(info), "capabilities": info.capabilities,
                             "modified_at": "2026-01-01T00:00:00Z",
                             "model_info": {"general.architecture": info.family,
                                            f"{info.family}.context_length": info.context_length,
                                            f"{info.family}.embedding_length": info.embedding_length}})

    def _pull(self) -> None:
        body = self._body()
        check_types(body, "PullRequest", {"model": (str, "string"), "name": (str, "string"), "stream": (bool, "bool")})
        name = body.get("model") or body.get("name") or ""
        if name not in MODELS:
            self.send_json(404, {"error": f"model '{name}' cannot be pulled: this lab server cannot download "
                                          f"weights; it has: {', '.join(MODELS)}. For other models run a real "
                                          "Ollama and set OLLAMA_HOST."})
            return
        if body.get("stream", True):
            self.start_stream()
            for status in ("pulling manifest", "verifying sha256 digest", "success"):
                self.write_line({"status": status})
            self.end_stream()
        else:
            self.send_json(200, {"status": "success"})

    def _embedding_engine(self, name: str) -> tuple[Any, int]:
        if self.server.registry.info(name).kind != "embed":
            raise RequestError(f"{name} does not support embedding")  # Ollama's capability error
        return self.server.registry.engine(name)

    def _embed(self) -> None:
        started, body = time.monotonic(), self._body()
        check_types(body, "EmbedRequest", {"model": (str, "string"), "options": (dict, "map[string]interface {}")})
        name, texts = body.get("model") or "", body.get("input", "")
        texts = [texts] if isinstance(texts, str) else texts
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            raise RequestError("'input' must be a string or a list of strings")
        engine, load_ns = self._embedding_engine(name)
        vectors, tokens = engine.embed(texts) if texts else ([], 0)
        total_ns = int((time.monotonic() - started) * 1e9)
        self.send_json(200, {"model": name, "embeddings": vectors, "total_duration": total_ns,
                             "load_duration": load_ns, "prompt_eval_count": tokens})

    def _embeddings(self) -> None:
        body = self._body()
        check_types(body, "EmbeddingRequest", {"model": (str, "string"), "prompt": (str, "string")})
        engine, _ = self._embedding_engine(body.get("model") or "")
        vectors, _ = engine.embed([body.get("prompt") or ""])
        self.send_json(200, {"embedding": vectors[0]})

    def _chat(self) -> None:
        started, body = time.monotonic(), self._body()
        check_chat_request(body)  # wrong types are refused before any model loads, as Ollama's JSON decoding does
        name = body.get("model") or ""
        thinks = _thinks(body.get("think"))  # Ollama's order: think's value, the model, thinking, the kind
        info = self.server.registry.info(name)
        if thinks:
            raise RequestError(f'"{name}" does not support thinking')
        if info.kind != "chat":
            raise RequestError(f'"{name}" does not support chat')
        if body.get("tools") and not info.tools:  # routes.go: scheduleRunner's capability check, by canonical name
            raise RequestError(f"{canonical_name(name)} does not support tools")
        engine, load_ns = self.server.registry.engine(name)
        head = {"model": name}
        client = client_label(self.headers.get(CLIENT_HEADER))
        waited = 0.0

        def finish(done_reason: str, results: list[dict[str, Any]]) -> dict[str, Any]:
            stats, total = ollama_stats(results), time.monotonic() - started
            log.info("chat %s for %s: %.1f s (%.1f s of it in the queue); prompt %d tok in %.1f s, generated "
                     "%d tok in %.1f s", name, client, total, waited, stats["prompt_eval_count"],
                     stats["prompt_eval_duration"] / 1e9, stats["eval_count"], stats["eval_duration"] / 1e9)
            return dict(head, created_at=created_at(), message={"role": "assistant", "content": ""}, done=True,
                        done_reason=done_reason, total_duration=int(total * 1e9), load_duration=load_ns, **stats)

        if not body.get("messages"):  # Ollama's way to load a model
            self.send_json(200, finish("load", []))
            return
        with self.server.queue.turn(client, name, gone=self.client_gone) as ticket:
            waited = ticket.waited
            if not body.get("stream", True):
                message, done_reason, results, logprobs = chat(engine, body)
                self.send_json(200, dict(finish(done_reason, results), message=message,
                                         **({"logprobs": logprobs} if logprobs else {})))
                return
            self._chat_stream(engine, body, head, finish)

    def _chat_stream(self, engine: Any, body: dict[str, Any], head: dict[str, Any],
                     finish: Callable[[str, list[dict[str, Any]]], dict[str, Any]]) -> None:
        """Stream the answer of a chat request whose turn has come."""

        def emit(content: str, calls: list[dict[str, Any]], logprobs: list[dict[str, Any]]) -> None:
            if not self._streaming:
                self.start_stream()
            message = {"role": "assistant", "content": content, **({"tool_calls": calls} if calls else {})}
            self.write_line(dict(head, created_at=created_at(), message=message, done=False,
                                 **({"logprobs": logprobs} if logprobs else {})))

        # An error after the stream has begun becomes its last line ({"error": ...}): see respond().
        done_reason, results, rest = chat_stream(engine, body, emit)
        if not self._streaming:
            self.start_stream()
        self.write_line(dict(finish(done_reason, results), **({"logprobs": rest} if rest else {})))
        self.end_stream()


class ModelServer(transport.CappedServer):
    """The capped threading HTTP server carrying the model registry and the chat queue."""

    def __init__(self, address: tuple[str, int], registry: Registry, queue: FairQueue, **limits: Any):
        super().__init__(address, Handler, **limits)
        self.registry, self.queue = registry, queue


def make_server(host: str, port: int, registry: Registry, *, ollama_origins: str = "",
                max_connections: int = transport.MAX_CONNECTIONS, read_timeout: float = transport.READ_TIMEOUT,
                idle_timeout: float = transport.IDLE_TIMEOUT, max_queue: int = MAX_QUEUE) -> ModelServer:
    """An HTTP server on host:port answering the Ollama API from registry.

    ollama_origins: extra allowed browser origins, comma separated, as Ollama's OLLAMA_ORIGINS.
    max_connections: connections served at once (the rest get 503); the timeouts are in seconds.
    max_queue: chat requests that may wait for their turn, as Ollama's OLLAMA_MAX_QUEUE (the rest get 503).
    """
    return ModelServer((host, port), registry, FairQueue(max_queue), origins=allowed_origins(ollama_origins),
                       max_connections=max_connections, read_timeout=read_timeout, idle_timeout=idle_timeout)
