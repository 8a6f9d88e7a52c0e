"""Fair queueing of chat generations across students (class mode: hub/README.md).

The server generates one chat answer at a time (llama.cpp already uses both CPU cores). Waiting
requests are not served first come, first served but in turns across clients, so a student who
fires ten requests at once waits behind their own requests, not in front of everyone else's.
A client is the ``X-Labkit-Client`` header labkit's model client sends (the JupyterHub user, else
``user@host``); requests without it form one group, ``(anonymous)``. The header is the client's own
word: it keeps cooperating students fair to each other, it is no access control.

The turns are start-time fair queuing (Goyal, Vin and Cheng, 1996) with every request costing
one turn: a request's start tag is max(virtual time, the finish tag of its client's previous
request), the smallest start tag goes next (ties in arrival order), and the virtual time is the
start tag of the request granted last. So a client that arrives goes before the second request
of a client served in this round, and an idle client cannot save turns up for later.

As Ollama's OLLAMA_MAX_QUEUE, at most `max_queue` requests wait (running ones not counted);
one more gets ``QueueFull``, which the server answers with Ollama's 503 "server busy". A waiting
request whose client has gone (an interrupted kernel, a client timeout) leaves without running.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from labkit.core.settings import CLIENT_HEADER

__all__ = ["ANONYMOUS", "CLIENT_HEADER", "MAX_QUEUE", "FairQueue", "QueueFull", "Ticket", "client_label"]

ANONYMOUS = "(anonymous)"  # the one group of requests without a client header
MAX_QUEUE = 512  # Ollama's default OLLAMA_MAX_QUEUE
MAX_LABEL = 64
POLL_SECONDS = 0.5  # how often a waiting request checks that its client is still there
log = logging.getLogger("labkit.services.modelserver")


class QueueFull(RuntimeError):
    """`max_queue` requests wait already (HTTP 503, Ollama's "server busy")."""


def client_label(header: str | None) -> str:
    """The queue group of a request: its client header, printable ASCII, at most 64 characters."""
    text = "".join(ch for ch in (header or "") if 32 < ord(ch) < 127 or ch == " ").strip()[:MAX_LABEL]
    return text or ANONYMOUS


@dataclass(eq=False)
class Ticket:
    """One request's place in the queue."""

    client: str
    model: str
    start: int  # start tag (see the module docstring)
    seq: int  # arrival order, for ties
    queued_at: float = field(default_factory=time.monotonic)
    started_at: float | None = None
    granted: threading.Event = field(default_factory=threading.Event, repr=False)

    @property
    def waited(self) -> float:
        """Seconds this request waited for its turn (so far, while it still waits)."""
        return (self.started_at or time.monotonic()) - self.queued_at


class FairQueue:
    """At most `parallel` chat generations at once; the rest wait their turn, fairly across clients."""

    def __init__(self, max_queue: int = MAX_QUEUE, parallel: int = 1) -> None:
        if max_queue < 0 or parallel < 1:
            raise ValueError("max_queue must be >= 0 and parallel >= 1")
        self.max_queue, self.parallel = max_queue, parallel
        self.served = 0  # requests granted a turn since the server started
        self._lock = threading.Lock()
        self._waiting: list[Ticket] = []
        self._running: list[Ticket] = []
        self._finish: dict[str, int] = {}  # client -> finish tag of its latest request
        self._vtime = 0
        self._seq = 0

    @contextmanager
    def turn(self, client: str, model: str = "", gone: Callable[[], bool] | None = None) -> Iterator[Ticket]:
        """Wait for this request's turn, hold it for the block, then hand it on.

        `gone` is asked every half second while waiting; when it says the client has gone, the
        request leaves the queue and ``ConnectionAbortedError`` is raised. ``QueueFull`` when
        `max_queue` requests wait already.
        """
        ticket = self._enqueue(client, model)
        try:
            while not ticket.granted.wait(POLL_SECONDS):
                if gone is not None and gone():
                    raise ConnectionAbortedError(f"client {client} left the queue after {ticket.waited:.1f} s")
        except BaseException:
            self._leave(ticket)
            raise
        try:
            yield ticket
        finally:
            self._leave(ticket)

    def snapshot(self) -> dict[str, Any]:
        """The queue now: waiting requests per client (in turn order), what runs, the limits."""
        with self._lock:
            now = time.monotonic()
            order = sorted(self._waiting, key=lambda t: (t.start, t.seq))
            waiting = Counter(t.client for t in order)
            return {
                "depth": len(order),
                "waiting": dict(waiting),  # insertion order = whose turn comes first
                "running": [{"client": t.client, "model": t.model, "seconds": round(now - (t.started_at or now), 1)}
                            for t in self._running],
                "oldest_wait_seconds": round(max((now - t.queued_at for t in order), default=0.0), 1),
                "parallel": self.parallel,
                "max_queue": self.max_queue,
                "served": self.served,
            }

    # --- under the lock ---------------------------------------------------------------
    def _enqueue(self, client: str, model: str) -> Ticket:
        with self._lock:
            must_wait = len(self._running) >= self.parallel or bool(self._waiting)
            if must_wait and len(self._waiting) >= self.max_queue:
                log.warning("chat queue full, %s refused (503); %s", client, self._describe())
                raise QueueFull(f"{len(self._waiting)} requests wait already (max_queue {self.max_queue})")
            start = max(self._vtime, self._finish.get(client, 0))
            self._finish[client] = start + 1
            self._seq += 1
            ticket = Ticket(client, model, start, self._seq)
            self._waiting.append(ticket)
            self._dispatch()
            if not ticket.granted.is_set():
                log.info("chat queue: %s waits; %s", client, self._describe())
            return ticket

    def _leave(self, ticket: Ticket) -> None:
        with self._lock:
            if ticket in self._waiting:
                self._waiting.remove(ticket)
                if self._finish.get(ticket.client) == ticket.start + 1:  # its latest request: give the turn back
                    self._finish[ticket.client] = ticket.start
            elif ticket in self._running:
                self._running.remove(ticket)
            self._dispatch()

    def _dispatch(self) -> None:
        """Grant free slots to the waiting requests with the smallest start tags."""
        while self._waiting and len(self._running) < self.parallel:
            ticket = min(self._waiting, key=lambda t: (t.start, t.seq))
            self._waiting.remove(ticket)
            self._vtime = ticket.start
            ticket.started_at = time.monotonic()
            self._running.append(ticket)
            self.served += 1
            ticket.granted.set()
        busy = {t.client for t in self._waiting} | {t.client for t in self._running}
        self._finish = {c: f for c, f in self._finish.items() if f > self._vtime or c in busy}

    def _describe(self) -> str:
        """One log line's worth: depth, waiting per client in turn order, who runs."""
        order = sorted(self._waiting, key=lambda t: (t.start, t.seq))
        per_client = ", ".join(f"{c} {n}" for c, n in Counter(t.client for t in order).items())
        running = ", ".join(t.client for t in self._running) or "nothing"
        return f"{len(order)} waiting ({per_client}); running: {running}"
