"""FakeOllama: a FAKE Ollama 0.13 server for the contract tests (Docker and Ollama cannot run here).

It is a tiny threaded HTTP server on 127.0.0.1 (a random port) that answers the endpoints labkit
uses with bodies taken from Ollama 0.13's own documentation and source: every body lives in
``tests/ollama_contract/*.json`` with a ``_source`` key citing file, tag and lines; ``_source``
keys are stripped before answering. The error paths (404 model not found, 400 "does not support
tools/thinking/chat") follow the order of checks in ``server/routes.go`` (ChatHandler,
scheduleRunner, handleScheduleError) and ``server/images.go`` (CheckCapabilities), driven by the
capabilities configured per model, so a test sets up a model without tools rather than a canned error.

It records every request (method, path, JSON body) and checks each body against the request types
of ``api/types.go`` (``request_fields.json``): a key that is no field of ChatRequest, EmbedRequest,
ShowRequest (or of their nested Message, Tool, ... types), an unknown option, or a value of the
wrong JSON type is recorded in ``violations``. Ollama ignores unknown keys silently (Go's
encoding/json; Options.FromMap only logs), so such a typo would otherwise go unnoticed.

It is not a model: chat replies come from the fixture chosen per test, embeddings are unit vectors
derived from a hash of the text. A chat request with ``"logprobs": true`` gets the ``logprobs`` of
``chat_logprobs.json`` (or the test's own, same shape), cut to its ``top_logprobs``, as Ollama ≥ 0.12.11
answers; ``serves_logprobs=False`` plays an older Ollama, which ignores the two fields. It does not
reproduce Ollama's streaming beyond one NDJSON line.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

__all__ = ["FIXTURES", "FakeOllama", "Recorded", "canonical_name", "fixture", "fixture_source", "request_violations"]

FIXTURES = Path(__file__).resolve().parent / "ollama_contract"
THINK_LEVELS = ("high", "medium", "low")  # api/types.go ThinkValue.IsValid


def _strip_sources(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_sources(v) for k, v in value.items() if k != "_source"}
    if isinstance(value, list):
        return [_strip_sources(v) for v in value]
    return value


def _raw(name: str) -> Any:
    return json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))


def fixture(name: str) -> Any:
    """The body of ``tests/ollama_contract/<name>.json`` without its ``_source`` keys (a fresh copy)."""
    return _strip_sources(_raw(name))


def fixture_source(name: str) -> str:
    """The top-level ``_source`` citation of a fixture file."""
    return str(_raw(name)["_source"])


def canonical_name(model: str) -> str:
    """Ollama's canonical model name, as ``model.ParseName(model).String()`` prints it.

    types/model/name.go (v0.13.0) L38-40 and L204-220: host ``registry.ollama.ai``, namespace
    ``library`` and tag ``latest`` fill what the short name leaves out.
    """
    rest, tag = model, "latest"
    if ":" in model.rsplit("/", 1)[-1]:
        rest, tag = model.rsplit(":", 1)
    parts = rest.split("/")
    if len(parts) == 1:
        parts = ["registry.ollama.ai", "library", *parts]
    elif len(parts) == 2:
        parts = ["registry.ollama.ai", *parts]
    return f"{'/'.join(parts)}:{tag}"


# --- request validation against api/types.go -------------------------------------------------------------------

_STRUCTS: dict[str, dict[str, str]] = {name: dict(spec["fields"]) for name, spec in fixture("request_fields").items()}
_OPTIONS = {k: v for k, v in {**_STRUCTS["Options"], **_STRUCTS["Runner"]}.items() if not k.startswith("<")}
_LOOSE = {"any", "json.RawMessage", "Duration", "[]any", "[]ImageData"}  # accepted as any JSON value here


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_value(go_type: str, value: Any, where: str, key: str, out: list[str]) -> None:
    if value is None or go_type in _LOOSE:
        return
    if key == "options" and go_type == "map[string]any":  # decoded by Options.FromMap (types.go L784-850)
        if not isinstance(value, dict):
            out.append(f"{where}: options must be an object, got {value!r}")
            return
        for name, item in value.items():
            if name not in _OPTIONS:
                out.append(f"{where}.{name}: not an Ollama option (api/types.go Options/Runner); "
                           "Ollama logs 'invalid option provided' and ignores it")
            else:
                _check_value(_OPTIONS[name], item, f"{where}.{name}", name, out)
        return
    wrong = {
        "string": lambda v: not isinstance(v, str),
        "bool": lambda v: not isinstance(v, bool),
        "int": lambda v: not _is_number(v) or (key not in _OPTIONS and not float(v).is_integer()),
        "float32": lambda v: not _is_number(v),
        "ThinkValue": lambda v: not (isinstance(v, bool) or v in THINK_LEVELS),
        "PropertyType": lambda v: not (isinstance(v, str) or (isinstance(v, list) and all(isinstance(i, str) for i in v))),
        "ToolCallFunctionArguments": lambda v: not isinstance(v, dict),
        "map[string]any": lambda v: not isinstance(v, dict),
        "[]string": lambda v: not (isinstance(v, list) and all(isinstance(i, str) for i in v)),
    }.get(go_type)
    if wrong is not None:
        if wrong(value):
            out.append(f"{where}: {value!r} is not a Go {go_type}")
        return
    element = {"Tools": "Tool"}.get(go_type, go_type.removeprefix("[]"))
    if go_type.startswith("[]") or go_type == "Tools":
        if not isinstance(value, list):
            out.append(f"{where}: must be a JSON array ({go_type}), got {value!r}")
            return
        for i, item in enumerate(value):
            _check_struct(element, item, f"{where}[{i}]", out)
    elif go_type.startswith("map[string]"):
        if not isinstance(value, dict):
            out.append(f"{where}: must be a JSON object ({go_type}), got {value!r}")
            return
        for name, item in value.items():
            _check_struct(go_type.removeprefix("map[string]"), item, f"{where}.{name}", out)
    elif go_type in _STRUCTS:
        _check_struct(go_type, value, where, out)
    else:
        raise KeyError(f"request_fields.json uses a Go type this fake does not know: {go_type}")


def _check_struct(struct: str, value: Any, where: str, out: list[str]) -> None:
    if not isinstance(value, dict):
        out.append(f"{where}: must be a JSON object (api.{struct}), got {value!r}")
        return
    fields = _STRUCTS[struct]
    for key, item in value.items():
        if key not in fields:
            same = [f for f in fields if f.lower() == key.lower()]
            effect = (f"Go matches it to {same[0]!r} only case-insensitively; send the tag exactly" if same
                      else "Ollama ignores it silently")
            out.append(f"{where}.{key}: not a field of api.{struct} (api/types.go, v0.13.0); {effect}")
            continue
        _check_value(fields[key], item, f"{where}.{key}", key, out)


def request_violations(struct: str, body: Any) -> list[str]:
    """What in `body` is not part of Ollama 0.13's request type `struct` (``ChatRequest``, ``EmbedRequest``, ...)."""
    out: list[str] = []
    _check_struct(struct, body, struct, out)
    return out


