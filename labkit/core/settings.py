"""Settings of the lab, read once from the environment (taught in 01_corpus).

Defaults match the embedded stack (no Docker). The reference stack in
``compose.yaml`` is selected with ``LAB_STACK=compose``; its values are listed
in ``COMPOSE_DEFAULTS`` beside the embedded ones, so both live in one place.

Class mode (hub/README.md): a server started by JupyterHub has ``JUPYTERHUB_USER`` set, and the
hub gives it the student's own ``DATABASE_URL`` and the shared ``OLLAMA_HOST``
(``labkit.services.classroom``). Without them labkit refuses to start anything (``ClassModeError``)
rather than fall back to a stack of its own or to the compose defaults shared by everyone.
"""

from __future__ import annotations

import getpass
import ipaddress
import os
import re
import socket
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import urlsplit

from labkit.core.errors import LabError

__all__ = ["Settings", "get_settings", "lab_home", "normalize_host", "redact_url", "client_name", "ClassModeError",
           "EMBEDDED_DEFAULTS", "COMPOSE_DEFAULTS", "NO_TOOLS_MODEL", "STUDENT_VARIABLE", "CLIENT_HEADER"]

# Ollama-style model names served by the embedded model server (labkit.services.modelserver).
EMBEDDED_DEFAULTS = {
    "embed_model": "multilingual-e5-small:q4",
    "chat_model": "qwen2.5-coder:1.5b",
    "alt_chat_model": "qwen2.5-coder:0.5b",
    # The 0.5B weights registered without tool support (labkit.services.modelserver.registry): exercise 08's
    # model that cannot call tools, refused with Ollama's own 400 «… does not support tools».
    "no_tools_model": "qwen2.5-coder-notools:0.5b",
}
# A reasoning model without tool support: on Ollama a request with tools gets "400 ... does not support tools".
# The reference stack's model without tools (compose.yaml pulls it); the embedded stack's is in EMBEDDED_DEFAULTS.
NO_TOOLS_MODEL = "deepseek-r1:1.5b"
# Models of the reference stack (compose.yaml, and the README's native-Ollama recipe).
# Both chat models support tools; exercise 08 adds NO_TOOLS_MODEL to show a model that does not.
COMPOSE_DEFAULTS = {
    "embed_model": "qwen3-embedding:0.6b",
    "chat_model": "qwen3:1.7b",
    "alt_chat_model": "qwen3:0.6b",
    "database_url": "postgresql://rag:rag@127.0.0.1:5432/rag",
    "ollama_host": "http://127.0.0.1:11434",
    "no_tools_model": NO_TOOLS_MODEL,
}


# Ports the embedded stack tries first; when taken by something else it picks free ones.
EMBEDDED_PG_PORT = 55432
EMBEDDED_MODEL_PORT = 11435
# Set by JupyterHub in every single-user server's environment: the student's name.
STUDENT_VARIABLE = "JUPYTERHUB_USER"
# The header naming the student in every model request (client_name()); the model server's fair queue reads it.
CLIENT_HEADER = "X-Labkit-Client"


class ClassModeError(LabError):
    """A server started by JupyterHub lacks the student's services (the message, in Russian, says what to do)."""


def lab_home() -> Path:
    """Folder for state, logs, the embedded database and joined model files.

    Never inside the repository. For root it is ``/var/lib/labkit``: not in a world-writable
    folder (where another user could create it first) and reachable by the system user the
    embedded Postgres runs as, without opening any folder on the way. ``labkit.services.home``
    checks it (a real folder, ours, closed to others) before anything is written there.
    A symlink given as LABKIT_HOME is not resolved here, so that check can refuse it.
    """
    explicit = os.environ.get("LABKIT_HOME")
    if explicit:
        return Path(os.path.abspath(os.path.expanduser(explicit)))
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        return Path("/var/lib/labkit")
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "labkit"


def redact_url(url: str | None) -> str:
    """`url` with its password replaced by ``***`` (for messages and logs)."""
    return re.sub(r"//([^:/@]*):[^@/]*@", r"//\1:***@", url or "")


