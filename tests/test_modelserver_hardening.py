"""The model server under malformed, hostile and stalled clients; interrupted weight joins.

Most tests run a server in this process (`make_server` on a free port, no model is ever loaded:
every request here is refused before a model is needed), with short timeouts and a small
connection cap. The load test starts a private `python -m labkit.services.modelserver` and ends with a
real embedding, so it is marked `services`. Host and Origin rules are Ollama 0.13's
(labkit/services/modelserver/access.py cites the Go source).
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import ollama
import pytest

from labkit.services.modelserver import access, weights
from labkit.services.modelserver.app import VERSION, Handler, ModelServer, make_server
from labkit.services.modelserver.registry import Registry
from labkit.services.modelserver.transport import MAX_BODY_BYTES
from labkit.services.pgembedded import free_port

CHAT = "qwen2.5-coder:0.5b"
EMBED = "multilingual-e5-small:q4"
GUARD = 30.0  # seconds a socket read may block before the test gives up (a guard, not an assertion)


# --- helpers --------------------------------------------------------------------------
@contextlib.contextmanager
def running(registry: Registry | None = None, **limits: Any) -> Iterator[ModelServer]:
    """A model server in a thread of this process on a free port."""
    limits = {"read_timeout": 1.0, "idle_timeout": 2.0, **limits}
    server = make_server("127.0.0.1", 0, registry or Registry(), **limits)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def server() -> Iterator[ModelServer]:
    """One server for the whole module: each test also shows it still serves after the others."""
    with running() as srv:
        yield srv


def request(method: str, path: str, body: bytes | None = None, *, host: str | None = "127.0.0.1",
            headers: tuple[str, ...] = (), version: str = "HTTP/1.1") -> bytes:
    """Raw request bytes; a Content-Length is added for a body unless headers set the framing."""
    lines = [f"{method} {path} {version}"]
    if host is not None:
        lines.append(f"Host: {host}")
    lines += headers
    if body is not None and not any(h.lower().startswith(("content-length", "transfer-encoding")) for h in headers):
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b"")


def post_json(path: str, payload: Any) -> bytes:
    return request("POST", path, json.dumps(payload).encode())


def exchange(port: int, raw: bytes, *, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    """Send raw bytes on a new connection and read one response: (status, headers, body)."""
    with socket.create_connection(("127.0.0.1", port), timeout=GUARD) as sock:
        sock.sendall(raw)
        response = http.client.HTTPResponse(sock, method=method)
        response.begin()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()


def error_of(status_headers_body: tuple[int, dict[str, str], bytes]) -> tuple[int, str]:
    status, headers, body = status_headers_body
    assert headers["content-type"] == "application/json", (status, headers, body[:200])
    return status, json.loads(body)["error"]


def version_answers(port: int) -> bool:
    status, _, body = exchange(port, request("GET", "/api/version"))
    return status == 200 and json.loads(body) == {"version": VERSION}


# --- 1. malformed requests: the right 4xx JSON error, and the server keeps serving -------------
MSG = [{"role": "user", "content": "hi"}]
MALFORMED = {
    "huge-content-length": (request("POST", "/api/chat", headers=("Content-Length: 10000000000000",)), 413,
                            "larger than"),
    "over-the-limit": (request("POST", "/api/embed", headers=(f"Content-Length: {MAX_BODY_BYTES + 1}",)), 413,
                       "larger than"),
    "content-length-abc": (request("POST", "/api/chat", headers=("Content-Length: abc",)), 400, "Content-Length"),
    "content-length-negative": (request("POST", "/api/chat", headers=("Content-Length: -5",)), 400,
                                "Content-Length"),
    "content-length-plus": (request("POST", "/api/chat", headers=("Content-Length: +2",)) + b"{}", 400,
                            "Content-Length"),
    "content-lengths-disagree": (request("POST", "/api/show", headers=("Content-Length: 2", "Content-Length: 3"))
                                 + b"{}", 400, "Content-Length"),
    "deep-nesting": (request("POST", "/api/chat", b"[" * 100_000), 400, "nested too deeply"),
    "deep-nesting-in-object": (request("POST", "/api/embed", b'{"input": ' + b"[" * 100_000), 400,
                               "nested too deeply"),
    "not-json": (request("POST", "/api/chat", b"not json"), 400, "JSON"),
    "not-utf8": (request("POST", "/api/chat", b'{"model": "\xff\xfe"}'), 400, "JSON"),
    "nan": (request("POST", "/api/chat", b'{"model": NaN}'), 400, "NaN"),
    "body-a-list": (post_json("/api/chat", [1, 2]), 400, "JSON object"),
    "body-a-string": (post_json("/api/embed", "text"), 400, "JSON object"),
    "empty-body": (request("POST", "/api/show", b""), 400, "missing request body"),
    "tools-not-dicts": (post_json("/api/chat", {"model": CHAT, "messages": MSG, "tools": [1, "x", None]}), 400,
                        "tools[0]"),
    "tool-function-a-string": (post_json("/api/chat", {"model": CHAT, "messages": MSG,
                                                       "tools": [{"type": "function", "function": "f"}]}),
                               400, "tools[0]"),
    "tool-parameters-a-list": (post_json("/api/chat", {"model": CHAT, "messages": MSG, "tools": [
        {"function": {"name": "f", "parameters": [1]}}]}), 400, "tools[0]"),
    "tools-an-object": (post_json("/api/chat", {"model": CHAT, "messages": MSG, "tools": {"a": 1}}), 400,
                        "ChatRequest.tools"),
    "messages-a-string": (post_json("/api/chat", {"model": CHAT, "messages": "hi"}), 400, "ChatRequest.messages"),
    "message-a-number": (post_json("/api/chat", {"model": CHAT, "messages": [7]}), 400, "role"),
    "tool-calls-a-string": (post_json("/api/chat", {"model": CHAT, "messages": [
        {"role": "assistant", "content": "", "tool_calls": "get_metrics"}]}), 400, "tool_calls"),
    "tool-call-not-a-dict": (post_json("/api/chat", {"model": CHAT, "messages": [
        {"role": "assistant", "content": "", "tool_calls": [["get_metrics"]]}]}), 400, "tool_calls"),
    "tool-name-a-number": (post_json("/api/chat", {"model": CHAT, "messages": [
        {"role": "tool", "content": "7", "tool_name": 5}]}), 400, "tool_name"),
    "temperature-a-string": (post_json("/api/chat", {"model": CHAT, "messages": MSG,
                                                     "options": {"temperature": "hot"}}),
                             400, 'option "temperature" must be of type float32'),
    "seed-a-bool": (post_json("/api/chat", {"model": CHAT, "messages": MSG, "options": {"seed": True}}), 400,
                    'option "seed" must be of type integer'),
    "num-predict-huge": (post_json("/api/chat", {"model": CHAT, "messages": MSG, "options": {"num_predict": 10**30}}),
                         400, 'option "num_predict" must be of type integer'),
    "stop-a-string": (post_json("/api/chat", {"model": CHAT, "messages": MSG, "options": {"stop": "x"}}), 400,
                      'option "stop" must be of type array'),
    "options-a-list": (post_json("/api/chat", {"model": CHAT, "messages": MSG, "options": [1]}), 400,
                       "ChatRequest.options"),
    "model-a-number": (post_json("/api/chat", {"model": 5, "messages": MSG}), 400, "ChatRequest.model"),
    "stream-a-string": (post_json("/api/chat", {"model": CHAT, "messages": MSG, "stream": "yes"}), 400,
                        "ChatRequest.stream"),
    "embed-input-numbers": (post_json("/api/embed", {"model": EMBED, "input": [1, 2]}), 400, "'input'"),
    "embeddings-prompt-a-list": (post_json("/api/embeddings", {"model": EMBED, "prompt": ["x"]}), 400,
                                 "EmbeddingRequest.prompt"),
    "show-model-an-object": (post_json("/api/show", {"model": {"name": CHAT}}), 400, "ShowRequest.model"),
    "unknown-path": (request("GET", "/api/generate"), 404, "is not served here"),
    "unknown-path-post": (post_json("/v1/chat/completions", {}), 404, "is not served here"),
    "get-on-a-post-route": (request("GET", "/api/chat"), 405, "not allowed"),
    "delete": (request("DELETE", "/api/tags"), 405, "not allowed"),
    "post-on-version": (post_json("/api/version", {}), 405, "not allowed"),
    "invented-method": (request("BREW", "/api/embed"), 405, "not allowed"),
    "garbage-request-line": (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", 400, "Bad request"),
    "http-0.9": (b"GET /api/version\r\n\r\n", 400, "HTTP/0.9"),
    "http-2": (request("GET", "/", version="HTTP/2.0"), 505, "Invalid HTTP version"),
    "request-line-too-long": (request("GET", "/" + "a" * 70_000), 414, "too long"),
    "header-without-colon": (request("POST", "/api/show", headers=("Content-Length : 2",)) + b"{}", 400,
                             "malformed header"),
    "no-host-in-http-1.1": (request("GET", "/api/version", host=None), 400, "Host"),
    "two-hosts": (request("GET", "/api/version", headers=("Host: localhost",)), 400, "Host"),
    "bad-chunk-size": (request("POST", "/api/show", headers=("Transfer-Encoding: chunked",)) + b"zz\r\n{}\r\n0\r\n\r\n",
                       400, "chunked"),
    "chunks-over-the-limit": (request("POST", "/api/show", headers=("Transfer-Encoding: chunked",))
                              + b"%x\r\n" % (MAX_BODY_BYTES + 1), 413, "larger than"),
    "unknown-transfer-encoding": (request("POST", "/api/show", headers=("Transfer-Encoding: gzip",)), 501,
                                  "transfer encoding"),
    "foreign-host": (request("GET", "/api/version", host="evil.example:11435"), 403, "evil.example"),
    "foreign-origin": (request("GET", "/api/version", headers=("Origin: https://evil.example",)), 403,
                       "evil.example"),
}


@pytest.mark.parametrize("raw, status, words", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_request_gets_its_4xx_as_json_and_the_server_keeps_serving(server, raw, status, words):
    answer = error_of(exchange(server.server_port, raw))
    assert answer[0] == status and words in answer[1], answer
    assert version_answers(server.server_port)


def test_a_refused_body_leaves_a_kept_alive_connection_usable(server):
    with httpx.Client(base_url=f"http://127.0.0.1:{server.server_port}", timeout=GUARD) as http_client:
        refused = http_client.post("/api/chat", json={"model": CHAT, "messages": MSG, "tools": [1]})
        assert refused.status_code == 400 and "tools[0]" in refused.json()["error"]
        deep = http_client.post("/api/embed", content=b"[" * 100_000)
        assert deep.status_code == 400
        assert http_client.get("/api/version").json() == {"version": VERSION}
        assert http_client.head("/api/tags").status_code == 200


def test_every_connection_sends_without_nagles_delay(monkeypatch):
    """TCP_NODELAY on each accepted socket, as Go's net package (so Ollama) sets it. Without it an answer's body,
    written after its headers, waited for the client's delayed ACK: about 40 ms per request on a kept-alive connection."""
    flags: list[int] = []
    setup = Handler.setup

    def recording(self: Handler) -> None:
        setup(self)
        flags.append(self.connection.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))

    monkeypatch.setattr(Handler, "setup", recording)
    with running() as srv, httpx.Client(base_url=f"http://127.0.0.1:{srv.server_port}", timeout=GUARD) as client:
        assert [client.get("/api/version").json() for _ in range(3)] == [{"version": VERSION}] * 3
    assert flags and all(flags), flags  # one kept-alive connection, and it does not wait for ACKs


