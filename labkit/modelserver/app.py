"""HTTP routing of the Ollama-compatible API, standard library only (behind every notebook from 01_corpus on).

Endpoints: GET / /api/version /api/tags /api/ps; POST /api/show /api/embed /api/embeddings
/api/chat /api/pull. Errors are JSON {"error": ...} so `ollama.ResponseError` shows them.
A request the model cannot serve gets Ollama 0.13's 400 answers: `"NAME" does not support
thinking` for `think` on these models (none can think), `"NAME" does not support chat` for
chat with an embedding model, and `NAME does not support embedding` for embedding with a
chat model (where Ollama itself would try to embed with it).
"""

from __future__ import annotations

import json
import logging
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .chat import EngineError, chat, chat_stream
from .convert import RequestError, created_at, ollama_stats
from .registry import MODELS, ModelFailed, ModelInfo, ModelLoading, ModelNotFound, Registry
from .weights import model_file

__all__ = ["VERSION", "make_server"]

VERSION = "0.6.3-labkit"
log = logging.getLogger("labkit.modelserver")
_ERRORS: dict[type[Exception], int] = {
    ModelNotFound: 404, RequestError: 400, EngineError: 400, ModelLoading: 503, ModelFailed: 500,
}
_ERROR_TYPES = tuple(_ERRORS)
_THINK_LEVELS = ("high", "medium", "low")


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
    path = model_file(info.gguf) if info.gguf else None
    size = path.stat().st_size if path is not None and path.is_file() else 0
    return {"name": info.name, "model": info.name, "modified_at": "2026-01-01T00:00:00Z", "size": size,
            "digest": info.digest, "details": _details(info)}