def normalize_host(host: str | None) -> str:
    """OLLAMA_HOST as a full URL, exactly as the official ``ollama`` client reads it.

    Ollama's own docs write the variable without a scheme (``0.0.0.0:11434``); the client
    accepts that, so everything in labkit uses this one normalised form (its health check too).

    >>> normalize_host("127.0.0.1:11434"), normalize_host(":56789"), normalize_host("https://example.com/")
    ('http://127.0.0.1:11434', 'http://127.0.0.1:56789', 'https://example.com:443')
    """
    host, port = (host or "").strip(), 11434
    scheme, _, rest = host.partition("://")
    if not rest:
        scheme, rest = "http", host
    elif scheme == "http":
        port = 80
    elif scheme == "https":
        port = 443
    parts = urlsplit(f"{scheme}://{rest}")
    host = parts.hostname or "127.0.0.1"
    port = parts.port or port
    try:
        if isinstance(ipaddress.ip_address(host), ipaddress.IPv6Address):
            host = f"[{host}]"
    except ValueError:
        pass
    if path := parts.path.strip("/"):
        return f"{scheme}://{host}:{port}/{path}"
    return f"{scheme}://{host}:{port}"


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
    student: str | None = None  # the JupyterHub user in class mode, else None
    no_tools_model: str = NO_TOOLS_MODEL  # a chat model that cannot call tools (exercise 08), env NO_TOOLS_MODEL

    def __repr__(self) -> str:  # never print the database password (notebooks display objects)
        fields = {name: getattr(self, name) for name in self.__dataclass_fields__}
        fields["database_url"] = redact_url(self.database_url) if self.database_url else None
        return f"Settings({', '.join(f'{k}={v!r}' for k, v in fields.items())})"

    def with_services(self, database_url: str, ollama_host: str) -> Settings:
        """Return a copy pointing at concrete service addresses."""
        return replace(self, database_url=database_url, ollama_host=ollama_host)


def get_settings() -> Settings:
    """Read settings from the environment (DATABASE_URL, OLLAMA_HOST, EMBED_MODEL, CHAT_MODEL, ...)."""
    stack = os.environ.get("LAB_STACK", "embedded").strip().lower()
    if stack not in ("embedded", "compose"):
        raise ValueError(f"LAB_STACK must be 'embedded' or 'compose', not {stack!r}")
    student = os.environ.get(STUDENT_VARIABLE) or None
    if student:
        _check_class_mode(student)
    defaults = COMPOSE_DEFAULTS if stack == "compose" else EMBEDDED_DEFAULTS
    return Settings(
        stack=stack,
        database_url=os.environ.get("DATABASE_URL") or defaults.get("database_url"),
        ollama_host=_host(os.environ.get("OLLAMA_HOST") or defaults.get("ollama_host")),
        embed_model=os.environ.get("EMBED_MODEL") or defaults["embed_model"],
        chat_model=os.environ.get("CHAT_MODEL") or defaults["chat_model"],
        alt_chat_model=os.environ.get("ALT_CHAT_MODEL") or defaults["alt_chat_model"],
        home=lab_home(),
        student=student,
        no_tools_model=os.environ.get("NO_TOOLS_MODEL") or defaults["no_tools_model"],
    )


def _check_class_mode(student: str) -> None:
    """ClassModeError unless the hub gave this student's server its own database and the shared model server."""
    missing = [name for name in ("DATABASE_URL", "OLLAMA_HOST") if not os.environ.get(name)]
    if missing:
        raise ClassModeError(
            f"Этот сервер Jupyter запустил JupyterHub для пользователя {student}, но хаб не передал ему "
            f"{' и '.join(missing)}. В режиме класса у каждого студента своя база данных, а сервер моделей "
            "общий, и их адреса задаёт хаб; свой стенд labkit здесь не запускает, чтобы не писать в чужие "
            "данные и не занимать память общей машины. Сообщите преподавателю (hub/README.md), а после "
            "исправления перезапустите сервер: File → Hub Control Panel → Stop My Server, затем Start My Server.")


def client_name() -> str:
    """Who this lab is to the model server's fair queue (header X-Labkit-Client): the JupyterHub user, else user@host."""
    name = os.environ.get(STUDENT_VARIABLE)
    if not name:
        try:
            user = getpass.getuser()
        except (KeyError, OSError):  # no passwd entry for our uid (some containers)
            user = f"uid{os.getuid()}" if hasattr(os, "getuid") else "user"
        name = f"{user}@{socket.gethostname()}"
    return "".join(ch for ch in name if 32 < ord(ch) < 127)[:64] or "unknown"


def _host(value: str | None) -> str | None:
    """normalize_host for a configured value; None (use the embedded server) stays None."""
    if not value:
        return None
    try:
        return normalize_host(value)
    except ValueError as err:  # e.g. a port that is not a number
        raise ValueError(f"OLLAMA_HOST={value!r} is not [scheme://]host[:port]: {err}") from None
