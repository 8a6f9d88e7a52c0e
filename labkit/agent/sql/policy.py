"""When a SQL attempt failed: try again, give up, or refuse. The reference of exercise 21_task_sql_retry.

A policy is a function ``next_step(attempts, max_errors) -> "retry" | "give_up" | "refuse"`` that
``SqlAgent`` asks after every failed attempt. ``attempts`` is the run's list so far, oldest first,
each ``{"sql", "ok", "error", "source", "rows", "writes"}`` (``source`` says who refused it: the check
(``CHECK_SOURCE``) or Postgres (``POSTGRES_SOURCE``); ``writes`` is true when the check refused SQL
that would change data; a failure may also carry ``hint`` and ``unknown``, see ``labkit.agent.sql.hints``).
The rules, in order:

1. **refuse** when the last failure can never be served by a retry of a read-only agent: the check
   refused a write, or Postgres said the role may not do it (``permission denied``, ``read-only
   transaction``);
2. **give up** when the failures reached ``max_errors``, or when the model made no progress: its
   last two failed SQL texts are the same after normalising whitespace and case (another retry
   costs a model call of seconds for the same error);
3. else **retry**.

``stop_rule`` names the rule that stopped a run, for the trace and the answer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

__all__ = ["Step", "Policy", "STEPS", "CHECK_SOURCE", "POSTGRES_SOURCE", "FORBIDDEN_MARKERS", "normalise_sql",
           "failures", "forbidden", "no_progress", "next_step", "next_step_without_progress_rule", "stop_rule"]

Step = Literal["retry", "give_up", "refuse"]
Policy = Callable[[Sequence[Mapping[str, Any]], int], str]
STEPS: tuple[Step, ...] = ("retry", "give_up", "refuse")
CHECK_SOURCE = "Проверка запроса"  # the attempt's source when check_select refused it
POSTGRES_SOURCE = "Ошибка PostgreSQL"  # ... when Postgres did
# Postgres's words for "this role may not": no retry of the same agent gets past them.
FORBIDDEN_MARKERS = ("permission denied", "read-only transaction")


def normalise_sql(sql: str) -> str:
    """`sql` with runs of whitespace made one space, case folded, and no trailing semicolon."""
    return " ".join((sql or "").split()).casefold().rstrip(";").rstrip()


def failures(attempts: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The failed attempts, oldest first."""
    return [attempt for attempt in attempts if not attempt.get("ok")]


def forbidden(attempt: Mapping[str, Any]) -> bool:
    """The attempt was refused for what it is, not for a mistake: a write the check refused, or the role may not."""
    if attempt.get("ok"):
        return False
    if attempt.get("writes"):
        return True
    error = str(attempt.get("error") or "").casefold()
    return attempt.get("source") == POSTGRES_SOURCE and any(marker in error for marker in FORBIDDEN_MARKERS)


def no_progress(attempts: Sequence[Mapping[str, Any]]) -> bool:
    """The last two failed attempts carry the same SQL (whitespace and case aside): the model is not learning."""
    failed = failures(attempts)
    return len(failed) >= 2 and normalise_sql(failed[-1].get("sql", "")) == normalise_sql(failed[-2].get("sql", ""))


def next_step(attempts: Sequence[Mapping[str, Any]], max_errors: int) -> Step:
    """After a failed attempt: "refuse", "give_up" or "retry" (the module's rules, in order)."""
    failed = failures(attempts)
    if failed and forbidden(failed[-1]):
        return "refuse"
    if len(failed) >= max_errors or no_progress(attempts):
        return "give_up"
    return "retry"


def next_step_without_progress_rule(attempts: Sequence[Mapping[str, Any]], max_errors: int) -> Step:
    """``next_step`` without rule 2's no-progress part: the agent's behaviour before it (for comparison)."""
    failed = failures(attempts)
    if failed and forbidden(failed[-1]):
        return "refuse"
    return "give_up" if len(failed) >= max_errors else "retry"


def stop_rule(step: str, attempts: Sequence[Mapping[str, Any]], max_errors: int) -> str:
    """Which rule a policy's `step` followed, as the trace names it: "forbidden", "max_errors", "no_progress",
    or "policy" when the attempts fit none of them (a policy of one's own may stop for its own reasons)."""
    failed = failures(attempts)
    if step == "refuse" and failed and forbidden(failed[-1]):
        return "forbidden"
    if step == "give_up" and len(failed) >= max_errors:
        return "max_errors"
    if step == "give_up" and no_progress(attempts):
        return "no_progress"
    return "policy"
