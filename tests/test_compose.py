"""compose.yaml, the reference stack: pinned images, loopback ports, values matching the settings.

Docker does not run in CI, so the file is checked as data (parsed with PyYAML).
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from labkit.settings import COMPOSE_DEFAULTS

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((ROOT / "compose.yaml").read_text())


@pytest.fixture(scope="module")
def services(compose) -> dict:
    return compose["services"]


def test_has_the_two_services(services):
    assert set(services) == {"db", "ollama"}


@pytest.mark.parametrize("name", ["db", "ollama"])
def test_image_is_pinned_to_a_release(services, name):
    image = services[name]["image"]
    repo, _, tag = image.partition(":")
    assert tag and tag != "latest" and any(ch.isdigit() for ch in tag), image
    assert repo == {"db": "pgvector/pgvector", "ollama": "ollama/ollama"}[name]


def test_pgvector_image_is_0_8_on_pg16(services):
    assert services["db"]["image"] == "pgvector/pgvector:0.8.0-pg16"


@pytest.mark.parametrize("name", ["db", "ollama"])
def test_ports_are_loopback_only(services, name):
    ports = services[name]["ports"]
    assert ports, name
    for port in ports:
        assert isinstance(port, str) and port.startswith("127.0.0.1:"), port


@pytest.mark.parametrize("name", ["db", "ollama"])
def test_healthcheck_memory_limit_and_named_volume(compose, services, name):
    service = services[name]
    assert service["healthcheck"]["test"], name
    assert service["mem_limit"], name
    volume = service["volumes"][0].split(":")[0]
    assert volume in compose["volumes"], f"{name} should keep its data in a named volume"


def test_db_matches_compose_database_url(services):
    url = urlsplit(COMPOSE_DEFAULTS["database_url"])
    env = services["db"]["environment"]
    assert (env["POSTGRES_USER"], env["POSTGRES_PASSWORD"], env["POSTGRES_DB"]) == (
        url.username, url.password, url.path.lstrip("/"))
    assert f"127.0.0.1:{url.port}:5432" in services["db"]["ports"]
    assert "pg_isready" in " ".join(services["db"]["healthcheck"]["test"])


def test_ollama_matches_compose_host_and_keeps_two_models(services):
    url = urlsplit(COMPOSE_DEFAULTS["ollama_host"])
    ollama = services["ollama"]
    assert f"127.0.0.1:{url.port}:11434" in ollama["ports"]
    assert str(ollama["environment"]["OLLAMA_MAX_LOADED_MODELS"]) == "2"
    assert str(ollama["environment"]["OLLAMA_NUM_PARALLEL"]) == "1"
    assert ollama["healthcheck"]["test"][-2:] == ["ollama", "list"]


def test_run_sh_pulls_the_compose_models():
    script = (ROOT / "run.sh").read_text()
    for key in ("embed_model", "chat_model", "alt_chat_model"):
        assert COMPOSE_DEFAULTS[key] in script, f"run.sh --compose should pull {COMPOSE_DEFAULTS[key]}"