class Handler(BaseHTTPRequestHandler):
    """One request; the registry lives on the server object."""

    protocol_version = "HTTP/1.1"
    server: ModelServer
    _raw: bytes = b""  # the request body, read once per request

    # --- plumbing -------------------------------------------------------------
    def log_message(self, format: str, *args: Any) -> None:
        log.info("%s %s", self.address_string(), format % args)

    def _send(self, status: int, payload: Any, content_type: str = "application/json") -> None:
        data = payload if isinstance(payload, bytes) else json.dumps(payload, ensure_ascii=False).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _write_line(self, payload: dict[str, Any]) -> None:
        data = json.dumps(payload, ensure_ascii=False).encode() + b"\n"
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")

    def _body(self) -> dict[str, Any]:
        try:
            body = json.loads(self._raw or b"{}")
        except ValueError:
            raise RequestError("request body must be JSON") from None
        if not isinstance(body, dict):
            raise RequestError("request body must be a JSON object")
        return body

    def _dispatch(self, routes: dict[str, Any]) -> None:
        self._raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))  # always drain the body
        route = routes.get(self.path.split("?")[0].rstrip("/") or "/")
        if route is None:
            self._send(404, {"error": f"{self.command} {self.path} is not served here; endpoints: GET / "
                                      "/api/version /api/tags /api/ps, POST /api/chat /api/embed /api/embeddings "
                                      "/api/show /api/pull"})
            return
        try:
            route()
        except _ERROR_TYPES as exc:
            self._send(_ERRORS[type(exc)], {"error": str(exc)})
        except (BrokenPipeError, ConnectionResetError):
            log.info("client closed the connection during %s", self.path)
            self.close_connection = True
        except Exception as exc:
            log.exception("error in %s", self.path)
            self._send(500, {"error": f"internal error: {exc}"})

    def do_GET(self) -> None:
        self._dispatch({"/": self._root, "/api/version": self._version, "/api/tags": self._tags, "/api/ps": self._ps})

    def do_POST(self) -> None:
        self._dispatch({"/api/chat": self._chat, "/api/embed": self._embed, "/api/embeddings": self._embeddings,
                        "/api/show": self._show, "/api/pull": self._pull})

    # --- endpoints --------------------------------------------------------------
    def _root(self) -> None:
        self._send(200, b"Ollama is running", "text/plain; charset=utf-8")

    def _version(self) -> None:
        self._send(200, {"version": VERSION})

    def _tags(self) -> None:
        self._send(200, {"models": [_listing(info) for info in MODELS.values()]})

    def _ps(self) -> None:
        models = [dict(_listing(i), expires_at="2999-01-01T00:00:00Z", size_vram=0,
                       context_length=self.server.registry.window(i))
                  for i in self.server.registry.loaded()]
        self._send(200, {"models": models})

    def _show(self) -> None:
        body = self._body()
        info = self.server.registry.info(str(body.get("model") or body.get("name") or ""))
        capabilities = ["completion", "tools"] if info.kind == "chat" else ["embedding"]
        self._send(200, {"modelfile": "", "parameters": "", "template": "", "license": "",
                         "details": _details(info), "capabilities": capabilities, "modified_at": "2026-01-01T00:00:00Z",
                         "model_info": {"general.architecture": info.family,
                                        f"{info.family}.context_length": info.context_length,
                                        f"{info.family}.embedding_length": info.embedding_length}})

    def _pull(self) -> None:
        body = self._body()
        name = str(body.get("model") or body.get("name") or "")
        if name not in MODELS:
            self._send(404, {"error": f"model '{name}' cannot be pulled: this lab server cannot download weights; "
                                      f"it has: {', '.join(MODELS)}. For other models run a real Ollama "
                                      "and set OLLAMA_HOST."})
            return
        if body.get("stream", True):
            self._start_stream()
            for status in ("pulling manifest", "verifying sha256 digest", "success"):
                self._write_line({"status": status})
            self._end_stream()
        else:
            self._send(200, {"status": "success"})

    def _embedding_engine(self, name: str) -> tuple[Any, int]:
        if self.server.registry.info(name).kind != "embed":
            raise RequestError(f"{name} does not support embedding")  # Ollama's capability error
        return self.server.registry.engine(name)

    def _embed(self) -> None:
        started, body = time.monotonic(), self._body()
        name, texts = str(body.get("model") or ""), body.get("input", "")
        texts = [texts] if isinstance(texts, str) else texts
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            raise RequestError("'input' must be a string or a list of strings")
        engine, load_ns = self._embedding_engine(name)
        vectors, tokens = engine.embed(texts) if texts else ([], 0)
        total_ns = int((time.monotonic() - started) * 1e9)
        self._send(200, {"model": name, "embeddings": vectors, "total_duration": total_ns, "load_duration": load_ns,
                         "prompt_eval_count": tokens})

    def _embeddings(self) -> None:
        body = self._body()
        engine, _ = self._embedding_engine(str(body.get("model") or ""))
        vectors, _ = engine.embed([str(body.get("prompt") or "")])
        self._send(200, {"embedding": vectors[0]})

    def _chat(self) -> None:
        started, body = time.monotonic(), self._body()
        name = str(body.get("model") or "")
        thinks = _thinks(body.get("think"))  # Ollama's order: think's value, the model, thinking, the kind
        info = self.server.registry.info(name)
        if thinks:
            raise RequestError(f'"{name}" does not support thinking')
        if info.kind != "chat":
            raise RequestError(f'"{name}" does not support chat')
        engine, load_ns = self.server.registry.engine(name)
        head = {"model": name}

        def finish(done_reason: str, results: list[dict[str, Any]]) -> dict[str, Any]:
            stats, total = ollama_stats(results), time.monotonic() - started
            log.info("chat %s: %.1f s; prompt %d tok in %.1f s, generated %d tok in %.1f s", name, total,
                     stats["prompt_eval_count"], stats["prompt_eval_duration"] / 1e9, stats["eval_count"],
                     stats["eval_duration"] / 1e9)
            return dict(head, created_at=created_at(), message={"role": "assistant", "content": ""}, done=True,
                        done_reason=done_reason, total_duration=int(total * 1e9), load_duration=load_ns, **stats)

        if not body.get("messages"):  # Ollama's way to load a model
            self._send(200, finish("load", []))
            return
        if not body.get("stream", True):
            message, done_reason, results = chat(engine, body)
            self._send(200, dict(finish(done_reason, results), message=message))
            return
        started_stream: list[bool] = []

        def emit(content: str, calls: list[dict[str, Any]]) -> None:
            if not started_stream:
                self._start_stream()
                started_stream.append(True)
            message = {"role": "assistant", "content": content, **({"tool_calls": calls} if calls else {})}
            self._write_line(dict(head, created_at=created_at(), message=message, done=False))

        try:
            done_reason, results = chat_stream(engine, body, emit)
        except _ERROR_TYPES as exc:
            if not started_stream:
                raise
            self._write_line({"error": str(exc)})  # headers already sent: Ollama's in-stream error
            self._end_stream()
            return
        if not started_stream:
            self._start_stream()
        self._write_line(finish(done_reason, results))
        self._end_stream()


class ModelServer(ThreadingHTTPServer):
    """ThreadingHTTPServer carrying the model registry."""

    daemon_threads = True
    request_queue_size = 64

    def __init__(self, address: tuple[str, int], registry: Registry):
        super().__init__(address, Handler)
        self.registry = registry


def make_server(host: str, port: int, registry: Registry) -> ModelServer:
    """An HTTP server on host:port answering the Ollama API from registry."""
    return ModelServer((host, port), registry)
