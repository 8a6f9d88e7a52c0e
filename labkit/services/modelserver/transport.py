"""HTTP plumbing of the model server: bounded reads, JSON errors, Ollama's access checks, capped threads (behind every notebook from 01_corpus on).

`JsonHandler` reads one request at a time under limits, so no client can exhaust the server:
a body of at most `MAX_BODY_BYTES` (413 beyond, checked before anything is allocated), the
request line, headers and body within `read_timeout` seconds of the first byte (408, or the
connection just closes while headers are still missing), and `idle_timeout` seconds of silence
on a kept-alive connection. Broken framing (a Content-Length that is no number, negative or
ambiguous, a malformed chunked body or header line) gets 400 and the connection is closed, since
the next request's start is unknown. Every error is Ollama's `{"error": "..."}` JSON, also for
what `http.server` itself refuses. Once a streamed (chunked NDJSON) answer has begun, an error
becomes a last `{"error": ...}` line and the stream ends properly, as Ollama does.

`CappedServer` runs at most `max_connections` handler threads; a connection beyond that gets
Ollama's 503 "server busy" from one extra thread instead of a thread of its own.
"""

from __future__ import annotations

import io
import json
import logging
import queue
import re
import select
import socket
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from labkit.services.modelserver import access

__all__ = ["MAX_BODY_BYTES", "MAX_CONNECTIONS", "READ_TIMEOUT", "IDLE_TIMEOUT", "WRITE_TIMEOUT", "BUSY", "HttpError",
           "ClientGone", "JsonHandler", "CappedServer"]

MAX_BODY_BYTES = 8 * 1024 * 1024  # a 32-text /api/embed batch or a full chat history is far below this
MAX_CONNECTIONS = 64  # handler threads at once; each kept-alive client connection holds one
READ_TIMEOUT = 30.0  # seconds from a request's first byte until its body has arrived
IDLE_TIMEOUT = 15.0  # seconds a kept-alive connection may wait for its next request
WRITE_TIMEOUT = 60.0  # seconds a client may leave an answer unread before the connection is dropped
_LINGER_SECONDS, _LINGER_BYTES = 0.5, 1 << 20  # Go's rstAvoidanceDelay is 500 ms
_CHUNK_LINE = re.compile(rb"[0-9a-fA-F]{1,16}")
_LENGTH = re.compile(r"[0-9]{1,20}")
# Ollama's words when its queue is full (server/sched.go L64 ErrMaxQueue; a 503 by routes.go L2343).
BUSY = "server busy, please try again.  maximum pending requests exceeded"
_PREFLIGHT_HEADERS = (  # gin-contrib/cors DefaultConfig() with ollama routes.go L1456-1476's headers
    ("Access-Control-Allow-Methods", "GET,POST,PUT,PATCH,DELETE,HEAD,OPTIONS"),
    ("Access-Control-Allow-Headers", "Authorization,Content-Type,User-Agent,Accept,X-Requested-With,Openai-Beta,"
                                     "X-Stainless-Arch,X-Stainless-Async,X-Stainless-Custom-Poll-Interval,"
                                     "X-Stainless-Helper-Method,X-Stainless-Lang,X-Stainless-Os,"
                                     "X-Stainless-Package-Version,X-Stainless-Poll-Helper,X-Stainless-Retry-Count,"
                                     "X-Stainless-Runtime,X-Stainless-Runtime-Version,X-Stainless-Timeout"),
    ("Access-Control-Max-Age", "43200"),
)
log = logging.getLogger("labkit.services.modelserver")


class HttpError(Exception):
    """A request refused with an HTTP status; `close` when the connection cannot carry another request."""

    def __init__(self, status: int, message: str, close: bool = False):
        super().__init__(message)
        self.status, self.message, self.close = status, message, close


class ClientGone(ConnectionError):
    """Writing the answer failed: the client closed the connection or stopped reading."""


class _DeadlineReader(io.RawIOBase):
    """The connection's reads; while `deadline` is set each read may only wait until then."""

    def __init__(self, sock: socket.socket):
        self._sock = sock
        self.deadline: float | None = None

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self.deadline is not None:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("the request was not received in time")
            self._sock.settimeout(left)
        return self._sock.recv_into(buffer)


