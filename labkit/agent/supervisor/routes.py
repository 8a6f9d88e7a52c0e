"""The supervisor's routing decision: the chat model's JSON, validated against the ROUTES enum.

The model is asked for ``{"route": "<one of ROUTES>"}``. Anything else (no JSON, a value outside
the enum, stray markup) is not guessed at: the caller's deterministic fallback decides, and the
decision records that it did (``fallback`` is True, ``raw`` keeps what the model said).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

__all__ = ["ROUTES", "RouteDecision", "parse_route"]

ROUTES = ("documents", "data", "both", "smalltalk", "out_of_scope")
_OBJECT = re.compile(r"\{[^{}]*\}", re.DOTALL)


@dataclass(frozen=True)
class RouteDecision:
    """A validated route; `fallback` says the model's answer was invalid and `fallback_route` was used."""

    route: str
    fallback: bool
    raw: str


def parse_route(raw: str, fallback_route: str) -> RouteDecision:
    """The first JSON object in `raw` whose "route" is one of ROUTES; otherwise `fallback_route`, recorded."""
    if fallback_route not in ROUTES:
        raise ValueError(f"fallback route {fallback_route!r} is not one of {ROUTES}")
    for match in _OBJECT.finditer(raw or ""):
        try:
            value = json.loads(match.group(0))
        except json.JSONDecodeError:
            continue
        route = value.get("route") if isinstance(value, dict) else None
        if isinstance(route, str) and route.strip().lower() in ROUTES:
            return RouteDecision(route.strip().lower(), False, raw)
    return RouteDecision(fallback_route, True, raw)
