"""`python -m labkit.services.modelserver --host 127.0.0.1 --port N`: the model server in the foreground."""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import signal
import sys
from types import FrameType

from labkit.core.openmp import share_the_cpu
from labkit.services.modelserver import transport
from labkit.services.modelserver.app import make_server
from labkit.services.modelserver.fairqueue import MAX_QUEUE
from labkit.services.modelserver.registry import Registry
from labkit.services.modelserver.weights import WeightsError, discard_partial_files, prepare_model

DEFAULT_CHAT_MODEL = "qwen2.5-coder:1.5b"


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _env_int(name: str, default: int) -> int:
    """An integer environment variable (Ollama's OLLAMA_MAX_QUEUE), or `default` when unset or not a number."""
    try:
        return int(os.environ.get(name) or default)
    except ValueError:
        return default


def _terminate(signum: int, frame: FrameType | None) -> None:
    """SIGTERM: remove a half-joined model file, then end at once (128 + signal, as the shell reports it)."""
    discard_partial_files()
    os._exit(128 + signum)


def _fail(message: str) -> int:
    print(f"labkit.services.modelserver: {' '.join(message.split())}", file=sys.stderr)  # one line, no traceback
    return 1


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, refuse non-loopback addresses and serve until interrupted.

    Exit codes: 0 after Ctrl-C (130 while still joining weights), 1 when the weights or the port
    are unusable (one line on stderr), 2 for bad arguments, 143 after SIGTERM.
    """
    parser = argparse.ArgumentParser(prog="python -m labkit.services.modelserver", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1", help="loopback address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=11435)
    parser.add_argument("--num-ctx", type=int, default=4096, help="context window of each chat model")
    parser.add_argument("--threads", type=int, default=2, help="CPU threads per model")
    parser.add_argument("--load-timeout", type=float, default=120.0,
                        help="seconds a request waits for a loading model before a 503")
    parser.add_argument("--preload", action="store_true",
                        help=f"check (or join) the weights of {DEFAULT_CHAT_MODEL} before listening, then load it")
    parser.add_argument("--max-connections", type=int, default=transport.MAX_CONNECTIONS,
                        help="connections served at once; more get 503 (default %(default)s)")
    parser.add_argument("--read-timeout", type=float, default=transport.READ_TIMEOUT,
                        help="seconds a client has to send a whole request (default %(default)s)")
    parser.add_argument("--max-queue", type=int, default=_env_int("OLLAMA_MAX_QUEUE", MAX_QUEUE),
                        help="chat requests that may wait for their turn; more get 503, as Ollama's "
                             "OLLAMA_MAX_QUEUE (default: that variable, else %(default)s)")
    args = parser.parse_args(argv)
    if args.max_queue < 0:
        parser.error("--max-queue must be 0 or more")
    logging.basicConfig(stream=sys.stderr, level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    share_the_cpu()  # before the engines load: their OpenMP threads must not spin on a core the other needs
    if not _is_loopback(args.host):
        parser.error(f"refusing to bind {args.host}: the model server listens on loopback only (127.0.0.1)")
    signal.signal(signal.SIGTERM, _terminate)
    registry = Registry(n_ctx=args.num_ctx, threads=args.threads, load_timeout=args.load_timeout)
    try:
        if args.preload:
            prepare_model(DEFAULT_CHAT_MODEL)
        server = make_server(args.host, args.port, registry, ollama_origins=os.environ.get("OLLAMA_ORIGINS", ""),
                             max_connections=args.max_connections, read_timeout=args.read_timeout,
                             max_queue=args.max_queue)
    except WeightsError as exc:
        return _fail(str(exc))
    except OSError as exc:
        return _fail(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}")
    except KeyboardInterrupt:  # while joining the weights: the partial file is already gone
        return 130
    if args.preload:
        registry.start_loading(DEFAULT_CHAT_MODEL)
    logging.getLogger("labkit.services.modelserver").info("listening on http://%s:%d", args.host, server.server_port)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
