"""`./run.sh --compose`: port check before `docker compose up`, then pull only the models Ollama lacks.

Docker and Ollama cannot run here, so a FAKE `docker` executable (written below, first on PATH)
answers the few commands run.sh sends and records every call. run.sh itself runs for real:
`./run.sh --compose up` goes through the compose part and then hands over to `python -m labkit up`,
which finds nothing at DATABASE_URL (the fake starts no container) and says so in one line.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from labkit.core.settings import COMPOSE_DEFAULTS, NO_TOOLS_MODEL
from labkit.services.pgembedded import free_port

ROOT = Path(__file__).resolve().parent.parent
MODELS = [COMPOSE_DEFAULTS["embed_model"], COMPOSE_DEFAULTS["chat_model"], COMPOSE_DEFAULTS["alt_chat_model"],
          NO_TOOLS_MODEL]
OFFLINE = "Error: pull model manifest: Get \"https://registry.ollama.ai/v2/library/{model}/manifests/latest\": " \
          "dial tcp: lookup registry.ollama.ai: no such host"

# FAKE docker: records argv (and the port variables compose.yaml reads) as JSON lines in $FAKE_DOCKER_LOG.
# $FAKE_DOCKER_CACHED: models `ollama show` knows; $FAKE_DOCKER_RUNNING: services `compose ps` lists;
# $FAKE_DOCKER_OFFLINE=1: `ollama pull` fails the way Ollama does without network.
FAKE_DOCKER = f"""import json, os, sys

args = sys.argv[1:]
with open(os.environ["FAKE_DOCKER_LOG"], "a") as log:
    ports = [os.environ.get("LAB_COMPOSE_DB_PORT"), os.environ.get("LAB_COMPOSE_OLLAMA_PORT")]
    log.write(json.dumps({{"args": args, "ports": ports}}) + "\\n")
if args[:2] == ["compose", "version"]:
    print("Docker Compose version v2.40.3 (FAKE)")
elif args[:2] == ["compose", "ps"]:
    print("\\n".join(os.environ.get("FAKE_DOCKER_RUNNING", "").split()))
elif args[:6] == ["compose", "exec", "-T", "ollama", "ollama", "show"] and len(args) == 7:
    if args[6] not in os.environ.get("FAKE_DOCKER_CACHED", "").split():
        sys.exit(f"Error: model '{{args[6]}}' not found")
elif args[:6] == ["compose", "exec", "-T", "ollama", "ollama", "pull"] and len(args) == 7:
    if os.environ.get("FAKE_DOCKER_OFFLINE"):
        sys.exit({OFFLINE!r}.format(model=args[6].split(":")[0]))
    print("pulling manifest\\nsuccess")
elif args[:2] != ["compose", "up"]:
    sys.exit(f"FAKE docker: unexpected call {{args}}")