# --- the server --------------------------------------------------------------------------------------------------

@dataclass
class Recorded:
    """One request the fake received: method, path, JSON body (None for GET), the status it answered."""

    method: str
    path: str
    body: Any
    status: int = 0
    violations: list[str] = field(default_factory=list)


class FakeOllama:
    """A FAKE Ollama 0.13 HTTP server (see the module docstring); use it as a context manager.

    `models` maps model names to Ollama capabilities (default: ``models.json``); `chat_reply` names
    the chat fixture answered on success (``chat_plain``, ``chat_tool_calls``, ``chat_thinking_only``,
    ``chat_inline_think``, ``chat_logprobs``); `chat_message` replaces fields of that reply's ``message``;
    `logprobs` replaces the ``logprobs`` answered when a request asks for them (default: those of
    ``chat_logprobs.json``); `serves_logprobs` False plays an Ollama older than 0.12.11; `loaded` lists
    the models ``/api/ps`` reports (default: all).
    """

    def __init__(
        self,
        models: Mapping[str, Sequence[str]] | None = None,
        *,
        chat_reply: str = "chat_plain",
        chat_message: Mapping[str, Any] | None = None,
        logprobs: Sequence[Mapping[str, Any]] | None = None,
        serves_logprobs: bool = True,
        loaded: Iterable[str] | None = None,
    ) -> None:
        configured = models if models is not None else fixture("models")["models"]
        self.models: dict[str, list[str]] = {name: list(caps) for name, caps in configured.items()}
        self.chat_reply = chat_reply
        self.chat_message = dict(chat_message or {})
        self.logprobs = copy.deepcopy(list(logprobs)) if logprobs is not None else fixture("chat_logprobs")["logprobs"]
        self.serves_logprobs = serves_logprobs
        self.loaded = list(loaded) if loaded is not None else list(self.models)
        self.requests: list[Recorded] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02},
                                        name="FakeOllama", daemon=True)
        self._thread.start()

    # -- public --
    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def violations(self) -> list[str]:
        """Every contract violation in every request so far, prefixed with the request."""
        with self._lock:
            return [f"{r.method} {r.path}: {v}" for r in self.requests for v in r.violations]

    def bodies(self, path: str) -> list[Any]:
        """JSON bodies of the requests to `path`, in arrival order."""
        with self._lock:
            return [r.body for r in self.requests if r.path == path]

    def paths(self) -> list[str]:
        with self._lock:
            return [f"{r.method} {r.path}" for r in self.requests]

    @staticmethod
    def vector(text: str, dimensions: int = 10) -> list[float]:
        """The fake embedding of `text`: a unit vector from its SHA-256 (Ollama normalises, routes.go L781-792)."""
        digest = hashlib.sha256(text.encode("utf-8")).digest()
        raw = [(digest[i] - 127.5) / 127.5 for i in range(dimensions)]
        norm = math.sqrt(sum(x * x for x in raw)) or 1.0
        return [x / norm for x in raw]

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> FakeOllama:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # -- answers, by endpoint --
    def _error(self, key: str, **values: str) -> tuple[int, Any]:
        spec = fixture("errors")[key]
        return int(spec["status"]), {"error": spec["template"].format(**values)}

    def _entry(self, template: dict[str, Any], name: str) -> dict[str, Any]:
        entry = copy.deepcopy(template)
        entry["name"] = entry["model"] = name
        return entry

    def answer(self, method: str, path: str, body: Any, record: Recorded) -> tuple[int, Any]:
        """(status, JSON body) for one request, as Ollama 0.13 answers it."""
        route = (method, path)
        if route == ("GET", "/api/version"):
            return 200, fixture("version")
        if route == ("GET", "/api/tags"):
            template = fixture("tags")["models"][0]
            return 200, {"models": [self._entry(template, name) for name in self.models]}
        if route == ("GET", "/api/ps"):
            template = fixture("ps")["models"][0]
            return 200, {"models": [self._entry(template, name) for name in self.loaded]}
        if route == ("POST", "/api/show"):
            return self._show(body, record)
        if route == ("POST", "/api/embed"):
            return self._embed(body, record)
        if route == ("POST", "/api/chat"):
            return self._chat(body, record)
        return 404, "404 page not found"  # gin's answer to an unknown route

    def _show(self, body: Any, record: Recorded) -> tuple[int, Any]:
        record.violations += request_violations("ShowRequest", body)
        name = (body or {}).get("model") or (body or {}).get("name")
        if not name:
            return self._error("model_required")
        if name not in self.models:
            return self._error("show_not_found", model=name)
        shown = fixture("show")
        shown["capabilities"] = list(self.models[name])
        return 200, shown

    def _embed(self, body: Any, record: Recorded) -> tuple[int, Any]:
        record.violations += request_violations("EmbedRequest", body)
        name, given = body.get("model", ""), body.get("input")
        if isinstance(given, str):
            texts = [given] if given else []
        elif isinstance(given, list) and all(isinstance(t, str) for t in given):
            texts = list(given)
        elif given is None:
            texts = []
        else:
            return self._error("embed_invalid_input")
        if name not in self.models:
            return self._error("embed_not_found", model=name)
        reply = fixture("embed")
        dimensions = len(reply["embeddings"][0])
        reply.update(model=name, embeddings=[self.vector(t, dimensions) for t in texts])
        return 200, reply

    def _chat(self, body: Any, record: Recorded) -> tuple[int, Any]:
        record.violations += request_violations("ChatRequest", body)
        name, think = body.get("model", ""), body.get("think")
        if isinstance(think, str) and think not in THINK_LEVELS:
            return self._error("think_invalid_level", value=think)
        if think is not None and not isinstance(think, (bool, str)):
            return self._error("think_invalid")
        top = body.get("top_logprobs") or 0
        if self.serves_logprobs and not 0 <= top <= 20:  # routes.go L1856-1859, before the model is looked up
            return self._error("top_logprobs_range")
        if name not in self.models:
            return self._error("chat_not_found", model=name)
        has = self.models[name]
        wanted = ["completion"] + (["tools"] if body.get("tools") else [])
        if "thinking" in has:
            wanted.append("thinking")
        elif think is True or think in THINK_LEVELS:
            return self._error("chat_no_thinking", model=name)
        missing = [cap for cap in wanted if cap not in has]
        if "completion" in missing:
            return self._error("chat_no_completion", model=name)
        if missing:
            return self._error("chat_missing_capability", name=canonical_name(name), missing="\n".join(missing))
        reply = fixture(self.chat_reply)
        reply["model"] = name
        reply["message"].update(copy.deepcopy(self.chat_message))
        reply.pop("logprobs", None)
        if body.get("logprobs") and self.serves_logprobs:  # one entry per token, the k most likely alternatives
            reply["logprobs"] = [dict({k: v for k, v in entry.items() if k != "top_logprobs"},
                                      **({"top_logprobs": entry["top_logprobs"][:top]} if top else {}))
                                 for entry in copy.deepcopy(self.logprobs)]
        if not body.get("messages"):  # routes.go L2021-2030: no messages only loads the model
            reply = {"model": name, "created_at": reply["created_at"], "message": {"role": "assistant", "content": ""},
                     "done_reason": "load", "done": True}
        return 200, reply

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                record = Recorded(self.command, self.path.split("?", 1)[0], None)
                with fake._lock:
                    fake.requests.append(record)
                try:
                    record.body = json.loads(raw) if raw else None
                except json.JSONDecodeError as err:
                    record.violations.append(f"body is not JSON: {err}")
                    status, reply = 400, {"error": str(err)}
                else:
                    if self.command == "POST" and record.body is None:
                        status, reply = 400, {"error": "missing request body"}  # routes.go: io.EOF on bind
                    elif self.command == "POST" and not isinstance(record.body, dict):
                        record.violations.append("body is not a JSON object")
                        status, reply = 400, {"error": "json: cannot unmarshal into a request object"}
                    else:
                        status, reply = fake.answer(self.command, record.path, record.body, record)
                record.status = status
                streaming = record.path == "/api/chat" and status == 200 and record.body.get("stream") is not False
                data = (reply if isinstance(reply, str) else json.dumps(reply, ensure_ascii=False)).encode("utf-8")
                if streaming:  # Ollama streams NDJSON unless "stream": false; the whole reply is one line here
                    record.violations.append("stream is not false: Ollama 0.13 streams NDJSON, labkit reads one object")
                    data += b"\n"
                self.send_response(status)
                kind = "application/x-ndjson" if streaming else "application/json; charset=utf-8"
                self.send_header("Content-Type", kind if not isinstance(reply, str) else "text/plain")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_DELETE = _serve  # noqa: N815 (http.server's naming)

            def log_message(self, *_: Any) -> None:  # quiet: pytest shows failures, not access logs
                return

        return Handler