class JsonHandler(BaseHTTPRequestHandler):
    """One connection: bounded reads, access checks, JSON errors; subclasses implement `respond`."""

    protocol_version = "HTTP/1.1"
    # TCP_NODELAY, as Go's net package (so Ollama) sets on every connection: the headers and the body of an answer
    # go out in two writes, and with Nagle's algorithm the body waited for the client's delayed ACK, about 40 ms
    # on every request of a kept-alive connection (an embedding of a query took 60 ms instead of 18).
    disable_nagle_algorithm = True
    server: CappedServer
    body: bytes = b""  # the request body, read once per request
    _reader: _DeadlineReader
    _buffered: io.BufferedReader[_DeadlineReader]
    _headers_out: list[tuple[str, str]]
    _streaming = False  # a chunked NDJSON answer has begun
    _chunked = True
    _expect_continue = False

    def setup(self) -> None:
        super().setup()
        self._reader = _DeadlineReader(self.connection)
        self._buffered = self.rfile = io.BufferedReader(self._reader)

    def log_message(self, format: str, *args: Any) -> None:
        log.info("%s %s", self.address_string(), format % args)

    def respond(self) -> None:
        """Answer the request in self.command / self.path / self.body (after the checks passed)."""
        raise NotImplementedError

    # --- one request --------------------------------------------------------------
    def handle_one_request(self) -> None:
        self._headers_out, self._streaming, self._expect_continue, self.body = [], False, False, b""
        self._reader.deadline = None
        self.connection.settimeout(self.server.idle_timeout)
        try:
            if not self._buffered.peek(1):  # the client closed the kept-alive connection
                self.close_connection = True
                return
            self._reader.deadline = time.monotonic() + self.server.read_timeout
            self.raw_requestline = self.rfile.readline(65537)
            if len(self.raw_requestline) > 65536:
                self.requestline, self.request_version, self.command = "", "HTTP/1.1", ""
                self.send_error(HTTPStatus.REQUEST_URI_TOO_LONG, "request line too long")
                return
            if not self.parse_request():  # it has answered with send_error
                return
            self._checked_respond()
            self.wfile.flush()
        except HttpError as exc:
            self._refuse(exc)
        except (TimeoutError, ConnectionError):  # a silent or vanished client: nothing to answer
            self.close_connection = True

    def _checked_respond(self) -> None:
        if self.request_version == "HTTP/0.9":
            raise HttpError(400, "HTTP/0.9 requests are not supported", close=True)
        if self.headers.defects or self.headers.get_payload():
            raise HttpError(400, "malformed header line", close=True)
        host = self._host()
        self.body = self._read_body()
        self._reader.deadline = None
        self.connection.settimeout(self.server.write_timeout)
        if self._access(host):
            self.respond()

    def _refuse(self, exc: HttpError) -> None:
        self._reader.deadline = None
        try:
            self.connection.settimeout(self.server.write_timeout)
            self.send_json(exc.status, {"error": exc.message}, close=exc.close)
        except ClientGone:
            self.close_connection = True

    def _host(self) -> str:
        """The request's host (Go's Request.Host): from an absolute URI, else the one Host header."""
        hosts = self.headers.get_all("Host") or []
        if len(hosts) > 1:
            raise HttpError(400, "too many Host headers", close=True)
        if self.path.startswith(("http://", "https://")):
            target = urlsplit(self.path)
            self.path = (target.path or "/") + (f"?{target.query}" if target.query else "")
            return target.netloc
        if not hosts and self.request_version == "HTTP/1.1":
            raise HttpError(400, "missing required Host header", close=True)
        return hosts[0].strip() if hosts else ""

    def _access(self, host: str) -> bool:
        """Ollama's CORS and allowed-hosts middlewares; False when they have answered (OPTIONS)."""
        origin = self.headers.get("Origin", "")
        if origin and origin not in (f"http://{host}", f"https://{host}"):
            if not access.origin_allowed(origin, host, self.server.origins):
                raise HttpError(403, f"origin {origin[:200]!r} is not allowed: set OLLAMA_ORIGINS to allow it")
            self._headers_out += [("Vary", "Origin"), ("Access-Control-Allow-Origin", origin)]
            if self.command == "OPTIONS":  # a CORS preflight
                self._headers_out += _PREFLIGHT_HEADERS
                self.send_json(204, b"")
                return False
        if not access.host_allowed(host, str(self.server.server_address[0])):
            raise HttpError(403, f"host {access.host_name(host)[:200]!r} is not allowed: "
                                 "call the model server as localhost or 127.0.0.1")
        if self.command == "OPTIONS" and not access.host_is_ip(host):
            self.send_json(204, b"")  # allowedHostsMiddleware L1438-1442
            return False
        return True

    # --- the body -----------------------------------------------------------------
    def handle_expect_100(self) -> bool:
        self._expect_continue = True  # sent only when the body is about to be read, as Go does
        return True

    def _read_body(self) -> bytes:
        """The body, read within what is left of the request's read time."""
        encodings = self.headers.get_all("Transfer-Encoding") or []
        lengths = self.headers.get_all("Content-Length") or []
        try:
            if encodings:
                codings = [c.strip().lower() for value in encodings for c in value.split(",") if c.strip()]
                if codings != ["chunked"]:
                    raise HttpError(501, f"unsupported transfer encoding: {', '.join(encodings)[:200]}", close=True)
                return self._read_chunked()
            if not lengths:
                return b""
            values = {value.strip() for value in lengths}
            value = values.pop()
            if values or not _LENGTH.fullmatch(value):
                raise HttpError(400, f"invalid Content-Length {', '.join(lengths)[:100]!r}: "
                                     "it must be one non-negative integer", close=True)
            size = int(value)
            if size > MAX_BODY_BYTES:
                raise HttpError(413, f"request body of {size} bytes is larger than the {MAX_BODY_BYTES} bytes "
                                     "this server reads", close=True)
            return self._read_exactly(size)
        except TimeoutError:
            raise HttpError(408, f"request body not received within {self.server.read_timeout:g} s",
                            close=True) from None

    def _read_exactly(self, size: int) -> bytes:
        if size and self._expect_continue:
            self._expect_continue = False
            self.send_response_only(HTTPStatus.CONTINUE)
            self.end_headers()
        data = self.rfile.read(size) if size else b""
        if len(data) < size:
            raise HttpError(400, f"request body ended after {len(data)} of {size} bytes", close=True)
        return data

    def _read_chunked(self) -> bytes:
        parts: list[bytes] = []
        total = 0
        while True:
            line = self.rfile.readline(1024)
            size_text = line.split(b";", 1)[0].strip()
            if not line.endswith(b"\n") or not _CHUNK_LINE.fullmatch(size_text):
                raise HttpError(400, "malformed chunked request body", close=True)
            size = int(size_text, 16)
            if size == 0:
                break
            total += size
            if total > MAX_BODY_BYTES:
                raise HttpError(413, f"request body is larger than the {MAX_BODY_BYTES} bytes this server reads",
                                close=True)
            parts.append(self._read_exactly(size))
            if self.rfile.readline(3) not in (b"\r\n", b"\n"):
                raise HttpError(400, "malformed chunked request body", close=True)
        for _ in range(100):  # trailer lines up to the blank one
            line = self.rfile.readline(65537)
            if line in (b"\r\n", b"\n"):
                return b"".join(parts)
            if not line.endswith(b"\n"):
                break
        raise HttpError(400, "malformed chunked request body", close=True)

    def json_body(self) -> Any:
        """The body as JSON; HttpError 400 for no body, invalid or too deeply nested JSON."""
        if not self.body:
            raise HttpError(400, "missing request body")  # Ollama's words for an empty body
        try:
            return json.loads(self.body, parse_constant=_no_constant)
        except RecursionError:
            raise HttpError(400, "request body is nested too deeply") from None
        except ValueError as exc:
            raise HttpError(400, f"request body must be JSON: {exc}"[:300]) from None

    # --- answers --------------------------------------------------------------------
    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """http.server's own refusals (bad request line or headers) as Ollama's JSON errors."""
        self.log_error("code %d, message %s", code, message)
        text = message or HTTPStatus(code).phrase
        try:
            self.send_json(code, {"error": text}, close=True)
        except ClientGone:
            self.close_connection = True

    def send_json(self, status: int, payload: Any, content_type: str = "application/json",
                  close: bool = False) -> None:
        """One complete answer (JSON, or bytes as they are); the body is left out for HEAD."""
        data = payload if isinstance(payload, bytes) else json.dumps(payload, ensure_ascii=False).encode()
        if self.request_version == "HTTP/0.9":
            self.request_version = "HTTP/1.0"  # http.server writes no status line for 0.9 (or for garbage)
        try:
            self.send_response(status)
            if status != 204:
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
            self._finish_headers(close)
            if self.command != "HEAD" and status != 204:
                self.wfile.write(data)
        except OSError as exc:
            raise ClientGone(str(exc)) from exc

    def _finish_headers(self, close: bool) -> None:
        for name, value in self._headers_out:
            self.send_header(name, value)
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()

    def start_stream(self) -> None:
        """Begin a 200 NDJSON answer (chunked; a plain body that ends the connection for HTTP/1.0)."""
        self._chunked = self.request_version >= "HTTP/1.1"
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/x-ndjson")
            if self._chunked:
                self.send_header("Transfer-Encoding", "chunked")
            self._finish_headers(close=not self._chunked)
        except OSError as exc:
            raise ClientGone(str(exc)) from exc
        self._streaming = True

    def write_line(self, payload: dict[str, Any]) -> None:
        """One NDJSON line of a started stream."""
        data = json.dumps(payload, ensure_ascii=False).encode() + b"\n"
        try:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data) if self._chunked else data)
            self.wfile.flush()
        except OSError as exc:
            raise ClientGone(str(exc)) from exc

    def end_stream(self) -> None:
        """End a started stream (the last chunk)."""
        self._streaming = False
        try:
            if self._chunked:
                self.wfile.write(b"0\r\n\r\n")
        except OSError as exc:
            raise ClientGone(str(exc)) from exc

    def client_gone(self) -> bool:
        """True when the client has closed the connection (an end of file waits to be read), without reading."""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):  # a reset or closed socket
            return True

    def fail(self, status: int, message: str) -> None:
        """Answer an error: a JSON error, or a last `{"error"}` line once a stream has begun."""
        if self._streaming:
            self.write_line({"error": message})
            self.end_stream()
        else:
            self.send_json(status, {"error": message})


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


