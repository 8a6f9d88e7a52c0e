"""Before a model's SQL runs: pull it out of the reply, and let through one SELECT (or WITH) statement only.

Taught in 19_sql_agent. This check is a courtesy, not the safety: it gives the model a clear
message for a mistake Postgres would report less clearly (two statements, a DELETE), while the
reader role (``labkit.store.shop.reader``) is what makes a harmful query impossible. It reads
SQL the way Postgres lexes it, so a semicolon or a DELETE inside a string, a quoted name, a
comment or a dollar-quoted body is text, not a statement.
"""

from __future__ import annotations

import re

__all__ = ["SqlRefused", "extract_sql", "words", "check_select"]

_FENCE = re.compile(r"```[ \t]*(?:sql|postgresql|postgres|pgsql|SQL)?[ \t]*\n?(.*?)(?:```|$)", re.S)
_START = re.compile(r"^\s*(?:SELECT|WITH)\b", re.I | re.M)
_DOLLAR = re.compile(r"\$([A-Za-z_][A-Za-z_0-9]*)?\$")
_WORD = re.compile(r"[A-Za-z_][A-Za-z_0-9$]*")
# Words that make a statement change something; inside a SELECT's text they can only mean a data-changing CTE
# (WITH d AS (DELETE ...)), SELECT ... INTO a new table, or a row lock (FOR UPDATE/SHARE) in a read-only query.
_CHANGING = {"insert", "update", "delete", "merge", "truncate", "drop", "alter", "create", "grant", "revoke",
             "into", "copy", "call", "do", "set", "reset", "lock", "vacuum", "analyze", "comment", "refresh"}


class SqlRefused(ValueError):
    """The model's SQL is not one SELECT statement (the message, for the model, says what is wrong).

    ``writes`` is true when the SQL would change something (DELETE, DROP, an UPDATE in a CTE, ...): the
    model understood the request as one to change data, which no retry of a read-only agent can serve.
    """

    def __init__(self, message: str, writes: bool = False) -> None:
        super().__init__(message)
        self.writes = writes


def extract_sql(reply: str) -> str:
    """The SQL in a model's reply: the first fenced block, else the text from the first line starting with SELECT/WITH."""
    fenced = _FENCE.search(reply or "")
    if fenced and fenced.group(1).strip():
        return fenced.group(1).strip()
    start = _START.search(reply or "")
    return reply[start.start():].strip() if start else ""


def words(query: str) -> tuple[list[str], int]:
    """The lower-case words of `query` outside strings, quoted names and comments, and the number of statements.

    A statement separator is a semicolon outside those; empty statements (a trailing ``;``) are not counted.
    Unclosed quotes or comments raise ``SqlRefused``.
    """
    found: list[str] = []
    statements, current, i, n = 0, False, 0, len(query)
    while i < n:
        ch = query[i]
        if query.startswith("--", i):
            end = query.find("\n", i)
            i = n if end < 0 else end + 1
        elif query.startswith("/*", i):  # comments nest in Postgres
            depth, i = 1, i + 2
            while i < n and depth:
                if query.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif query.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
            if depth:
                raise SqlRefused("незакрытый комментарий /* в запросе")
        elif ch in "'\"":
            escapes = ch == "'" and i > 0 and query[i - 1] in "eE" and (i < 2 or not query[i - 2].isalnum())
            i += 1
            while i < n:
                if escapes and query[i] == "\\":
                    i += 2
                    continue
                if query[i] == ch:
                    if query.startswith(ch * 2, i):  # '' or "" inside
                        i += 2
                        continue
                    break
                i += 1
            if i >= n:
                raise SqlRefused(f"незакрытая кавычка {ch} в запросе")
            i += 1
            current = True
        elif ch == "$" and (tag := _DOLLAR.match(query, i)) and not (i and (query[i - 1].isalnum() or query[i - 1] == "_")):
            end = query.find(tag.group(0), tag.end())
            if end < 0:
                raise SqlRefused(f"незакрытая строка {tag.group(0)} в запросе")
            i, current = end + len(tag.group(0)), True
        elif ch == ";":
            statements += int(current)
            current, i = False, i + 1
        elif (word := _WORD.match(query, i)) and not (i and (query[i - 1].isalnum() or query[i - 1] in "_$")):
            found.append(word.group(0).lower())
            i, current = word.end(), True
        else:
            current = current or not ch.isspace()
            i += 1
    return found, statements + int(current)


def _writes(found: list[str]) -> bool:
    """Does a statement of these words change data? (``FOR UPDATE`` only locks rows: a read gone wrong)"""
    return any(w in _CHANGING and not (w == "update" and i and found[i - 1] in ("for", "key"))
               for i, w in enumerate(found))


def check_select(query: str) -> str:
    """`query` without trailing semicolons if it is one SELECT (or WITH ... SELECT) statement; else ``SqlRefused``.

    Taught in 19_sql_agent. The message says in Russian what to change, for the model's next try.
    """
    text = query.strip()
    if not text:
        raise SqlRefused("в ответе нет SQL-запроса: напиши один запрос SELECT")
    found, statements = words(text)
    if statements > 1:
        raise SqlRefused("в ответе несколько SQL-команд: разрешена ровно одна, запрос SELECT", writes=_writes(found))
    changing = [w for w in found if w in _CHANGING]
    if not found or found[0] not in ("select", "with"):
        first = found[0].upper() if found else text.split()[0]
        raise SqlRefused(f"разрешены только запросы на чтение (SELECT или WITH ... SELECT), а запрос начинается с {first}",
                         writes=_writes(found[:1]))
    if changing:
        raise SqlRefused(f"запрос на чтение не может содержать {changing[0].upper()}: данные менять нельзя, "
                         "напиши только SELECT", writes=_writes(found))
    return text.rstrip().rstrip(";").rstrip()
