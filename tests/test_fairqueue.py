"""The model server's chat queue (labkit.services.modelserver.fairqueue): turns across clients, limits, leaving.

Pure logic with threads, no service: each request is a thread that records when its turn
comes and then holds the turn until the test lets it go, so every order below is exact.
"""

from __future__ import annotations

import threading
import time

import pytest

from labkit.services.modelserver.fairqueue import ANONYMOUS, FairQueue, QueueFull, client_label

WAIT = 10.0  # seconds any single step may take before the test fails (a hang, not a timing)


class Requests:
    """Requests of named clients in one queue; `finish()` ends the running one and returns who ran."""

    def __init__(self, queue: FairQueue) -> None:
        self.queue = queue
        self.order: list[str] = []
        self.errors: list[BaseException] = []
        self._done: dict[str, threading.Event] = {}
        self._threads: list[threading.Thread] = []

    def submit(self, name: str, client: str, gone: threading.Event | None = None) -> None:
        """Queue request `name` of `client` and return once it runs or waits."""
        done = self._done[name] = threading.Event()
        before = self.queue.snapshot()
        thread = threading.Thread(target=self._run, args=(name, client, done, gone), daemon=True)
        thread.start()
        self._threads.append(thread)
        _until(lambda: self._count(self.queue.snapshot()) == self._count(before) + 1 or self.errors)

    def finish(self) -> str:
        """End the request that runs now; the name of the one that ran."""
        running = self.order[-1]
        self._done[running].set()
        return running

    def drain(self) -> list[str]:
        """Let every request run in turn; the order their turns came in."""
        while len(self.order) < len(self._done) - len(self.errors):
            count = len(self.order)
            self.finish()
            _until(lambda count=count: len(self.order) > count or len(self.order) + len(self.errors) == len(self._done))
        self._done[self.order[-1]].set()
        for thread in self._threads:
            thread.join(WAIT)
        return self.order

    def _run(self, name: str, client: str, done: threading.Event, gone: threading.Event | None) -> None:
        try:
            with self.queue.turn(client, "m", gone=gone.is_set if gone else None):
                self.order.append(name)
                done.wait(WAIT)
        except BaseException as err:  # noqa: BLE001 - the test inspects it
            self.errors.append(err)

    @staticmethod
    def _count(snapshot: dict) -> int:
        return snapshot["depth"] + len(snapshot["running"])


def _until(condition, seconds: float = WAIT) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "the queue did not move"
        time.sleep(0.01)


def test_one_client_with_many_requests_does_not_starve_another():
    requests = Requests(FairQueue())
    for i in range(1, 11):
        requests.submit(f"A{i}", "alice")
    requests.submit("B1", "bob")
    assert requests.queue.snapshot()["waiting"] == {"bob": 1, "alice": 9}  # bob's turn comes first
    order = requests.drain()
    assert order[:3] == ["A1", "B1", "A2"]  # FIFO would have run B1 last, after all ten of alice's
    assert order == ["A1", "B1", *(f"A{i}" for i in range(2, 11))]


def test_clients_take_turns_in_rotation():
    requests = Requests(FairQueue())
    requests.submit("X", "xenia")  # holds the turn while the others queue
    for i in range(1, 4):
        requests.submit(f"A{i}", "alice")
    for i in range(1, 4):
        requests.submit(f"B{i}", "bob")
    requests.submit("C1", "carol")
    assert requests.drain() == ["X", "A1", "B1", "C1", "A2", "B2", "A3", "B3"]


def test_a_client_served_just_now_queues_behind_a_newcomer():
    requests = Requests(FairQueue())
    for i in range(1, 4):  # alice alone: served one after another
        requests.submit(f"solo{i}", "alice")
        requests.finish()
        _until(lambda: not requests.queue.snapshot()["running"])
    requests.submit("X", "xenia")
    requests.submit("A1", "alice")
    requests.submit("B1", "bob")
    order = requests.drain()
    assert order.index("B1") < order.index("A1")


def test_the_queue_refuses_beyond_max_queue_and_counts_only_waiting_requests():
    requests = Requests(FairQueue(max_queue=2))
    requests.submit("A1", "alice")  # runs: not counted
    requests.submit("A2", "alice")
    requests.submit("B1", "bob")
    with pytest.raises(QueueFull, match="max_queue 2"):
        with requests.queue.turn("carol"):
            pass
    snapshot = requests.queue.snapshot()
    assert snapshot["depth"] == 2 and snapshot["max_queue"] == 2
    assert snapshot["running"][0]["client"] == "alice"
    assert requests.drain() == ["A1", "B1", "A2"]
    assert requests.queue.snapshot()["served"] == 3


def test_with_max_queue_zero_an_idle_server_still_answers():
    queue = FairQueue(max_queue=0)
    with queue.turn("alice") as ticket:
        assert ticket.started_at is not None
        with pytest.raises(QueueFull):
            with queue.turn("bob"):
                pass


def test_a_request_whose_client_left_gives_up_its_place():
    requests = Requests(FairQueue())
    requests.submit("A1", "alice")
    gone = threading.Event()
    requests.submit("B1", "bob", gone=gone)
    requests.submit("B2", "bob")
    gone.set()  # bob's first client closed its connection while waiting
    _until(lambda: requests.errors)
    assert isinstance(requests.errors[0], ConnectionAbortedError)
    assert requests.queue.snapshot()["waiting"] == {"bob": 1}
    assert requests.drain() == ["A1", "B2"]


def test_client_labels_are_short_printable_and_unknown_clients_share_one_group():
    assert client_label("alice") == "alice"
    assert client_label(None) == client_label("") == client_label(" \t") == ANONYMOUS
    assert client_label("ev\nil\x00name") == "evilname"
    assert len(client_label("x" * 500)) == 64
