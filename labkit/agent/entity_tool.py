"""The third tool, search_by_entity: the reference answer of exercise 09 (not exported by labkit).

Students write this tool themselves in 09_task_entity_tool; the checker compares their
version with this one, and the course's final agent (``FINAL_TOOLS``) uses it. It is
deliberately absent from ``labkit.__all__``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from psycopg import sql

from labkit.agent.planner import SYSTEM_PROMPT
from labkit.agent.tools import DEFAULT_TOOLS, Company, Tone
from labkit.core.context import Lab  # at run time: tool_schema resolves the tools' type hints

__all__ = ["ENTITY_LIMIT", "search_by_entity", "FINAL_TOOLS", "FINAL_SYSTEM"]

ENTITY_LIMIT = 5  # search_by_entity returns at most this many documents


def search_by_entity(lab: Lab, company: Company | None = None, tone: Tone | None = None) -> list[dict[str, Any]]:
    """Find news about one of the listed companies and/or with a given tone (positive, negative, neutral).

    Taught in 09_task_entity_tool. Returns at most five documents, ordered by id.

    Args:
        company: company or organisation the news are about, only one of the listed ones
        tone: tone of the news
    """
    with lab.conn.cursor() as cur:
        cur.execute(
            sql.SQL(
                """
                SELECT id, {text}, company, tone
                FROM {table}
                WHERE (%(company)s::text IS NULL OR company = %(company)s)
                  AND (%(tone)s::text IS NULL OR tone = %(tone)s)
                ORDER BY id
                LIMIT %(limit)s
                """
            ).format(text=sql.Identifier(lab.corpus.text_column), table=sql.Identifier(lab.corpus.table)),
            {"company": company, "tone": tone, "limit": ENTITY_LIMIT},
        )
        return [{"id": i, "text": t, "company": c, "tone": tn} for i, t, c, tn in cur.fetchall()]


FINAL_TOOLS: tuple[Callable[..., Any], ...] = (*DEFAULT_TOOLS, search_by_entity)
# The system prompt of the course's final agent: exercise 09's hint on when to call the third tool.
FINAL_SYSTEM = SYSTEM_PROMPT + (" Если спрашивают о новостях конкретной компании или о негативных, позитивных "
                                "или нейтральных новостях, вызови search_by_entity.")
