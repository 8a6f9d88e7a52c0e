"""Checkers of the exercises 07-09, 18 and 21 and of the challenge 31 (one module each), their graded cases and what they share.

Each exercise is a list of cases with points, some hidden (``cases``); the checker at the
end of a notebook runs the visible ones, the class grader (``labkit.course.grading``) all of them.
"""

from labkit.course.checks.cases import Case, CaseResult, Exercise
from labkit.course.checks.challenge import (
    CERTIFICATE_RECALL,
    CHALLENGE_TOP_K,
    ChallengeCheck,
    check_challenge,
    leaderboard_frame,
)
from labkit.course.checks.chunker import check_chunker
from labkit.course.checks.common import CheckResult, ready
from labkit.course.checks.entity import check_entity_tool
from labkit.course.checks.model_table import check_model_table, exercise_questions
from labkit.course.checks.registry import EXERCISES
from labkit.course.checks.rrf import check_weighted_rrf
from labkit.course.checks.sql_retry import check_sql_retry

__all__ = ["CheckResult", "ready", "check_chunker", "check_entity_tool", "check_model_table", "check_weighted_rrf", "exercise_questions",
           "check_sql_retry",
           "Case", "CaseResult", "Exercise", "EXERCISES", "CERTIFICATE_RECALL", "CHALLENGE_TOP_K", "ChallengeCheck", "check_challenge",
           "leaderboard_frame"]
