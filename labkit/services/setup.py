"""The edge: build the lab context once, in a notebook's first code cell or a command (taught in 01_corpus).

``setup()`` is the only place besides the stack commands where services are found or
started: it asks ``labkit.services.stack`` for the services (starting the embedded ones when
they are down), opens one connection, makes the model client and loads the corpus.
Everything else receives the resulting ``Lab``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import httpx
import psycopg

from labkit.core.context import Lab
from labkit.core.corpora import DEFAULT_CORPUS
from labkit.core.corpus import Corpus
from labkit.core.settings import CLIENT_HEADER, Settings, client_name
from labkit.core.text import count
from labkit.models.availability import check_models
from labkit.services.stack import StackError, ensure_stack
from labkit.store.connection import connect
from labkit.store.loading import ensure_corpus

if TYPE_CHECKING:
    import ollama

__all__ = ["setup", "open_lab", "model_client", "closed_port_chat", "MODEL_TIMEOUT", "PROBE_TIMEOUT"]

# Every request to the model server has a deadline. Generation on 2 CPU cores can take minutes
# (a cold model load included), so reading waits long; connecting to a server that is down does not.
MODEL_TIMEOUT = httpx.Timeout(300.0, connect=5.0)
# The start-up check asks only for model metadata: a server that cannot say within this is not working.
PROBE_TIMEOUT = httpx.Timeout(15.0, connect=5.0)


def model_client(host: str | None, timeout: httpx.Timeout = MODEL_TIMEOUT, client: str | None = None) -> ollama.Client:
    """An ``ollama.Client`` for `host` whose every request gives up after `timeout`. Taught in 01_corpus.

    Every request names `client` (default ``client_name()``: the JupyterHub user, else user@host) in the
    ``X-Labkit-Client`` header, so labkit's model server queues a class's chat requests fairly per student.
    """
    import ollama  # the HTTP client stack is loaded only when a lab is built

    return ollama.Client(host=host, timeout=timeout, headers={CLIENT_HEADER: client or client_name()})


def closed_port_chat() -> Any:
    """The chat method of a client whose server is down: a loopback port nobody listens on. Taught in 20_supervisor.

    Nothing is faked: every request fails the way it fails when the model server is stopped (connection refused).
    """
    import socket

    with socket.socket() as sock:  # the port is free once the socket closes, and nothing else binds it meanwhile
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return model_client(f"http://127.0.0.1:{port}").chat


def open_lab(settings: Settings, *, load: bool = True, corpus: Corpus = DEFAULT_CORPUS) -> Lab:
    """A ``Lab`` on services that already run at `settings`, searching `corpus`; with `load`, it is loaded too.

    Taught in 01_corpus. Starts nothing: use ``setup()`` to start the embedded stack when needed.
    Every configured model is checked first (``ModelMissing`` names the ``ollama pull`` to run).
    """
    check_models(model_client(settings.ollama_host, PROBE_TIMEOUT), settings)
    models = model_client(settings.ollama_host)
    conn = connect(settings)
    lab = Lab(settings, conn, models, corpus)
    if load:
        try:
            ensure_corpus(lab)
        except psycopg.OperationalError as err:
            lost = conn.broken
            conn.close()
            if not lost:
                raise
            reason = " ".join(str(err).split())[:200]
            raise StackError(  # the server went away mid-load (killed, restarted, out of memory)
                f"Postgres closed the connection while the corpus was loading ({reason}). The load is one "
                "transaction, so nothing was half-written: run `./run.sh up` (it restarts what is down), "
                "then run this again.") from None
        except BaseException:
            conn.close()
            raise
    return lab


def setup(*, start: bool = True, load: bool = True, quiet: bool = False, corpus: Corpus = DEFAULT_CORPUS) -> Lab:
    """The lab context for a notebook or a command: services found (or started), corpus loaded. Taught in 01_corpus.

    ``start=False`` only checks the services and raises ``StackError`` when one is down;
    ``quiet=True`` prints no summary line; `corpus` is the corpus the lab searches (default: the news).
    """
    lab = open_lab(ensure_stack(start=start), load=load, corpus=corpus)
    if not quiet:
        print(describe(lab))
    return lab


def describe(lab: Lab) -> str:
    """One Russian line saying where the lab's services are and what loading did."""
    info = lab.conn.info
    line = (f"Стенд: база {info.host}:{info.port}/{info.dbname}, сервер моделей {lab.settings.ollama_host}, "
            f"эмбеддинги {lab.embed_model}, чат {lab.chat_model}.")
    loaded = lab.loaded
    if loaded is not None:
        units = (count(loaded.documents, 'фрагмент', 'фрагмента', 'фрагментов') + " документов"
                 if lab.corpus.parent is not None else count(loaded.documents, 'документ', 'документа', 'документов'))
        line += (f"\nКорпус «{lab.corpus.title}»: {units}, "
                 f"векторы размерности {loaded.dim} в {loaded.table}; "
                 f"новых эмбеддингов при загрузке: {loaded.embedded_texts}"
                 + (f", векторов из файла курса: {loaded.shipped_texts}" if loaded.shipped_texts else "") + ".")
        if loaded.kept:
            line += (f"\nСтроки {lab.corpus.table} с id {', '.join(map(str, loaded.kept))} изменены не загрузчиком и "
                     "оставлены как есть; вернуть текст корпуса: lk.ensure_corpus(lab, restore=True).")
    return line