def test_chunked_request_body_is_read_like_a_content_length_one(server):
    raw = request("POST", "/api/show", headers=("Transfer-Encoding: chunked",))
    raw += b"9\r\n{\"model\":\r\n6;ext=1\r\n\"nope\"\r\n1\r\n}\r\n0\r\nX-Trailer: 1\r\n\r\n"
    status, error = error_of(exchange(server.server_port, raw))
    assert status == 404 and "model 'nope' not found" in error  # the body arrived whole and was parsed


def test_expect_100_continue_is_answered_only_for_a_body_that_will_be_read(server):
    too_big = request("POST", "/api/embed", headers=("Expect: 100-continue", f"Content-Length: {MAX_BODY_BYTES + 1}"))
    assert error_of(exchange(server.server_port, too_big))[0] == 413  # no 100 first: the client sends nothing
    with socket.create_connection(("127.0.0.1", server.server_port), timeout=GUARD) as sock:
        sock.sendall(request("POST", "/api/show", headers=("Expect: 100-continue", "Content-Length: 2")))
        assert sock.recv(64).startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
        sock.sendall(b"{}")
        response = http.client.HTTPResponse(sock)
        response.begin()
        assert response.status == 404  # {} names no model


# --- time and thread limits --------------------------------------------------------------
def read_until_closed(sock: socket.socket) -> bytes:
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def test_a_client_that_stalls_mid_body_gets_408_and_is_disconnected(server):
    with socket.create_connection(("127.0.0.1", server.server_port), timeout=GUARD) as sock:
        sock.sendall(request("POST", "/api/show", headers=("Content-Length: 100",)) + b'{"model"')
        answer = read_until_closed(sock)  # returns only because the server closes the connection
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408 ") and b"Connection: close" in head
    assert "not received within" in json.loads(body)["error"]
    assert version_answers(server.server_port)


