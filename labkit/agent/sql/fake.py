"""A FAKE chat model for the SQL agent: the same wrong SQL at every step (21_task_sql_retry).

A real model does not repeat itself on demand, so the no-progress rule of the retry policy is shown,
measured and graded with this stand-in beside the real model. It answers as the Ollama client does.
"""

from __future__ import annotations

from typing import Any

__all__ = ["FakeRepeatingSqlChat", "REPEATED_SQL"]

REPEATED_SQL = "SELECT total FROM sales"  # no such table in the shop: every attempt fails the same way


class FakeRepeatingSqlChat:
    """A FAKE chat model that writes `sql` however often it reads the error; counts its calls in ``requests``."""

    def __init__(self, sql: str = REPEATED_SQL) -> None:
        self.sql = sql
        self.requests = 0

    def __call__(self, model: str = "", messages: Any = None, **_: Any) -> Any:
        from ollama import ChatResponse, Message

        self.requests += 1
        return ChatResponse(model=model or "fake-repeating-sql",
                            message=Message(role="assistant", content=f"```sql\n{self.sql}\n```"))
