"""`python -m labkit.modelserver --host 127.0.0.1 --port N`: the model server in the foreground."""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import sys

from .app import make_server
from .registry import Registry

DEFAULT_CHAT_MODEL = "qwen2.5-coder:1.5b"


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, refuse non-loopback addresses and serve until interrupted."""
    parser = argparse.ArgumentParser(prog="python -m labkit.modelserver", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1", help="loopback address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=11435)
    parser.add_argument("--num-ctx", type=int, default=4096, help="context window of each chat model")
    parser.add_argument("--threads", type=int, default=2, help="CPU threads per model")
    parser.add_argument("--load-timeout", type=float, default=120.0,
                        help="seconds a request waits for a loading model before a 503")
    parser.add_argument("--preload", action="store_true", help=f"start loading {DEFAULT_CHAT_MODEL} at startup")
    args = parser.parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # the e5 engine's OpenMP threads must not spin
    if not _is_loopback(args.host):
        parser.error(f"refusing to bind {args.host}: the model server listens on loopback only (127.0.0.1)")
    registry = Registry(n_ctx=args.num_ctx, threads=args.threads, load_timeout=args.load_timeout)
    server = make_server(args.host, args.port, registry)
    if args.preload:
        registry.start_loading(DEFAULT_CHAT_MODEL)
    logging.getLogger("labkit.modelserver").info("listening on http://%s:%d", args.host, server.server_port)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
