"""A question for both agents, cut into its rules part and its data part (taught in 20_supervisor).

«Как вернуть кронштейн 7748-К и сколько раз его возвращали?» asks the knowledge base one thing and the
shop's tables another. Given the whole question, the 1.5B SQL agent tried to answer both halves in SQL
(two counts joined by UNION for «сколько дней по правилам … и сколько возвратов …», a column ``bulky`` for
«доставка крупной техники по правилам»), and the document agent, told the data step had failed, wrote the
missing sum itself (a run of zeros). ``split_both`` cuts the question where a second question begins
(«… и сколько …», «…, а когда …»); the part holding a data word (``DATA_CUE``: сколько, какую сумму, в среднем)
and no rules word (``RULES_CUE``: по правилам, как, можно ли) goes to the SQL agent, the other to the document
agent. A data part that points back («сколько раз его возвращали», «сколько таких возвратов») carries the whole question
after it, so the SQL agent knows what «его» is. A question that does not cut that way (one clause, or
both parts alike) returns None, and both agents read it whole, as before.
"""

from __future__ import annotations

import re
from typing import NamedTuple

__all__ = ["BothParts", "split_both", "DATA_CUE", "RULES_CUE"]

# Where a second question begins: «и» or «, а» before a question word.
_QUESTION_WORDS = r"(?:сколько|какую|какой|какая|какие|каков\w*|когда|как|где|что|чем|кто|почему|можно|нужно|на какую)"
_CUT = re.compile(rf"(?:,\s*|\s+)(?:и|а)\s+(?={_QUESTION_WORDS}\b)", re.IGNORECASE)
DATA_CUE = re.compile(r"\b(?:сколько|какую сумму|какая сумма|на какую сумму|в среднем|средн\w+|всего)\b", re.IGNORECASE)
RULES_CUE = re.compile(r"\b(?:по правилам|правил\w*|как|можно ли|нужно ли|положено|обязан\w*)\b", re.IGNORECASE)
_POINTS_BACK = re.compile(r"\b(?:его|её|ее|их|него|неё|нее|них|он|она|оно|они|этот|эта|это|эти|этого|этих|"
                          r"такой|такая|такое|такие|таких|такого|такую)\b", re.IGNORECASE)


class BothParts(NamedTuple):
    """What each agent is asked: the knowledge base's part and the shop's part of one question."""

    documents: str
    data: str


def _sentence(text: str) -> str:
    """A clause as a question of its own: capital first letter, one question mark at the end."""
    text = text.strip().rstrip("?.!").strip()
    return text[:1].upper() + text[1:] + "?"


def split_both(question: str) -> BothParts | None:
    """The rules part and the data part of `question`, or None when it does not cut into one of each."""
    parts = [part for part in _CUT.split(question) if part.strip()]
    if len(parts) != 2:
        return None
    data = [part for part in parts if DATA_CUE.search(part) and not RULES_CUE.search(part)]
    rules = [part for part in parts if part not in data]
    if len(data) != 1 or len(rules) != 1:
        return None
    asked = _sentence(data[0])
    if _POINTS_BACK.search(data[0]):  # «его», «их»: what they stand for is in the other part
        asked += f" (вопрос целиком: «{question.strip()}»)"
    return BothParts(_sentence(rules[0]), asked)