"""


def _venv_is_current() -> bool:
    """run.sh re-installs .venv when this hash (its own recipe) differs; a test must never start that."""
    digest = hashlib.sha256((ROOT / "requirements.txt").read_bytes() + (ROOT / "pyproject.toml").read_bytes()
                            + str(ROOT).encode()).hexdigest()
    stamp = ROOT / ".venv" / ".requirements.sha256"
    return stamp.exists() and stamp.read_text().strip() == digest


pytestmark = pytest.mark.skipif(not _venv_is_current(), reason="run.sh would re-install .venv: run ./run.sh once")


class Run:
    """One `./run.sh --compose up` with the fake docker; `calls` are the recorded docker calls."""

    def __init__(self, tmp_path: Path, db_port: int, cached: list[str], running: str = "", offline: bool = False,
                 ollama_port: int | None = None, **extra_env: str) -> None:
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        (tmp_path / "fake_docker.py").write_text(FAKE_DOCKER)
        docker = bin_dir / "docker"
        fake = shlex.quote(str(tmp_path / "fake_docker.py"))
        docker.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} {fake} \"$@\"\n")
        docker.chmod(0o755)
        self.log = tmp_path / "docker.log"
        self.ollama_port = ollama_port or free_port()
        env = {k: v for k, v in os.environ.items()
               if k not in ("LAB_STACK", "EMBED_MODEL", "CHAT_MODEL", "ALT_CHAT_MODEL")}
        env.update(PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", LABKIT_HOME=str(tmp_path / "home"),
                   FAKE_DOCKER_LOG=str(self.log), FAKE_DOCKER_CACHED=" ".join(cached),
                   FAKE_DOCKER_RUNNING=running, FAKE_DOCKER_OFFLINE="1" if offline else "",
                   DATABASE_URL=f"postgresql://rag:rag@127.0.0.1:{db_port}/rag",
                   OLLAMA_HOST=f"127.0.0.1:{self.ollama_port}",  # written as Ollama's docs do: no scheme
                   **extra_env)
        done = subprocess.run([str(ROOT / "run.sh"), "--compose", "up"], env=env, capture_output=True, text=True,
                              timeout=60)
        self.returncode, self.stderr = done.returncode, done.stderr
        self.calls = [json.loads(line) for line in self.log.read_text().splitlines()] if self.log.exists() else []

    def models(self, action: str) -> list[str]:
        """Models `ollama ACTION` was run for (the fake refuses any other form of `docker compose exec`)."""
        return [c["args"][6] for c in self.calls if c["args"][:2] == ["compose", "exec"] and c["args"][5] == action]

    @property
    def ups(self) -> list[dict]:
        return [c for c in self.calls if c["args"][:2] == ["compose", "up"]]

    @property
    def errors(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.startswith("[run.sh] error:")]


@pytest.fixture()
def listener() -> Iterator[tuple[int, int]]:
    """A python process listening on a free 127.0.0.1 port: (port, pid)."""
    code = ("import socket, sys, time\n"
            "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n"
            "print(s.getsockname()[1], flush=True); time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        yield int(proc.stdout.readline()), proc.pid
    finally:
        proc.kill()
        proc.wait()


def test_cached_models_are_not_pulled_and_the_lab_starts(tmp_path):
    db_port = free_port()
    run = Run(tmp_path, db_port, MODELS)
    assert run.errors == [], run.stderr
    assert len(run.ups) == 1 and run.ups[0]["args"][2:4] == ["-d", "--wait"]
    assert run.ups[0]["ports"] == [str(db_port), str(run.ollama_port)], "compose must publish where labkit looks"
    assert run.models("show") == MODELS
    assert run.models("pull") == []
    # run.sh handed over to `python -m labkit up`, which finds no database: the fake started nothing.
    assert run.returncode == 1
    assert f"DATABASE_URL=postgresql://rag:***@127.0.0.1:{db_port}/rag does not answer" in run.stderr  # redacted


def test_only_the_missing_model_is_pulled(tmp_path):
    missing = COMPOSE_DEFAULTS["chat_model"]
    run = Run(tmp_path, free_port(), [m for m in MODELS if m != missing])
    assert run.errors == [], run.stderr
    assert run.models("pull") == [missing]
    assert f"pulling {missing}" in run.stderr


def test_model_overrides_replace_the_defaults(tmp_path):
    run = Run(tmp_path, free_port(), MODELS, CHAT_MODEL="llama3.2:1b")
    assert run.models("show") == [MODELS[0], "llama3.2:1b", *MODELS[2:]]
    assert run.models("pull") == ["llama3.2:1b"]


def test_offline_and_a_model_missing_fails_with_one_line_naming_it(tmp_path):
    run = Run(tmp_path, free_port(), MODELS[:-1], offline=True)
    assert run.returncode != 0
    assert run.models("pull") == [NO_TOOLS_MODEL]
    assert len(run.errors) == 1, run.stderr
    assert NO_TOOLS_MODEL in run.errors[0] and "registry" in run.errors[0] and "could not be reached" in run.errors[0]
    assert "does not answer" not in run.stderr, "run.sh must stop before the lab starts"


def test_a_held_port_is_named_with_its_program_before_anything_starts(tmp_path, listener):
    port, pid = listener
    run = Run(tmp_path, port, MODELS)
    assert run.returncode != 0
    assert len(run.errors) == 1, run.stderr
    assert f"127.0.0.1:{port}" in run.errors[0] and "python" in run.errors[0] and f"pid {pid}" in run.errors[0]
    assert "DATABASE_URL" in run.errors[0]
    assert run.ups == [] and run.models("show") == []


def test_a_port_published_by_our_running_service_is_not_a_conflict(tmp_path, listener):
    port, _ = listener  # stands in for the port the running ollama container publishes
    run = Run(tmp_path, free_port(), MODELS, running="ollama", ollama_port=port)
    assert run.errors == [], run.stderr
    assert len(run.ups) == 1 and run.ups[0]["ports"][1] == str(port)
    assert ["compose", "ps", "--status", "running", "--services"] in [c["args"] for c in run.calls]
