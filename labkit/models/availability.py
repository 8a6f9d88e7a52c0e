"""Are the configured models on the model server? Checked once at start-up, before any work (taught in 01_corpus).

Every stack (the embedded server, compose, a native Ollama) answers ``/api/show`` for a
model it has and ``404 model '…' not found`` for one it has not. A missing model is
reported in one line that names ``ollama pull NAME``, instead of a traceback from deep
inside corpus loading. A model of the wrong kind (a chat model as EMBED_MODEL) is
reported too, when the server lists capabilities (Ollama ≥ 0.6 does).
"""

from __future__ import annotations

from typing import Any

from labkit.core.errors import LabError
from labkit.core.settings import Settings

__all__ = ["ModelMissing", "ModelServerUnavailable", "check_models", "configured_models"]


class ModelMissing(LabError):
    """A configured model is not on the model server (or cannot do its job); the message says what to run."""


class ModelServerUnavailable(LabError):
    """The model server refused the connection or did not answer in time; the message says where."""


def configured_models(settings: Settings) -> list[tuple[str, str, str]]:
    """(variable, model name, capability it needs) for every model the lab uses."""
    return [("EMBED_MODEL", settings.embed_model, "embedding"),
            ("CHAT_MODEL", settings.chat_model, "completion"),
            ("ALT_CHAT_MODEL", settings.alt_chat_model, "completion")]


def _pull_hint(settings: Settings, names: list[str]) -> str:
    prefix = "docker compose exec ollama " if settings.stack == "compose" else ""  # compose: Ollama's container
    return "run " + " and ".join(f"`{prefix}ollama pull {name}`" for name in names)


def check_models(client: Any, settings: Settings, models: list[tuple[str, str, str]] | None = None) -> None:
    """Raise ``ModelMissing`` (one line) unless every configured model is on the server and of the right kind.

    `client` is an ``ollama.Client`` (give it a timeout); `models` defaults to ``configured_models(settings)``
    (a command checks a model it was given as ``("--model", name, "completion")``). A server that refuses
    the connection or does not answer in time is ``ModelServerUnavailable``.
    """
    import httpx
    import ollama

    missing: list[tuple[str, str]] = []
    wrong: list[str] = []
    for variable, name, capability in configured_models(settings) if models is None else models:
        try:
            shown = client.show(name)
        except ollama.ResponseError as err:
            if err.status_code != 404:
                raise
            missing.append((variable, name))
            continue
        except (ConnectionError, httpx.TransportError) as err:
            reason = " ".join(str(err).split()) or type(err).__name__
            raise ModelServerUnavailable(
                f"The model server {settings.ollama_host} did not answer ({type(err).__name__}: {reason}). "
                "Check it with `./run.sh status`; start it with `./run.sh up`."
            ) from None
        capabilities = list(getattr(shown, "capabilities", None) or [])
        if capabilities and capability not in capabilities:
            wrong.append(f"{variable}={name} cannot do {capability} (it has: {', '.join(capabilities)})")
    where = f"the model server {settings.ollama_host}"
    if missing:
        names = list(dict.fromkeys(name for _, name in missing))
        listed = ", ".join(f"{name} ({variable})" for variable, name in missing)
        served = _served(client)
        how = "set the variable to" if all(v.isupper() for v, _ in missing) else "choose"  # --model is no variable
        choose = f"; or {how} a model it has: {', '.join(served)}" if served else ""
        raise ModelMissing(f"Not on {where}: {listed}. To get it, {_pull_hint(settings, names)}{choose}.")
    if wrong:
        raise ModelMissing(f"Wrong kind of model on {where}: {'; '.join(wrong)}.")


def _served(client: Any) -> list[str]:
    """Names the server has (``/api/tags``), or [] when it cannot say."""
    try:
        return sorted(str(m.model) for m in client.list().models if m.model)
    except Exception:  # noqa: BLE001 (only a hint in an error message)
        return []
