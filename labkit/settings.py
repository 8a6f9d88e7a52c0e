"""Settings of the lab, read once from the environment (taught in 01_corpus).

Defaults match the embedded stack (no Docker). The reference stack in
``compose.yaml`` is selected with ``LAB_STACK=compose``; its values are listed
in ``COMPOSE_DEFAULTS`` beside the embedded ones, so both live in one place.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

__all__ = ["Settings", "get_settings", "lab_home", "EMBEDDED_DEFAULTS", "COMPOSE_DEFAULTS"]

# Ollama-style model names served by the embedded model server (labkit.modelserver).
EMBEDDED_DEFAULTS = {
    "embed_model": "multilingual-e5-small:q4",
    "chat_model": "qwen2.5-coder:1.5b",
    "alt_chat_model": "qwen2.5-coder:0.5b",
}
# Models that `./run.sh --compose` pulls into the ollama/ollama container.
COMPOSE_DEFAULTS = {
    "embed_model": "qwen3-embedding:0.6b",
    "chat_model": "qwen3:1.7b",
    "alt_chat_model": "deepseek-r1:1.5b",
    "database_url": "postgresql://rag:rag@127.0.0.1:5432/rag",
    "ollama_host": "http://127.0.0.1:11434",
}

# Ports the embedded stack tries first; when taken by something else it picks free ones.
EMBEDDED_PG_PORT = 55432
EMBEDDED_MODEL_PORT = 11435


def lab_home() -> Path:
    """Folder for state, logs, the embedded database and joined model files.

    Never inside the repository and, for root, never under /root: the embedded
    Postgres opens read access on every parent folder of its data directory.
    """
    explicit = os.environ.get("LABKIT_HOME")
    if explicit:
        return Path(explicit).expanduser().resolve()
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        return Path("/var/tmp/labkit")
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "labkit"


@dataclass(frozen=True)
class Settings:
    """Where the services are and which models to use."""

    stack: str  # "embedded" or "compose"
    database_url: str | None  # None: use the embedded Postgres started by `up`
    ollama_host: str | None  # None: use the embedded model server started by `up`
    embed_model: str
    chat_model: str
    alt_chat_model: str
    home: Path
    db_name: str = "lab"

    def with_services(self, database_url: str, ollama_host: str) -> Settings:
        """Return a copy pointing at concrete service addresses."""
        return replace(self, database_url=database_url, ollama_host=ollama_host)


def get_settings() -> Settings:
    """Read settings from the environment (DATABASE_URL, OLLAMA_HOST, EMBED_MODEL, CHAT_MODEL, ...)."""
    stack = os.environ.get("LAB_STACK", "embedded").strip().lower()
    if stack not in ("embedded", "compose"):
        raise ValueError(f"LAB_STACK must be 'embedded' or 'compose', not {stack!r}")
    defaults = COMPOSE_DEFAULTS if stack == "compose" else EMBEDDED_DEFAULTS
    return Settings(
        stack=stack,
        database_url=os.environ.get("DATABASE_URL") or defaults.get("database_url"),
        ollama_host=os.environ.get("OLLAMA_HOST") or defaults.get("ollama_host"),
        embed_model=os.environ.get("EMBED_MODEL") or defaults["embed_model"],
        chat_model=os.environ.get("CHAT_MODEL") or defaults["chat_model"],
        alt_chat_model=os.environ.get("ALT_CHAT_MODEL") or defaults["alt_chat_model"],
        home=lab_home(),
    )