@pytest.mark.parametrize("sent", [b"", b"GET /api/version HTTP/1.1\r\n", b"POST /api/chat HTTP/1.1\r\nHost: 127.0.0.1\r\n"],
                         ids=["nothing", "request-line-only", "headers-unfinished"])
def test_a_silent_client_is_disconnected(server, sent):
    with socket.create_connection(("127.0.0.1", server.server_port), timeout=GUARD) as sock:
        sock.sendall(sent)
        assert read_until_closed(sock) == b""  # the server closed it: no thread waits forever
    assert version_answers(server.server_port)


def test_connections_beyond_the_cap_get_503_until_one_closes():
    with running(max_connections=2, idle_timeout=GUARD) as srv:
        port = srv.server_port
        holders = [socket.create_connection(("127.0.0.1", port), timeout=GUARD) for _ in range(2)]
        try:
            status, error = error_of(exchange(port, request("GET", "/api/version")))
            assert status == 503 and "server busy" in error
            holders.pop().close()  # its handler sees the end of the connection and frees its slot
            for _ in range(200):
                status, _, _ = exchange(port, request("GET", "/api/version"))
                if status == 200:
                    break
                time.sleep(0.05)
            assert status == 200
        finally:
            for sock in holders:
                sock.close()


# --- 2. an error after a stream has begun ---------------------------------------------------
class MidStreamFailureEngine:
    """FAKE engine: streams one piece, then fails. A real llama.cpp run cannot be made to fail
    mid-stream on demand; this reproduces that error path and nothing else."""

    n_ctx = 512

    def stream(self, request: dict[str, Any], on_chunk: Callable[[dict[str, Any]], None]) -> None:
        on_chunk({"choices": [{"delta": {"content": "Привет"}, "finish_reason": None}]})
        raise RuntimeError("the engine crashed mid-stream")


