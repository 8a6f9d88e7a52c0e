"""The supervisor over the document agent and the SQL agent (issue 23): routing first."""

from labkit.agent.supervisor.routes import ROUTES, RouteDecision, parse_route

__all__ = ["ROUTES", "RouteDecision", "parse_route"]
