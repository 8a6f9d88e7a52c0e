"""Is a question about the news base at all? What the planner's post-check reads (taught in 06_agent).

A 1.5B model searches the news for «Какая столица Франции?» and answers «Расскажи про
спорт» without any tool. Whether a question is about the base is read from the question
and the base itself, never from a list of phrasings:

* ``asks_about_articles``: the question asks about news as such («новости», «пишут», «известно»);
* ``Scope.shared``: the share of the question's words that occur in the documents, both
  analysed as the lexical search of 02_lexical analyses them (``to_tsvector``: stems, stop
  words left out). A question about the base speaks its words: «О чём договорились страны
  ОПЕК+?» shares two of three, «Кто написал «Войну и мир»?» one of three («мир», as in
  «чемпионат мира»).

The planner adds a third signal, an argument value of a tool the question names (a topic
by its gloss, a company, a tone): ``labkit.agent.planner.check_scope`` combines them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from functools import cached_property
from typing import TYPE_CHECKING

from psycopg import sql

if TYPE_CHECKING:
    from labkit.core.context import Lab

__all__ = ["NEWS_WORDS", "SHARED", "Scope", "corpus_scope", "asks_about_articles"]

# Word starts that ask about the news themselves: a question with one of them is about the base.
NEWS_WORDS = ("новост", "пишут", "писали", "сообща", "сообщени", "известн", "публикац", "статьи", "статей",
              "материал", "в базе")
_NEWS = re.compile(r"(?<!\w)(?:" + "|".join(re.escape(w) for w in NEWS_WORDS) + ")", re.IGNORECASE)
MIN_WORD = 3  # shorter lexemes (and numbers) say nothing about a subject
SHARED = 0.5  # at least this share of a question's words occur in the documents: the question is within their reach


def asks_about_articles(question: str) -> bool:
    """Does the question ask about news as such («Что пишут…», «Какие новости…», «Что известно…»)?"""
    return bool(_NEWS.search(question.replace("ё", "е")))


class Scope:
    """The words of a corpus and how a text is cut into such words (``corpus_scope`` reads both from the lab).

    `vocabulary` is the documents' lexemes, or a function that reads them: then they are read on first
    use, so an agent that never checks a question never queries the database for them.
    """

    def __init__(self, vocabulary: Iterable[str] | Callable[[], Iterable[str]], analyse: Callable[[str], set[str]]):
        self._source = vocabulary
        self.analyse = analyse  # a text -> its lexemes, the way the documents were analysed

    @cached_property
    def vocabulary(self) -> frozenset[str]:
        """The lexemes of the documents."""
        source = self._source
        return frozenset(source() if callable(source) else source)

    def shared(self, question: str) -> float:
        """The share of the lexemes of `question` that occur in the documents (0 for a question without any)."""
        words = self.analyse(question)
        return sum(w in self.vocabulary for w in words) / len(words) if words else 0.0

    def within(self, question: str) -> bool:
        """Does the question speak the documents' words (``SHARED`` of its own at least)?"""
        return self.shared(question) >= SHARED

    def foreign(self, text: str) -> bool:
        """Does `text` have words, none of which occurs in the documents? («погода» in a base without weather news)

        A search for such a text still returns its nearest news (vectors always have neighbours), but none of
        them is about it: the agent says so before quoting them.
        """
        return bool(self.analyse(text)) and self.shared(text) == 0.0


def corpus_scope(lab: Lab) -> Scope:
    """The scope of the lab's corpus: its lexemes (``ts_stat`` over the ``tsv`` column) and the same analyser.

    Taught in 06_agent. The lexemes are read on first use, then one small query per analysed question.
    """
    def vocabulary() -> frozenset[str]:
        inner = sql.SQL("SELECT tsv FROM {}").format(sql.Identifier(lab.corpus.table)).as_string(lab.conn)
        rows = lab.conn.execute("SELECT word FROM ts_stat(%s)", (inner,)).fetchall()
        return frozenset(w for (w,) in rows if len(w) >= MIN_WORD and not any(ch.isdigit() for ch in w))

    def analyse(text: str) -> set[str]:
        row = lab.conn.execute("SELECT tsvector_to_array(to_tsvector(%s::regconfig, %s))",
                               (lab.corpus.ts_config, text)).fetchone()
        return set(row[0]) if row and row[0] else set()

    return Scope(vocabulary, analyse)