class RegistryWithFailingEngine(Registry):
    """A real registry except that its chat engine is the FAKE above (no model is loaded)."""

    def engine(self, name: str) -> tuple[Any, int]:
        return MidStreamFailureEngine(), 0


def test_an_error_after_the_stream_began_is_its_last_ndjson_line():
    with running(RegistryWithFailingEngine()) as srv:
        base = f"http://127.0.0.1:{srv.server_port}"
        with httpx.Client(base_url=base, timeout=GUARD) as http_client:  # one kept-alive connection
            with http_client.stream("POST", "/api/chat", json={"model": CHAT, "messages": MSG}) as answer:
                assert answer.status_code == 200
                lines = [json.loads(line) for line in answer.iter_lines() if line]
            assert lines[0]["message"]["content"] == "Привет" and lines[0]["done"] is False
            assert lines[-1] == {"error": "internal error: the engine crashed mid-stream"} and len(lines) == 2
            assert http_client.get("/api/version").json() == {"version": VERSION}  # the chunked stream ended cleanly
        with pytest.raises(ollama.ResponseError, match="crashed mid-stream"):
            list(ollama.Client(host=base).chat(model=CHAT, messages=MSG, stream=True))


# --- 3. Host and Origin, as Ollama 0.13 checks them -------------------------------------------
@pytest.mark.parametrize("host", ["127.0.0.1:11435", "localhost:11435", "LocalHost", "[::1]:11435", "[::1]", "::1",
                                  "notebook.localhost:8888", "lab.local", "svc.internal", "10.1.2.3", "192.168.0.7:80",
                                  "172.16.0.1", "0.0.0.0:11435", "[::ffff:127.0.0.1]:1", "", socket.gethostname()])
def test_loopback_and_local_hosts_are_allowed(host):
    assert access.host_allowed(host, "127.0.0.1")


@pytest.mark.parametrize("host", ["evil.example", "evil.example:11435", "localhost.evil.example",
                                  "127.0.0.1.nip.io", "8.8.8.8", "[2001:4860::8888]:80", "localhost:80:90",
                                  "local", "internal.evil"])
def test_foreign_hosts_are_refused(host):
    assert not access.host_allowed(host, "127.0.0.1")


