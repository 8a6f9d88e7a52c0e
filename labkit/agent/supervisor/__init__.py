"""The supervisor over the document agent and the SQL agent (issue 23)."""

from labkit.agent.supervisor.documents import ABSTAIN, DocumentAgent
from labkit.agent.supervisor.graph import Supervisor, SupervisorResult
from labkit.agent.supervisor.routes import ROUTES, RouteDecision, parse_route

__all__ = ["ABSTAIN", "ROUTES", "DocumentAgent", "RouteDecision", "Supervisor", "SupervisorResult", "parse_route"]
