"""The document agent: the knowledge base searched with the mode that serves its questions best (``SEARCH``),
answered with citations or an honest abstention.

Who decides to abstain (taught in 20_supervisor): told «if the fragments hold no answer, say so», the 1.5B model said
so on 3 of the supervisor's 17 tune questions for this agent although its fragments came from a needed document
(«Поднимут ли стиральную машину на пятый этаж…», with the price of the lift in the first fragment). So the abstention is a score, as the supervisor's routing is:
before answering, the model reads the same fragments and the question with ``CHECK`` after them, and the first
token's log-probabilities give P(yes) (``labkit.models.relevance.yes_probability``, as the judge of 17_kb_rerank
reads them). Below ``ANSWERABLE`` the agent abstains without asking for an answer; otherwise the model answers
from a prompt that offers no way out. The two prompts differ only after the question, so the server's prompt cache
reads the fragments once for both calls. A server without log-probabilities gets the old prompt,
which asks the model to abstain itself.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from psycopg import sql

from labkit.agent.markup import strip_markup
from labkit.agent.runaway import cut_runaway
from labkit.models.chat import Reply, ask_model
from labkit.models.relevance import TOP_LOGPROBS, JudgeUnavailable, first_token_alternatives, yes_probability
from labkit.retrieval.modes import HYBRID_CODES_ALIASES

if TYPE_CHECKING:
    from labkit.core.context import Lab

__all__ = ["ABSTAIN", "ANSWERABLE", "CHECK", "Chunk", "DocAnswer", "DocumentAgent", "answer_messages", "answers_question",
           "stems"]

ABSTAIN = "В базе знаний ответа нет."
SYSTEM = "Ты помощник магазина ТехноМир. Отвечай по-русски кратко и только по фрагментам базы знаний."
SYSTEM_ABSTAIN = f"{SYSTEM} Если в них нет ответа, ответь: «{ABSTAIN}»"  # for a server without log-probabilities
CHECK = "Есть ли во фрагментах ответ на этот вопрос? Ответь одним словом: yes или no."
# P(yes) of CHECK below which the agent abstains, chosen on tune: the supervisor's 17 tune questions for this agent
# (documents, and the rules part of «both») scored 0.459 to 0.905, the knowledge base's 7 tune queries with no answer
# in it («вакансии кладовщика на складе техномира») 0.158 to 0.430 (0.146 to 0.439 in a second run: a score moves by
# about 0.01 between runs, so the margin is thin on both sides).
ANSWERABLE = 0.44
TOP_CHUNKS = 3  # chunks the model reads; a fourth cost ~430 prompt tokens (about 10 s on 2 cores) and, on the
# supervisor's documents and «both» questions, cited a needed document no more often (23 of 29 either way)
ANSWER_TOKENS = 300
# The agent's search, chosen on the supervisor's tune questions (documents, and the rules part of «both»), not on the
# retrieval queries: its top 3 chunks touch a needed document on 16 of 17 with ``hybrid_codes_aliases`` and on 15 of
# 17 with ``hybrid_codes_aliases_finer``, the better mode by document Recall@5 (16_kb_codes), so the agent keeps the
# former (tests/test_kb_codes.py measures it again).
SEARCH = HYBRID_CODES_ALIASES
_WORD = re.compile(r"\w{4,}")


@dataclass(frozen=True)
class Chunk:
    """A knowledge-base chunk: its id, its document, its section path and its text."""

    chunk_id: int
    doc_id: int
    section: str
    text: str


@dataclass
class DocAnswer:
    answer: str
    chunks: list[Chunk]
    citations: list[tuple[int, str]]
    abstained: bool
    seconds_model: float = 0.0
    seconds_tool: float = 0.0
    prompt_tokens: int | None = None
    generated_tokens: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def stems(text: str) -> set[str]:
    """The crude stems of `text`: the first 5 letters of each word of 4+ letters, lower-cased."""
    return {word.lower()[:5] for word in _WORD.findall(text)}


def answers_question(question: str, chunks: list[Chunk]) -> bool:
    """True when some stem of the question (``stems``) occurs in the chunks."""
    text = " ".join(c.text.lower() for c in chunks)
    return bool(chunks) and any(stem in text for stem in stems(question))


def answer_messages(question: str, chunks: list[Chunk], context: str = "", system: str = SYSTEM) -> list[dict[str, str]]:
    """The answer prompt: `system`, then the data (`context`), the fragments with document and section, the question."""
    sources = "\n\n".join(f"[документ {c.doc_id}, раздел «{c.section}»]\n{c.text}" for c in chunks)
    return [{"role": "system", "content": system},
            {"role": "user", "content": (f"Данные: {context}\n\n" if context else "") + f"Фрагменты:\n{sources}\n\nВопрос: {question}"}]


def plain_results(chunks: list[Chunk]) -> str:
    """The chunks as a Russian list: what the student gets when the model is unavailable."""
    return "\n".join(f"[{c.doc_id}, {c.section or 'без раздела'}] {c.text[:300]}" for c in chunks)


class DocumentAgent:
    """Searches `kb_lab` (a lab on the knowledge base) and answers in Russian from the top chunks."""

    def __init__(self, kb_lab: Lab, *, model: str | None = None, chat: Callable[..., Any] | None = None) -> None:
        self.lab = kb_lab
        self.model = model or kb_lab.chat_model
        self.chat = chat if chat is not None else kb_lab.models.chat

    def search(self, query: str, top_k: int = TOP_CHUNKS) -> list[Chunk]:
        """The top chunks of ``SEARCH`` with their document and section."""
        hits = SEARCH(self.lab, query, top_k)
        if not hits:
            return []
        corpus = self.lab.corpus
        rows = self.lab.conn.execute(
            sql.SQL("SELECT id, {parent}, section, {text} FROM {table} WHERE id = ANY(%s)").format(
                parent=sql.Identifier(corpus.parent or "id"), text=sql.Identifier(corpus.text_column),
                table=sql.Identifier(corpus.table)),
            ([h.doc_id for h in hits],)).fetchall()
        by_id = {r[0]: Chunk(int(r[0]), int(r[1]), r[2] or "", r[3] or "") for r in rows}
        return [by_id[h.doc_id] for h in hits if h.doc_id in by_id]

    def _ask(self, messages: list[dict[str, str]], **options: Any) -> Reply:
        reply = ask_model(self.chat, self.model, messages, think=False, **options)
        if reply.error:
            raise ConnectionError(reply.error)
        return reply

    def answerable(self, question: str, chunks: list[Chunk], context: str = "") -> tuple[float, Reply]:
        """P(yes) that `chunks` answer `question` (``CHECK``), and the call's reply; raises ``JudgeUnavailable``
        when the server gives no log-probabilities."""
        messages = answer_messages(question, chunks, context)
        messages[-1] = {**messages[-1], "content": f"{messages[-1]['content']}\n\n{CHECK}"}
        reply = self._ask(messages, num_predict=1, top_logprobs=TOP_LOGPROBS)
        return yes_probability(first_token_alternatives(reply)), reply

    def answer(self, question: str, chunks: list[Chunk], context: str = "") -> DocAnswer:
        """The model's Russian answer from `chunks` (and `context`, e.g. the data agent's result), or ``ABSTAIN``
        when no word of the question is in them or the check scores below ``ANSWERABLE``; raises if the model is down."""
        citations = list(dict.fromkeys((c.doc_id, c.section) for c in chunks))
        if not answers_question(question, chunks) and not context:
            return DocAnswer(ABSTAIN, chunks, [], True)
        system, calls, extra = SYSTEM, [], {}
        try:
            extra["answerable"], check = self.answerable(question, chunks, context)
            calls.append(check)
        except JudgeUnavailable:  # no log-probabilities: the model is asked to abstain itself
            system = SYSTEM_ABSTAIN
        if extra.get("answerable", 1.0) >= ANSWERABLE:
            calls.append(self._ask(answer_messages(question, chunks, context, system), num_predict=ANSWER_TOKENS))
            text = cut_runaway(strip_markup(calls[-1].content)).strip() or ABSTAIN
        else:
            text = ABSTAIN
        abstained = "ответа нет" in text.lower()

        def total(values: list[int | None]) -> int | None:
            return sum(v for v in values if v is not None) if any(v is not None for v in values) else None

        return DocAnswer(text, chunks, [] if abstained else citations, abstained, sum(c.seconds for c in calls), 0.0,
                         total([c.prompt_tokens for c in calls]), total([c.eval_tokens for c in calls]), extra)
