"""The document agent: the knowledge base searched with the mode that serves its questions best (``SEARCH``),
answered with citations or an honest abstention.

Who decides to abstain (taught in 20_supervisor): told «if the fragments hold no answer, say so», the 1.5B model said
so on 3 of the supervisor's 17 tune questions for this agent although its fragments came from a needed document
(«Поднимут ли стиральную машину на пятый этаж…», with the price of carrying it up in the first fragment). So the
abstention is a score, as the supervisor's routing is. A question none of whose words is in the fragments is
abstained on at once (``answers_question``). Otherwise the model reads the answer prompt with ``CHECK`` after the
question, and the first token's log-probabilities give P(yes) (``labkit.models.relevance.yes_probability``, as the
judge of 17_kb_rerank reads them). Below ``ANSWERABLE`` the agent abstains without asking for an answer; otherwise
the model answers from a prompt that offers no way out. The two prompts differ only after the question, so the
server reads the fragments once: the answer takes them from its prompt cache, when no other request came in between.

The check was chosen on rules questions alone. A question the supervisor could not cut into a rules part and a data
part comes with the data agent's answer (`context`), and is answered as before the check: the prompt asks the model
to abstain itself (``SYSTEM_ABSTAIN``). So is every question on a server without log-probabilities; the agent learns
that from its first check and sends no more checks.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
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
# P(yes) of CHECK below which the agent abstains, chosen on tune, halfway between: the supervisor's 17 tune questions
# for this agent (documents, and the rules part of «both») scored 0.459 to 0.905; the knowledge base's 7 tune queries
# with no answer in it, written as searches rather than questions («вакансии кладовщика на складе техномира»), 0.158
# to 0.430, and 0.146 to 0.439 in a second run (a score moves by about 0.01 between runs: the margin is thin).
ANSWERABLE = 0.45
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
    """The agent's answer; `seconds_model` and the tokens are the answer call's, `check` the check call's reply
    (None when no check was sent) and `answerable` its P(yes) (None without log-probabilities). The search's
    time is not here: the supervisor's graph times it as the step's tool time."""

    answer: str
    chunks: list[Chunk]
    citations: list[tuple[int, str]]
    abstained: bool
    seconds_model: float = 0.0
    prompt_tokens: int | None = None
    generated_tokens: int | None = None
    check: Reply | None = None
    answerable: float | None = None


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
        self.scores = True  # False once the server answered a check without log-probabilities

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

    def answerable(self, question: str, chunks: list[Chunk]) -> tuple[float | None, Reply]:
        """P(yes) that `chunks` answer `question` (``CHECK``) and the call's reply; P(yes) is None when the server
        gives no log-probabilities (then ``scores`` turns False)."""
        messages = answer_messages(question, chunks)
        messages[-1] = {**messages[-1], "content": f"{messages[-1]['content']}\n\n{CHECK}"}
        reply = self._ask(messages, num_predict=1, top_logprobs=TOP_LOGPROBS)
        try:
            return yes_probability(first_token_alternatives(reply)), reply
        except JudgeUnavailable:
            self.scores = False
            return None, reply

    def answer(self, question: str, chunks: list[Chunk], context: str = "") -> DocAnswer:
        """The model's Russian answer from `chunks` (and `context`, e.g. the data agent's result), or ``ABSTAIN`` when
        no word of the question is in them, the check scores below ``ANSWERABLE``, or the model abstains itself (with
        `context`, or without log-probabilities); raises if the model is down."""
        citations = list(dict.fromkeys((c.doc_id, c.section) for c in chunks))
        if not answers_question(question, chunks) and not context:
            return DocAnswer(ABSTAIN, chunks, [], True)
        check, answerable = None, None
        if self.scores and not context:
            answerable, check = self.answerable(question, chunks)
            if answerable is not None and answerable < ANSWERABLE:
                return DocAnswer(ABSTAIN, chunks, [], True, check=check, answerable=answerable)
        system = SYSTEM if answerable is not None else SYSTEM_ABSTAIN
        reply = self._ask(answer_messages(question, chunks, context, system), num_predict=ANSWER_TOKENS)
        text = cut_runaway(strip_markup(reply.content)).strip() or ABSTAIN
        abstained = "ответа нет" in text.lower()
        return DocAnswer(text, chunks, [] if abstained else citations, abstained, reply.seconds,
                         reply.prompt_tokens, reply.eval_tokens, check=check, answerable=answerable)
