"""The chat model as a relevance judge: P(yes) for «does this passage answer the query?» (taught in 17_kb_rerank).

This is the method of Qwen3-Reranker (Qwen/Qwen3-Reranker-0.6B model card): the model reads one
(query, passage) pair under a fixed instruction and must answer "yes" or "no"; the score is
``P(yes) / (P(yes) + P(no))`` at the first token of its answer. A cross-encoder does the same in
one forward pass with a trained head; a chat model needs no extra weights, only log-probabilities.

Ollama has no rerank endpoint, but since v0.12.11 its /api/chat takes ``logprobs: true`` and
``top_logprobs: N`` (0 to 20) and answers with a ``logprobs`` list, one entry per generated token,
each with its ``top_logprobs`` alternatives (``api/types.go`` ``Logprob``). The lab's model server
answers the same (``labkit.services.modelserver.logprobs``), so this code runs on both. One token is
generated; the answer's case and a leading space do not matter («Yes», « no»). When only one of the
two words is among the `TOP_LOGPROBS` alternatives, the other's probability is taken as that of the
least likely alternative listed: an upper bound, so the score errs towards the middle, not the edge.

The instruction comes first and the passage last, so for many passages of one query the server
re-reads only the passage (llama.cpp keeps the common prefix of consecutive prompts).
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from labkit.core.errors import LabError

__all__ = ["JUDGE_SYSTEM", "JUDGE_INSTRUCT", "TOP_LOGPROBS", "MAX_PASSAGE_CHARS", "PROMPT_MD5", "Judgement",
           "JudgeUnavailable", "judge_messages", "yes_probability", "first_token_alternatives", "judge_relevance"]

# Qwen3-Reranker's own system prompt and prompt layout (its model card), with the instruction for our queries.
JUDGE_SYSTEM = ('Judge whether the Document meets the requirements based on the Query and the Instruct provided. '
                'Note that the answer can only be "yes" or "no".')
JUDGE_INSTRUCT = "Given a search query in Russian, decide whether the document answers the query"
TOP_LOGPROBS = 20  # Ollama's maximum: the alternatives listed for the answer's first token
MAX_PASSAGE_CHARS = 4000  # a longer passage is cut (about 1,000 tokens of Russian): its cost grows with its length
PROMPT_MD5 = hashlib.md5(f"{JUDGE_SYSTEM}\n{JUDGE_INSTRUCT}\n{MAX_PASSAGE_CHARS}".encode()).hexdigest()
"""Fingerprint of the prompt: cached scores are kept per prompt, so editing it never reuses old scores."""

_YES, _NO = "yes", "no"


class JudgeUnavailable(LabError):
    """The chat model could not judge: the server is down, lacks the model, or returns no log-probabilities."""


class Judgement(NamedTuple):
    """One judged pair: the probability of «yes», the wall time of the call and the prompt's tokens."""

    probability: float
    seconds: float
    prompt_tokens: int | None


def judge_messages(query: str, passage: str) -> list[dict[str, str]]:
    """The chat messages that ask whether `passage` answers `query` (Qwen3-Reranker's layout). Taught in 17_kb_rerank."""
    user = f"<Instruct>: {JUDGE_INSTRUCT}\n<Query>: {query}\n<Document>: {passage[:MAX_PASSAGE_CHARS]}"
    return [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": user}]


def _word(token: str) -> str:
    return token.strip().lower()


def yes_probability(alternatives: Sequence[tuple[str, float]]) -> float:
    """``P(yes) / (P(yes) + P(no))`` from (token, logprob) alternatives of the first answer token. Taught in 17_kb_rerank.

    Tokens count whatever their case and surrounding spaces. A word missing from the list gets the
    probability of the least likely listed token (an upper bound); with neither word listed, 0.5.
    """
    if not alternatives:
        raise ValueError("no alternatives to read P(yes) from")
    floor = math.exp(min(logprob for _, logprob in alternatives))
    mass = {_YES: 0.0, _NO: 0.0}
    for token, logprob in alternatives:
        word = _word(token)
        if word in mass:
            mass[word] += math.exp(logprob)
    yes, no = (mass[word] or floor for word in (_YES, _NO))
    return yes / (yes + no)


def first_token_alternatives(response: Any) -> list[tuple[str, float]]:
    """(token, logprob) of the first generated token's ``top_logprobs`` in an Ollama chat response.

    `response` is an ``ollama.ChatResponse`` or its dict. Raises ``JudgeUnavailable`` when it carries no
    log-probabilities (an Ollama older than 0.12.11 ignores ``logprobs`` and answers without them).
    """
    logprobs = response.get("logprobs") if isinstance(response, dict) else getattr(response, "logprobs", None)
    first = (logprobs or [None])[0]
    get = (lambda item, key: item.get(key)) if isinstance(first, dict) else getattr
    top = get(first, "top_logprobs") if first is not None else None
    if not top:
        raise JudgeUnavailable("Сервер моделей вернул ответ без логарифмов вероятностей (logprobs): нужен Ollama "
                               "0.12.11 или новее либо модельный сервер лаборатории (`./run.sh up`; если он был "
                               "запущен старой версией labkit — `./run.sh down`, затем `./run.sh up`).")
    get_alt = (lambda item, key: item.get(key)) if isinstance(top[0], dict) else getattr
    return [(str(get_alt(alt, "token")), float(get_alt(alt, "logprob"))) for alt in top]


def judge_relevance(send: Callable[..., Any], model: str, query: str, passage: str) -> Judgement:
    """How likely `model` finds that `passage` answers `query`: one chat call through `send` (``lab.models.chat``).

    Taught in 17_kb_rerank. Temperature 0, no thinking, one generated token with ``TOP_LOGPROBS``
    alternatives. A server that is down, a model it lacks, or an answer without log-probabilities
    is ``JudgeUnavailable`` (a ``LabError``: one readable line, not a traceback).
    """
    import httpx
    import ollama

    start = time.perf_counter()
    try:
        response = send(model=model, messages=judge_messages(query, passage), think=False,
                        options={"temperature": 0.0, "num_predict": 1}, logprobs=True, top_logprobs=TOP_LOGPROBS)
    except ollama.ResponseError as err:
        raise JudgeUnavailable(f"Модель {model} не смогла оценить пару «запрос — текст»: сервер ответил "
                               f"«{' '.join(str(err.error).split())}» (HTTP {err.status_code}).") from None
    except (ConnectionError, httpx.TransportError) as err:
        raise JudgeUnavailable(f"Сервер моделей не ответил ({type(err).__name__}): переранжирование невозможно. "
                               "Проверьте его командой `./run.sh status`, запустите — `./run.sh up`.") from None
    alternatives = first_token_alternatives(response)
    return Judgement(yes_probability(alternatives), time.perf_counter() - start,
                     getattr(response, "prompt_eval_count", None))