def test_host_check_guards_loopback_listeners_only():
    assert access.host_allowed("evil.example", "192.168.0.7")  # routes.go: not a loopback listener


@pytest.mark.parametrize("origin", ["", "http://localhost", "https://localhost:3000", "http://127.0.0.1:8888",
                                    "http://0.0.0.0:1", "http://[::1]:8080", "app://obsidian.md", "file://",
                                    "tauri://localhost", "vscode-webview://abc", "vscode-file://vscode-app",
                                    "http://127.0.0.1:11435"])
def test_loopback_and_app_origins_are_allowed(origin):
    assert access.origin_allowed(origin, "127.0.0.1:11435", access.allowed_origins())


@pytest.mark.parametrize("origin", ["https://evil.example", "http://localhost.evil.example", "null",
                                    "http://127.0.0.1.evil.example", "chrome-extension://abc", "HTTP://LOCALHOST"])
def test_foreign_origins_are_refused(origin):
    assert not access.origin_allowed(origin, "127.0.0.1:11435", access.allowed_origins())


def test_same_origin_and_ollama_origins_entries_are_allowed():
    assert access.origin_allowed("http://lab.example:8080", "lab.example:8080", access.allowed_origins())
    extra = access.allowed_origins(" https://notebooks.example.org,https://*.lab.example, https://*.other.example")
    assert access.origin_allowed("https://notebooks.example.org", "127.0.0.1", extra)  # trimmed, like normalize()
    assert access.origin_allowed("https://a.lab.example", "127.0.0.1", extra)
    assert not access.origin_allowed("https://a.other.example", "127.0.0.1", extra)  # gin keeps wildcards untrimmed
    assert not access.origin_allowed("https://a.lab.example", "127.0.0.1", access.allowed_origins())
    assert access.origin_allowed("https://anything.example", "127.0.0.1", access.allowed_origins("*"))


def test_host_and_origin_checks_over_http(server):
    port = server.server_port
    assert error_of(exchange(port, request("GET", "/api/tags", host="attacker.example")))[0] == 403
    assert error_of(exchange(port, request("GET", "/", headers=("Origin: https://attacker.example",))))[0] == 403
    status, headers, _ = exchange(port, request("GET", "/api/version", headers=("Origin: http://localhost:8888",)))
    assert status == 200 and headers["access-control-allow-origin"] == "http://localhost:8888"
    preflight = ("Origin: http://localhost:8888", "Access-Control-Request-Method: POST")
    status, headers, _ = exchange(port, request("OPTIONS", "/api/chat", headers=preflight))
    assert status == 204 and "POST" in headers["access-control-allow-methods"]
    assert exchange(port, request("OPTIONS", "/api/chat", host="localhost"))[0] == 204  # allowedHostsMiddleware
    assert exchange(port, request("GET", "/api/version", host=None, version="HTTP/1.0"))[0] == 200  # no Host


def test_ollama_origins_reach_the_server():
    with running(ollama_origins="https://notebooks.example.org") as srv:
        raw = request("GET", "/api/version", headers=("Origin: https://notebooks.example.org",))
        assert exchange(srv.server_port, raw)[0] == 200


# --- 5. weights: no partial gigabyte left behind; a clear line at start -------------------------
def test_stale_partial_join_is_removed_but_a_live_one_is_kept(tmp_path, monkeypatch):
    monkeypatch.setenv("LABKIT_HOME", str(tmp_path))
    ghost = weights.GgufModel("ghost:1b", "ghost.gguf", "labkit-no-such-part", "1.0", 3, "0" * 64, "Ghost 1B")
    monkeypatch.setitem(weights.GGUF_MODELS, ghost.name, ghost)
    models = tmp_path / "models"
    models.mkdir()
    stale = models / ".ghost.gguf.4242.tmp"  # what a killed join leaves
    stale.write_bytes(b"\0" * 1_000_000)
    live = models / ".ghost.gguf.live.tmp"  # a join running in another process holds its lock
    with live.open("wb") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(weights.WeightsError, match="labkit-no-such-part1"):
            weights.prepare_model(ghost.name)
        assert not stale.exists() and live.exists()


