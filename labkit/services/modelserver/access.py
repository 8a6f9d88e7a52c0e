"""Who may call the model server: Ollama 0.13's Origin and Host checks (behind every notebook from 01_corpus on).

A web page open in the student's browser can send requests to 127.0.0.1 (cross-site
requests), and a DNS-rebinding page can even read the answers. Ollama refuses both with a
403, and so does this server, with Ollama's rules (ollama/ollama v0.13.0, 604e43b28d12):

- Origin: gin-contrib/cors v1.7.2 (cors.go L70-99 `applyCors`, L101-116 `validateWildcardOrigin`,
  L125-141 `validateOrigin`; config.go L143-173 `parseWildcardRules`), configured in ollama
  server/routes.go L1453-1478 with `AllowWildcard` and the list of envconfig/config.go L60-83
  `AllowedOrigins`: OLLAMA_ORIGINS (comma separated) plus http(s)://localhost, 127.0.0.1 and
  0.0.0.0 with or without any port, app://*, file://*, tauri://*, vscode-webview://*,
  vscode-file://*. No Origin, or one equal to http(s)://<Host>, is no cross-site request.
- Host: server/routes.go L1414-1449 `allowedHostsMiddleware` with L1387-1412 `allowedHost` and
  L1366-1385 `isLocalIP`. On a loopback listener the Host (port stripped) must be empty (an
  HTTP/1.0 request without Host), localhost, this machine's hostname, a name under .localhost,
  .local or .internal, or an IP address that is loopback, private, unspecified or one of this
  machine's own; anything else is a DNS-rebinding name and gets 403.

Two additions to Ollama's lists, both loopback: origins http(s)://[::1] (any port), and a
bracketed IPv6 Host without port (`[::1]`), which Go's SplitHostPort leaves bracketed and Ollama
therefore refuses.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable

__all__ = ["DEFAULT_ORIGINS", "allowed_origins", "origin_allowed", "host_allowed", "host_is_ip", "host_name"]

# envconfig/config.go L65-80, in Ollama's order; the [::1] entries are this server's addition.
DEFAULT_ORIGINS: tuple[str, ...] = tuple(
    f"{scheme}://{host}{port}"
    for host in ("localhost", "127.0.0.1", "0.0.0.0", "[::1]")
    for scheme, port in (("http", ""), ("https", ""), ("http", ":*"), ("https", ":*"))
) + ("app://*", "file://*", "tauri://*", "vscode-webview://*", "vscode-file://*")

_LOCAL_SUFFIXES = (".localhost", ".local", ".internal")  # routes.go L1398-1409
# Go's netip.Addr.IsPrivate (RFC 1918, RFC 4193); Python's is_private covers more ranges.
_PRIVATE = tuple(ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7"))


def allowed_origins(ollama_origins: str = "") -> tuple[str, ...]:
    """The origin patterns in force: OLLAMA_ORIGINS's entries first, then Ollama's defaults."""
    extra = tuple(ollama_origins.split(",")) if ollama_origins else ()
    return extra + DEFAULT_ORIGINS


def origin_allowed(origin: str, host: str, patterns: Iterable[str]) -> bool:
    """Whether a request with this Origin header passes gin-contrib/cors as Ollama configures it."""
    if not origin or origin in (f"http://{host}", f"https://{host}"):
        return True  # applyCors L72-81: no Origin, or the same origin, is no cross-site request
    for pattern in patterns:
        exact = pattern.strip().lower()  # normalize(): exact entries are trimmed and lowercased
        if exact == "*" or exact == origin:
            return True
        if pattern.count("*") == 1:  # a wildcard rule keeps the entry as written
            prefix, suffix = pattern.split("*")
            if origin.startswith(prefix) and origin.endswith(suffix):
                return True
    return False


def host_name(host_header: str) -> str:
    """The Host header without its port, as Go's net.SplitHostPort splits it (brackets removed)."""
    if host_header.startswith("["):
        end = host_header.find("]")
        if end > 0 and (end == len(host_header) - 1 or host_header[end + 1] == ":"):
            return host_header[1:end]
        return host_header
    if host_header.count(":") == 1:
        return host_header.split(":", 1)[0]
    return host_header  # no port, or a bare IPv6 address


def _address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped  # Go's netip unmaps ::ffff:a.b.c.d before these tests
    return address


def host_is_ip(host_header: str) -> bool:
    """Whether the Host names an IP address (Ollama then skips its OPTIONS shortcut)."""
    return _address(host_name(host_header)) is not None


def _is_local_ip(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """routes.go isLocalIP: the address belongs to one of this machine's interfaces."""
    import psutil

    for entries in psutil.net_if_addrs().values():
        for entry in entries:
            own = _address(entry.address.split("%", 1)[0])
            if own is not None and own == address:
                return True
    return False


def host_allowed(host_header: str, listener: str) -> bool:
    """Whether a request with this Host header passes Ollama's allowedHostsMiddleware on `listener`."""
    bound = _address(listener)
    if bound is not None and not bound.is_loopback:
        return True  # routes.go L1421-1424: the check guards loopback listeners only
    host = host_name(host_header)
    address = _address(host)
    if address is not None and (address.is_loopback or address.is_unspecified
                                or any(address in net for net in _PRIVATE) or _is_local_ip(address)):
        return True
    host = host.lower()
    if host in ("", "localhost") or host == socket.gethostname().lower():
        return True
    return host.endswith(_LOCAL_SUFFIXES)
