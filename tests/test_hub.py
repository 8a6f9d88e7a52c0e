"""Class mode end to end: JupyterHub on loopback with hub/jupyterhub_config.py, two real students at once.

Two OS accounts are created (root only: CI runs as root), log in through the hub's login form
with their system passwords (PAM), get their servers (LocalProcessSpawner, as themselves), and
each server runs notebooks/02_lexical.ipynb at the same time, against the student's own database
on a private Postgres (the shared stack's Postgres never sees these roles). Then each kernel
writes a marker row, and the databases are checked from the superuser's side: every student's
database holds its own marker only, nobody wrote into the instructor's database, and a student's
credentials cannot open a neighbour's database.

Notebooks run inside the students' servers through the Jupyter server's REST API (a session,
as JupyterLab opens one) and the kernel's websocket, cell by cell: that is what a student's
clicks do, so the environment the hub gave the server (DATABASE_URL, OLLAMA_HOST) is what the
kernel gets. Running papermill as the user would bypass the hub and prove less.

The figure printed: memory per student, the RSS (and USS) of one student's server plus kernel.
The hub needs `hub/install.sh` (JupyterHub, configurable-http-proxy); `./run.sh test` runs it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import httpx
import nbformat
import psutil
import psycopg
import pytest
from privatepg import PrivatePostgres, private_postgres

import labkit as lk
from labkit.services import classroom
from labkit.services.pgembedded import free_port

ROOT = Path(__file__).resolve().parents[1]
PROXY = ROOT / "hub" / "node_modules" / ".bin" / "configurable-http-proxy"
NOTEBOOK = "notebooks/02_lexical.ipynb"
GROUP = "lkstudents"
STUDENTS = ("lkstudent1", "lkstudent2")
START = 240.0  # seconds the hub or a student's server may take to come up on two busy cores
CELL = 300.0  # seconds one notebook cell may take

pytestmark = [
    pytest.mark.services,
    pytest.mark.system,
    pytest.mark.skipif(os.geteuid() != 0, reason="creates OS accounts for the students (CI runs as root)"),
]


@dataclass
class Hub:
    url: str
    postgres: PrivatePostgres
    log: Path
    passwords: dict[str, str]
    tokens: dict[str, str] = field(default_factory=dict)

    def tail(self, lines: int = 60) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


# --- accounts and the hub process ---------------------------------------------------------------

def _run(*command: str) -> None:
    subprocess.run(command, check=True, capture_output=True, timeout=60)


def _remove_accounts() -> None:
    for name in STUDENTS:
        with contextlib.suppress(KeyError):
            uid = pwd.getpwnam(name).pw_uid
            for proc in psutil.process_iter():  # whatever the hub left of this test's accounts
                with contextlib.suppress(psutil.Error):
                    if proc.uids().real == uid:
                        proc.kill()
            subprocess.run(["userdel", "--remove", name], capture_output=True, timeout=60)
    subprocess.run(["groupdel", GROUP], capture_output=True, timeout=60)


def _create_accounts() -> dict[str, str]:
    _remove_accounts()  # left over from an interrupted run
    _run("groupadd", GROUP)
    passwords = {}
    for name in STUDENTS:
        _run("useradd", "--create-home", "--shell", "/bin/bash", "--groups", GROUP, name)
        passwords[name] = secrets.token_urlsafe(12)
    subprocess.run(["chpasswd"], input="".join(f"{n}:{p}\n" for n, p in passwords.items()), text=True, check=True,
                   capture_output=True, timeout=60)
    return passwords


def _hub_environment(home: Path, state: Path, url: str, ollama_host: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "JUPYTERHUB_USER", "LAB_STACK")}
    env.update(LABKIT_HOME=str(home), OLLAMA_HOST=ollama_host, LABKIT_HUB_STATE=str(state), LABKIT_HUB_URL=url,
               LABKIT_HUB_GROUP=GROUP, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    return env


@pytest.fixture(scope="module")
def hub(settings: lk.Settings) -> Iterator[Hub]:
    try:
        import jupyterhub  # noqa: F401 - installed by hub/install.sh, not requirements.txt
    except ImportError:
        pytest.fail("JupyterHub is not installed: run hub/install.sh (./run.sh test does)")
    assert PROXY.exists(), "configurable-http-proxy is missing: run hub/install.sh (./run.sh test does)"
    with private_postgres() as postgres:
        state = postgres.home.parent / "hub"
        log = postgres.home.parent / "jupyterhub.log"
        url = f"http://127.0.0.1:{free_port()}"
        passwords = _create_accounts()
        command = [sys.executable, "-m", "jupyterhub", "-f", str(ROOT / "hub" / "jupyterhub_config.py"),
                   f"--JupyterHub.hub_bind_url=http://127.0.0.1:{free_port()}",
                   f"--ConfigurableHTTPProxy.api_url=http://127.0.0.1:{free_port()}"]
        with open(log, "wb") as out:
            proc = subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                    env=_hub_environment(postgres.home, state, url, settings.ollama_host))
        hub = Hub(url, postgres, log, passwords)
        try:
            _until(lambda: _hub_answers(url, proc, hub), START, f"the hub on {url}", hub)
            yield hub
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)  # the hub stops the students' servers on its way out
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
            _remove_accounts()
            shutil.rmtree(state, ignore_errors=True)


def _hub_answers(url: str, proc: subprocess.Popen, hub: Hub) -> bool:
    assert proc.poll() is None, f"JupyterHub exited with code {proc.returncode}:\n{hub.tail()}"
    try:
        return httpx.get(f"{url}/hub/api", timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


def _until(condition: Any, seconds: float, what: str, hub: Hub) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting {seconds:.0f} s for {what}; the hub's log ends:\n{hub.tail()}")
        time.sleep(0.5)


# --- a student's browser: log in, get a token, start the server ----------------------------------

def _log_in(hub: Hub, name: str, password: str) -> httpx.Client:
    """The login form, as a browser fills it in; returns the logged-in client (cookies)."""
    browser = httpx.Client(base_url=hub.url, timeout=60)
    form = browser.get("/hub/login")
    assert form.status_code == 200 and 'name="_xsrf"' in form.text
    answer = browser.post("/hub/login", data={"username": name, "password": password,
                                              "_xsrf": browser.cookies["_xsrf"]})
    assert answer.status_code == 302, f"login of {name} failed ({answer.status_code}):\n{hub.tail()}"
    return browser


def _token(hub: Hub, browser: httpx.Client, name: str) -> str:
    """An API token the logged-in student asks for (as JupyterHub's token page does)."""
    answer = browser.post(f"/hub/api/users/{name}/tokens", json={"note": "test_hub", "expires_in": 3600},
                          headers={"X-XSRFToken": browser.cookies["_xsrf"]})
    assert answer.status_code == 201, f"{answer.status_code} {answer.text}\n{hub.tail()}"
    return str(answer.json()["token"])


def _api(hub: Hub, name: str) -> httpx.Client:
    return httpx.Client(base_url=hub.url, timeout=60, headers={"Authorization": f"token {hub.tokens[name]}"})


def _server_ready(hub: Hub, name: str) -> bool:
    with _api(hub, name) as api:
        model = api.get(f"/hub/api/users/{name}").json()
    server = model.get("servers", {}).get("")
    if server is None and not model.get("pending"):
        pytest.fail(f"the server of {name} stopped while starting:\n{hub.tail()}")
    return bool(server and server.get("ready"))


# --- running a notebook in a student's kernel, over the kernel websocket ------------------------

def _cells(path: Path) -> list[str]:
    """The notebook's code cells, with its CI parameters injected after the `parameters` cell (as papermill does)."""
    nb = nbformat.read(path, as_version=4)
    parameters = nb.metadata.get("labkit", {}).get("ci_parameters") or {}
    cells = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        cells.append(cell.source)
        if "parameters" in cell.metadata.get("tags", []) and parameters:
            cells.append("\n".join(f"{key} = {value!r}" for key, value in parameters.items()))
    return cells


class Kernel:
    """One kernel of a student's server, driven over its websocket (the legacy JSON protocol)."""

    def __init__(self, hub: Hub, name: str, kernel_id: str) -> None:
        self.hub, self.name, self.kernel_id = hub, name, kernel_id
        self.session = uuid.uuid4().hex
        self.connection: Any = None

    async def __aenter__(self) -> Kernel:
        from tornado.httpclient import HTTPRequest
        from tornado.websocket import websocket_connect

        ws = self.hub.url.replace("http://", "ws://")
        request = HTTPRequest(f"{ws}/user/{self.name}/api/kernels/{self.kernel_id}/channels?session_id={self.session}",
                              headers={"Authorization": f"token {self.hub.tokens[self.name]}"})
        self.connection = await websocket_connect(request)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.connection.close()

    async def run(self, code: str) -> tuple[str, list[str]]:
        """Execute `code`; its printed text and its errors ('Name: value')."""
        msg_id = uuid.uuid4().hex
        header = {"msg_id": msg_id, "msg_type": "execute_request", "username": self.name, "session": self.session,
                  "version": "5.3", "date": datetime.now(timezone.utc).isoformat()}
        content = {"code": code, "silent": False, "store_history": True, "user_expressions": {},
                   "allow_stdin": False, "stop_on_error": True}
        await self.connection.write_message(json.dumps({"header": header, "parent_header": {}, "metadata": {},
                                                        "content": content, "channel": "shell", "buffers": []}))
        text, errors, replied, idle = [], [], False, False
        while not (replied and idle):
            raw = await asyncio.wait_for(self.connection.read_message(), CELL)
            assert raw is not None, f"the kernel websocket of {self.name} closed"
            message = json.loads(raw)
            if message.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind, body = message["msg_type"], message["content"]
            if kind == "stream":
                text.append(body["text"])
            elif kind == "error":
                errors.append(f"{body['ename']}: {body['evalue']}")
            elif kind == "execute_reply":
                replied = True
                if body["status"] != "ok" and not errors:
                    errors.append(f"{body.get('ename')}: {body.get('evalue')}")
            elif kind == "status" and body["execution_state"] == "idle":
                idle = True
        return "".join(text), errors


def _open_session(hub: Hub, name: str) -> str:
    """A notebook session in the student's server, as JupyterLab opens one; its kernel id."""
    with _api(hub, name) as api:
        answer = api.post(f"/user/{name}/api/sessions", json={"path": NOTEBOOK, "type": "notebook", "name": "",
                                                              "kernel": {"name": "python3"}})
    assert answer.status_code == 201, f"{answer.status_code} {answer.text}\n{hub.tail()}"
    return str(answer.json()["kernel"]["id"])


async def _student_runs_the_notebook(hub: Hub, name: str, cells: list[str], other: str) -> dict[str, Any]:
    """All cells of the notebook, then a marker row and a try at the neighbour's database; what came out."""
    kernel_id = await asyncio.to_thread(_open_session, hub, name)
    async with Kernel(hub, name, kernel_id) as kernel:
        started = time.monotonic()
        for number, code in enumerate(cells, start=1):
            _, errors = await kernel.run(code)
            assert not errors, f"{name}: cell {number} of {NOTEBOOK} raised {errors}\n{code[:300]}"
        seconds = time.monotonic() - started
        marker, errors = await kernel.run(
            "import os\n"
            'lab.conn.execute("CREATE TABLE IF NOT EXISTS hub_marker (owner text)")\n'
            'lab.conn.execute("INSERT INTO hub_marker VALUES (%s)", (os.environ["JUPYTERHUB_USER"],))\n'
            'print(lab.conn.info.user, lab.conn.info.dbname, lab.loaded.documents)')
        assert not errors, errors
        neighbour, errors = await kernel.run(
            "import psycopg\n"
            f"other = os.environ['DATABASE_URL'].rsplit('/', 1)[0] + '/{classroom.student_name(other)}'\n"
            "try:\n"
            "    psycopg.connect(other, connect_timeout=10).close()\n"
            "    print('opened')\n"
            "except psycopg.OperationalError as err:\n"
            "    print('refused:', ' '.join(str(err).split()))\n"
            f"try:\n    open({str(hub.postgres.home / 'pg.password')!r}).read()\n    print('read the superuser password')\n"
            "except OSError as err:\n    print('no superuser password:', type(err).__name__)")
        assert not errors, errors
    return {"marker": marker.split(), "neighbour": neighbour, "seconds": seconds}


def _memory(name: str) -> tuple[float, float, int]:
    """(RSS MB, USS MB, processes) of everything running as the student: their server and its kernel."""
    uid = pwd.getpwnam(name).pw_uid
    rss = uss = 0.0
    count = 0
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if proc.uids().real == uid:
                info = proc.memory_full_info()
                rss, uss, count = rss + info.rss, uss + info.uss, count + 1
    return rss / 2**20, uss / 2**20, count


def _kernel_environment(name: str) -> dict[str, str]:
    uid = pwd.getpwnam(name).pw_uid
    for proc in psutil.process_iter(["cmdline"]):
        with contextlib.suppress(psutil.Error):
            if proc.uids().real == uid and "ipykernel_launcher" in " ".join(proc.info["cmdline"] or []):
                return dict(proc.environ())
    raise AssertionError(f"no kernel of {name} is running")


# --- the test ---------------------------------------------------------------------------------------

def test_two_students_run_a_notebook_at_once_each_in_their_own_database(hub: Hub, capsys):
    first, second = STUDENTS
    with httpx.Client(base_url=hub.url, timeout=60) as stranger:  # no session without the system password
        stranger.get("/hub/login")
        wrong = stranger.post("/hub/login", data={"username": first, "password": "not-the-password",
                                                  "_xsrf": stranger.cookies["_xsrf"]})
        assert wrong.status_code == 403 and "Invalid username or password" in wrong.text

    for name in STUDENTS:  # both log in and start their servers, one right after the other
        with contextlib.closing(_log_in(hub, name, hub.passwords[name])) as browser:
            hub.tokens[name] = _token(hub, browser, name)
        with _api(hub, name) as api:
            answer = api.post(f"/hub/api/users/{name}/server")
        assert answer.status_code in (201, 202), f"{answer.status_code} {answer.text}\n{hub.tail()}"
    for name in STUDENTS:
        _until(lambda name=name: _server_ready(hub, name), START, f"the server of {name}", hub)
        copied = Path(pwd.getpwnam(name).pw_dir) / "notebooks"
        assert (copied / Path(NOTEBOOK).name).is_file() and copied.stat().st_uid == pwd.getpwnam(name).pw_uid
        solutions = copied.parent / "solutions"  # 00_intro links to them
        assert sorted(p.name for p in solutions.glob("*.ipynb")) == sorted(p.name for p in (ROOT / "solutions").glob("*.ipynb"))
        assert (copied / ".labkit-delivered.json").stat().st_uid == pwd.getpwnam(name).pw_uid

    cells = _cells(ROOT / NOTEBOOK)

    async def both() -> list[dict[str, Any]]:
        return list(await asyncio.gather(_student_runs_the_notebook(hub, first, cells, second),
                                         _student_runs_the_notebook(hub, second, cells, first)))

    results = dict(zip(STUDENTS, asyncio.run(both())))
    admin_password = hub.postgres.admin_url.split(":")[2].split("@")[0]
    for name in STUDENTS:
        own = classroom.student_name(name)
        user, database, documents = results[name]["marker"]
        assert (user, database) == (own, own) and int(documents) > 0
        assert results[name]["neighbour"].startswith("refused: ") and "permission denied" in results[name]["neighbour"]
        assert "no superuser password: PermissionError" in results[name]["neighbour"]
        environment = _kernel_environment(name)
        assert environment["JUPYTERHUB_USER"] == name and f"/{own}" in environment["DATABASE_URL"]
        assert not any(admin_password in value for value in environment.values())
        assert not any("CONFIGPROXY_AUTH_TOKEN" == key for key in environment)

    with psycopg.connect(hub.postgres.admin_url, autocommit=True) as admin:  # the superuser's view
        assert admin.execute("SELECT to_regclass('hub_marker'), to_regclass('news')").fetchone() == (None, None)
    for name in STUDENTS:
        url = hub.postgres.admin_url.rsplit("/", 1)[0] + "/" + classroom.student_name(name)
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT owner FROM hub_marker").fetchall() == [(name,)]
            news_owner = conn.execute("SELECT tableowner FROM pg_tables WHERE tablename = 'news'").fetchone()
            assert news_owner == (classroom.student_name(name),)

    with capsys.disabled():
        for name in STUDENTS:
            rss, uss, count = _memory(name)
            print(f"\n[hub] {name}: {NOTEBOOK} in {results[name]['seconds']:.0f} s (both at once); "
                  f"memory of the server and its kernel ({count} processes): RSS {rss:.0f} MB, USS {uss:.0f} MB")