class CappedServer(ThreadingHTTPServer):
    """ThreadingHTTPServer with at most max_connections handler threads; the rest get 503."""

    daemon_threads = True
    block_on_close = False  # closing does not wait for kept-alive connections to go idle
    request_queue_size = 64

    def __init__(self, address: tuple[str, int], handler: type[JsonHandler], *, origins: tuple[str, ...],
                 max_connections: int = MAX_CONNECTIONS, read_timeout: float = READ_TIMEOUT,
                 idle_timeout: float = IDLE_TIMEOUT, write_timeout: float = WRITE_TIMEOUT):
        super().__init__(address, handler)
        self.origins = origins
        self.read_timeout, self.idle_timeout, self.write_timeout = read_timeout, idle_timeout, write_timeout
        self._slots = threading.BoundedSemaphore(max_connections)
        self._busy: queue.Queue[socket.socket | None] = queue.Queue(maxsize=max_connections)
        self._busy_thread = threading.Thread(target=self._answer_busy, name="modelserver-busy", daemon=True)
        self._busy_thread.start()

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            try:
                self._busy.put_nowait(request)
            except queue.Full:  # even the busy answers are backed up: just close
                self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def _answer_busy(self) -> None:
        """Answer each connection beyond the cap with a 503, one at a time, in this one thread."""
        body = json.dumps({"error": BUSY}).encode()
        answer = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
                  b"Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        while (sock := self._busy.get()) is not None:
            try:
                sock.settimeout(1.0)
                sock.recv(65536)  # read the request first, so closing does not reset the answer away
                sock.sendall(answer)
            except OSError:
                pass
            self.shutdown_request(sock)

    def shutdown_request(self, request: Any) -> None:
        """Close a connection after reading what the client still sends (bounded): closing a socket
        with unread input resets the connection, and the client could lose the answer just sent."""
        try:
            request.shutdown(socket.SHUT_WR)
            deadline, received = time.monotonic() + _LINGER_SECONDS, 0
            while received < _LINGER_BYTES and (left := deadline - time.monotonic()) > 0:
                request.settimeout(left)
                data = request.recv(65536)
                if not data:
                    break
                received += len(data)
        except OSError:
            pass
        self.close_request(request)

    def server_close(self) -> None:
        super().server_close()
        try:
            self._busy.put_nowait(None)
        except queue.Full:
            pass  # the busy thread is a daemon: it ends with the process
