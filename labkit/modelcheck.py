"""Are the configured models on the model server? Checked once at start-up, before any work (taught in 01_corpus).

Every stack (the embedded server, compose, a native Ollama) answers ``/api/show`` for a
model it has and ``404 model '…' not found`` for one it has not. A missing model is
reported in one line that names ``ollama pull NAME``, instead of a traceback from deep
inside corpus loading. A model of the wrong kind (a chat model as EMBED_MODEL) is
reported too, when the server lists capabilities (Ollama ≥ 0.6 does).
"""

from __future__ import annotations

from typing import Any

from .errors import LabError
from .settings import Settings

__all__ = ["ModelMissing", "check_models", "configured_models"]


class ModelMissing(LabError):
    """A configured model is not on the model server (or cannot do its job); the message says what to run."""


def configured_models(settings: Settings) -> list[tuple[str, str, str]]:
    """(variable, model name, capability it needs) for every model the lab uses."""
    return [("EMBED_MODEL", settings.embed_model, "embedding"),
            ("CHAT_MODEL", settings.chat_model, "completion"),
            ("ALT_CHAT_MODEL", settings.alt_chat_model, "completion")]


def _pull_hint(settings: Settings, names: list[str]) -> str:
    prefix = "docker compose exec ollama " if settings.stack == "compose" else ""  # compose: Ollama's container
    return "run " + " and ".join(f"`{prefix}ollama pull {name}`" for name in names)


def check_models(client: Any, settings: Settings) -> None:
    """Raise ``ModelMissing`` (one line) unless every configured model is on the server and of the right kind.

    `client` is an ``ollama.Client``. Other errors (a server that does not answer) are raised as they are.
    """
    import ollama

    missing: list[tuple[str, str]] = []
    wrong: list[str] = []
    for variable, name, capability in configured_models(settings):
        try:
            shown = client.show(name)
        except ollama.ResponseError as err:
            if err.status_code != 404:
                raise
            missing.append((variable, name))
            continue
        capabilities = list(getattr(shown, "capabilities", None) or [])
        if capabilities and capability not in capabilities:
            wrong.append(f"{variable}={name} cannot do {capability} (it has: {', '.join(capabilities)})")
    where = f"the model server {settings.ollama_host}"
    if missing:
        names = list(dict.fromkeys(name for _, name in missing))
        listed = ", ".join(f"{name} ({variable})" for variable, name in missing)
        served = _served(client)
        choose = f"; or set the variable to a model it has: {', '.join(served)}" if served else ""
        raise ModelMissing(f"Not on {where}: {listed}. To get it, {_pull_hint(settings, names)}{choose}.")
    if wrong:
        raise ModelMissing(f"Wrong kind of model on {where}: {'; '.join(wrong)}.")


def _served(client: Any) -> list[str]:
    """Names the server has (``/api/tags``), or [] when it cannot say."""
    try:
        return sorted(str(m.model) for m in client.list().models if m.model)
    except Exception:  # noqa: BLE001 (only a hint in an error message)
        return []
