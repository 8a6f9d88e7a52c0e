"""Checkers of the exercises 07-09 (one module each) and what they share.

They recompute the answer with labkit and explain, in Russian, what differs.
"""

from .common import CheckResult, ready
from .entity import check_entity_tool
from .models import check_model_table
from .rrf import check_weighted_rrf

__all__ = ["CheckResult", "ready", "check_entity_tool", "check_model_table", "check_weighted_rrf"]