def _model_server(*args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "labkit.services.modelserver", "--port", str(free_port()), *args],
                            env=dict(os.environ, **env), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def test_sigterm_during_a_join_leaves_no_temp_file(tmp_path):
    """--preload joins the 1.1 GB chat model first; SIGTERM arrives while the temp file grows."""
    models = tmp_path / "models"
    proc = _model_server("--preload", env={"LABKIT_HOME": str(tmp_path)})
    try:
        partial: list[Path] = []
        for _ in range(6000):  # until the join has written something (a guard of ~2 minutes)
            partial = [p for p in models.glob(".*.tmp") if p.stat().st_size > 0] if models.is_dir() else []
            if partial or proc.poll() is not None:
                break
            time.sleep(0.02)
        assert partial, f"no join was seen (exit code {proc.poll()})"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=GUARD) == 128 + signal.SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert sorted(p.name for p in models.iterdir()) == []  # neither the temp file nor a half model


def test_weights_error_at_start_is_one_line_and_exit_1(tmp_path):
    not_a_folder = tmp_path / "home-is-a-file"
    not_a_folder.write_text("")
    proc = _model_server("--preload", env={"LABKIT_HOME": str(not_a_folder)})
    _, stderr = proc.communicate(timeout=120)
    lines = stderr.strip().splitlines()
    assert proc.returncode == 1 and "Traceback" not in stderr
    assert len(lines) == 1 and lines[0].startswith("labkit.services.modelserver: cannot create the model folder")
    assert "LABKIT_HOME" in lines[0]


# --- 6. a thousand malformed requests against a private server -----------------------------------
def _busy_raw() -> list[tuple[str, bytes, int | None]]:
    """(kind, raw request, expected status; None: the server closes without an answer)."""
    kinds: list[tuple[str, bytes, int | None]] = [(name, raw, status) for name, (raw, status, _) in MALFORMED.items()]
    kinds += [("stall-in-body", request("POST", "/api/show", headers=("Content-Length: 50",)) + b"{", 408),
              ("stall-in-headers", b"POST /api/chat HTTP/1.1\r\nHost: 127.0.0.1\r\n", None)]
    return kinds


def _send(port: int, raw: bytes) -> int | None:
    """Status of the answer to raw on a new connection (None when closed without one)."""
    with socket.create_connection(("127.0.0.1", port), timeout=GUARD) as sock:
        sock.sendall(raw)
        response = http.client.HTTPResponse(sock)
        try:
            response.begin()
        except http.client.RemoteDisconnected:
            return None
        response.read()
        return response.status


@pytest.mark.services
def test_a_thousand_malformed_requests_leave_the_server_answering():
    total, workers, stalls = 1100, 4, 8
    kinds = _busy_raw()
    plain = [k for k in kinds if not k[0].startswith("stall")]
    plan = [plain[i % len(plain)] for i in range(total - stalls)]
    plan += [kinds[-2 + i % 2] for i in range(stalls)]  # slow clients, held up to --read-timeout each
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "labkit.services.modelserver", "--port", str(port), "--read-timeout", "2",
                             "--max-connections", "16"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            with contextlib.suppress(OSError, http.client.HTTPException, ValueError):
                if version_answers(port):
                    break
            assert proc.poll() is None, "the private model server exited at start"
            time.sleep(0.1)
        else:
            pytest.fail("the private model server did not answer within a minute")
        started = time.monotonic()
        with ThreadPoolExecutor(workers) as pool:
            statuses = list(pool.map(lambda item: _send(port, item[1]), plan))
        seconds = time.monotonic() - started
        counts = collections.Counter(statuses)
        wrong = [(kind, expected, got) for (kind, _, expected), got in zip(plan, statuses) if got != expected]
        alive = proc.poll() is None and version_answers(port)
        threads = int(next(line.split()[1] for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines()
                           if line.startswith("Threads:")))
        with ollama.Client(host=f"http://127.0.0.1:{port}", timeout=120) as client:
            vector = np.array(client.embed(model=EMBED, input="query: золото цена").embeddings[0])
        print(f"\nmalformed requests sent: {len(plan)} ({len(kinds)} kinds, {workers} clients at once) "
              f"in {seconds:.1f} s; status counts: {dict(sorted(counts.items(), key=str))}; "
              f"unexpected: {len(wrong)}; server alive: {alive}; server threads after: {threads}")
        assert len(plan) >= 1000 and not wrong, wrong[:5]
        assert alive and threads < 16 + 8
        assert vector.shape == (384,) and np.isclose(np.linalg.norm(vector), 1.0, atol=1e-3)
    finally:
        proc.terminate()
        proc.wait(timeout=GUARD)
