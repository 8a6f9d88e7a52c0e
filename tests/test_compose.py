"""compose.yaml, the reference stack: pinned images, loopback ports, values matching the settings.

Docker does not run in CI, so the file is checked as data (parsed with PyYAML).
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from labkit.core.settings import COMPOSE_DEFAULTS, NO_TOOLS_MODEL

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((ROOT / "compose.yaml").read_text())


@pytest.fixture(scope="module")
def services(compose) -> dict:
    return compose["services"]


def published(port: str) -> str:
    """A ports entry as docker compose reads it with no variable set: ``${VAR:-5432}`` becomes ``5432``."""
    return re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", port)


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
    assert [published(port) for port in services["db"]["ports"]] == [f"127.0.0.1:{url.port}:5432"]
    assert "pg_isready" in " ".join(services["db"]["healthcheck"]["test"])


def test_ollama_matches_compose_host_and_keeps_two_models(services):
    url = urlsplit(COMPOSE_DEFAULTS["ollama_host"])
    ollama = services["ollama"]
    assert [published(port) for port in ollama["ports"]] == [f"127.0.0.1:{url.port}:11434"]
    assert str(ollama["environment"]["OLLAMA_MAX_LOADED_MODELS"]) == "2"
    assert str(ollama["environment"]["OLLAMA_NUM_PARALLEL"]) == "1"
    assert ollama["healthcheck"]["test"][-2:] == ["ollama", "list"]


def test_port_variables_are_the_ones_run_sh_sets(services):
    script = (ROOT / "run.sh").read_text()
    for name, variable in [("db", "LAB_COMPOSE_DB_PORT"), ("ollama", "LAB_COMPOSE_OLLAMA_PORT")]:
        assert f"${{{variable}:-" in services[name]["ports"][0]
        assert f"{variable}=" in script, f"run.sh --compose should set {variable}"


def test_header_lists_the_four_models_and_why_deepseek_is_there():
    header = (ROOT / "compose.yaml").read_text().split("\nname:")[0]
    for model in (COMPOSE_DEFAULTS["embed_model"], COMPOSE_DEFAULTS["chat_model"], COMPOSE_DEFAULTS["alt_chat_model"],
                  NO_TOOLS_MODEL):
        assert f"#   {model} " in header, f"compose.yaml's header should list {model}"
    no_tools_line = next(line for line in header.splitlines() if NO_TOOLS_MODEL in line)
    assert "tools" in no_tools_line and "exercise 08" in no_tools_line
