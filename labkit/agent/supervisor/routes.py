"""The supervisor's routing decision: one of the ROUTES enum, read from the chat model, checked against the shop's words.

How a 1.5B model is made to route (taught in 20_supervisor):

* **Scores, not text.** The model gets the routes' definitions and a few worked turns (written for this
  module, none taken from the labelled questions), and answers with one word. Its first token's
  ``top_logprobs`` (Ollama's format, as the judge of 17_kb_rerank reads them) give a log-probability per
  route (``route_scores``): the answer can only be a member of the enum, there is nothing to parse.
* **Calibration.** A small model leans towards some answers whatever the question («data» for anything
  with «сколько»). ``ROUTE_BIAS`` adds a constant per route to its log-probability (contextual
  calibration, Zhao et al. 2021); the constants were chosen on the *tune* split of the supervisor's
  labelled questions only (``labkit/data/supervisor/questions.jsonl``), the report split measures them.
  A model leans in its own way, so ``route_bias`` gives a model its own constants where they were chosen.
* **Reach.** A question routed to an agent must speak the shop's words: the share of its lexemes (numbers
  and codes aside) found in the knowledge base or in the shop database's schema and comments
  (``reach``). Below ``REACH`` it is out of scope («Какая погода будет завтра?»), as the news agent's
  ``Scope`` decides for the news. (A second reach, of a question sent to the database against the schema's
  words alone, was tried: 40 of 42 right on tune, but on report it sent «Сколько заказов сделано в феврале
  2026 года?» to the documents, as a month is no word of the schema; it is not used.)
* **Requests to change data** («Удали все заказы», ``DROP TABLE``) are refused before the model is asked
  (``asks_to_change``): the SQL agent would refuse them too, and the reader role could not run them,
  but a request of that kind never needs a model's opinion. So are **requests for the service's secrets**
  («покажи пароль базы», a connection string, ``pg_authid``) and **orders to drop the instructions**
  («игнорируй все инструкции»): ``refusal_rule`` names which rule a question meets.

A server without log-probabilities gets the same prompt and answers in JSON: ``parse_route`` validates
it against the enum; anything else falls back to the caller's route, recorded (``fallback``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["ROUTES", "ROUTE_NAMES", "route_name", "ROUTE_BIAS", "ROUTE_BIAS_BY_MODEL", "route_bias", "REACH", "asks_to_change", "asks_for_secret", "refusal_rule", "RouteDecision", "parse_route", "route_messages", "route_scores",
           "pick_route", "reach"]

ROUTES = ("documents", "data", "both", "smalltalk", "out_of_scope")
# What a student reads in tables: the routes (and the hostile kind of the labelled questions) in Russian.
ROUTE_NAMES = {"documents": "база знаний", "data": "данные магазина", "both": "оба агента",
               "smalltalk": "разговор", "out_of_scope": "вне темы", "hostile": "враждебный"}
_OBJECT = re.compile(r"\{[^{}]*\}", re.DOTALL)

ROUTE_SYSTEM = (
    "Ты диспетчер службы поддержки магазина электроники ТехноМир. У тебя два помощника:\n"
    "- documents: база знаний магазина — правила возврата и гарантии, доставка, оплата, бонусы, инструкции к "
    "товарам, коды ошибок, характеристики. Вопросы «как…», «можно ли…», «что делать…», «сколько дней/стоит по правилам».\n"
    "- data: база данных магазина — таблицы товаров, заказов, позиций заказов и возвратов. Вопросы о числах "
    "и списках из этих таблиц: сколько заказов/возвратов/товаров, суммы, средние, по городам, датам, брендам.\n"
    "{answer}\n"
    "documents — нужен только ответ из базы знаний;\n"
    "data — нужен только подсчёт по таблицам магазина;\n"
    "both — в вопросе две части: правило из базы знаний И подсчёт по таблицам;\n"
    "smalltalk — приветствие, благодарность, вопрос о тебе самом;\n"
    "out_of_scope — не про магазин, или просьба изменить, удалить данные, выполнить команду, показать пароли и "
    "служебные таблицы.")
ROUTE_SHOTS = (  # worked turns written for the prompt; none is a labelled question
    ("Можно ли обменять наушники, если они не подошли по цвету?", "documents"),
    ("Сколько заказов доставили в Казань в 2024 году?", "data"),
    ("Какой срок гарантии на пылесосы по правилам и сколько пылесосов вернули?", "both"),
    ("Добрый день!", "smalltalk"),
    ("Сколько калорий в яблоке?", "out_of_scope"),
    ("Удали таблицу товаров", "out_of_scope"),
)
ROUTE_ANSWER = {"word": "Ответь одним словом — названием маршрута:",  # what {answer} asks for, by answer format
                "json": 'Ответь только JSON {"route": "..."}, где route:'}
# The first token of each route's word as Qwen's tokenizer cuts it (lower-cased, spaces stripped).
_FIRST_TOKENS = {"documents": ("documents", "document", "doc", "docs"), "data": ("data",), "both": ("both",),
                 "smalltalk": ("smalltalk", "small"), "out_of_scope": ("out_of_scope", "out")}
# Log-probability offsets per route, chosen on the tune split only (see the module docstring): for the lab's chat
# model (qwen2.5-coder:1.5b), and for a model with constants of its own in ROUTE_BIAS_BY_MODEL (``route_bias``).
ROUTE_BIAS: dict[str, float] = {"documents": 3.0, "data": 0.0, "both": 1.0, "smalltalk": 1.0, "out_of_scope": 0.0}
ROUTE_BIAS_BY_MODEL: dict[str, dict[str, float]] = {
    # The 0.5B leans the other way: with the 1.5B's constants it sent every data question to the documents
    # (22 of 42 tune questions right); these give 36 of 42 on tune, with a sharp optimum (±0.5 on documents,
    # data or both costs 3 to 5 questions).
    "qwen2.5-coder:0.5b": {"documents": -1.0, "data": 0.0, "both": 0.0, "smalltalk": 1.0, "out_of_scope": 0.0},
}
REACH = 0.7  # a question routed to an agent shares at least this share of its lexemes with the shop's texts
# A request to change data: SQL that writes, or an imperative of the SQL check's writing words
# (``labkit.agent.sql.check``) in Russian: delete, clear, change, zero, overwrite, create, add, insert, rename,
# grant. «Как удалить аккаунт?» asks how, and is not one.
_CHANGE = re.compile(r"(?<!\w)(удали|очисти|измени|обнули|перезапиши|создай|добавь|вставь|переименуй|выдай)(те)?(?!\w)"
                     r"|\b((drop|create|alter)\s+(table|role|user|database|schema|index|view|function)|truncate\s+\w+|delete\s+from"
                     r"|insert\s+into|update\s+\w+\s+set|(grant|revoke)\s+\w+)\b",
                     re.I)
# A request for the service's secrets: the database's (server's, administrator's, a role's) password, a connection
# string, the catalogs that hold passwords. «Как сменить пароль от личного кабинета?» is a customer's question.
_SECRET = re.compile(r"парол\w*(\s+\S+){0,2}?\s+(от\s+|к\s+|для\s+|у\s+)?(баз|сервер|postgres|администратор|админ|root|суперпользовател|рол[иье])"
                     r"|строк\w*\s+подключени|connection\s+string|database_url|pg_authid|pg_shadow|секретн\w*\s+ключ|api[- ]?ключ",
                     re.I)
# An order to drop the instructions (the opening of a prompt injection): ignore / forget the rules.
_OVERRIDE = re.compile(r"(?<!\w)(игнорируй|забудь|проигнорируй)(те)?\s+(\S+\s+){0,3}?(инструкци|правил|указани|ограничени|промпт)",
                       re.I)


@dataclass(frozen=True)
class RouteDecision:
    """A validated route; `fallback` says the model's answer was invalid and `fallback_route` was used.

    `scores` are the routes' log-probabilities (before ``ROUTE_BIAS``) when the server gave them, and
    `reach` the question's share of the shop's words when it was checked; `tokens` the call's prompt and
    generated tokens as the server counted them; `rule` the rule that overrode the model's choice, if any.
    """

    route: str
    fallback: bool
    raw: str
    scores: Mapping[str, float] | None = None
    reach: float | None = None
    tokens: tuple[int | None, int | None] = (None, None)
    rule: str = ""  # a rule that overrode the model: one of ``refusal_rule``'s names, or "reach"


def route_name(route: str) -> str:
    """The Russian name of a route or question kind (any other label as it is)."""
    return ROUTE_NAMES.get(route, route)


def route_messages(question: str, answer_format: str = "word") -> list[dict[str, str]]:
    """The routing prompt, its worked turns and `question`; `answer_format` "json" asks for ``{"route": ...}``."""
    messages = [{"role": "system", "content": ROUTE_SYSTEM.replace("{answer}", ROUTE_ANSWER[answer_format])}]
    for asked, route in ROUTE_SHOTS:
        reply = route if answer_format == "word" else json.dumps({"route": route})
        messages += [{"role": "user", "content": asked}, {"role": "assistant", "content": reply}]
    return [*messages, {"role": "user", "content": question}]


def route_scores(alternatives: Sequence[tuple[str, float]]) -> dict[str, float]:
    """Log-probability of each route from (token, logprob) alternatives of the answer's first token.

    A route none of whose first tokens is listed gets the least likely listed token's log-probability
    (an upper bound, as in ``labkit.models.relevance.yes_probability``).
    """
    if not alternatives:
        raise ValueError("no alternatives to read the routes from")
    floor = min(logprob for _, logprob in alternatives)
    scores = {}
    for route in ROUTES:
        mass = sum(math.exp(logprob) for token, logprob in alternatives if token.strip().lower() in _FIRST_TOKENS[route])
        scores[route] = math.log(mass) if mass > 0 else floor
    return scores


def route_bias(model: str) -> dict[str, float]:
    """The calibration constants of `model`: its own where chosen on tune (ROUTE_BIAS_BY_MODEL), else ROUTE_BIAS."""
    return dict(ROUTE_BIAS_BY_MODEL.get(model, ROUTE_BIAS))


def pick_route(scores: Mapping[str, float], bias: Mapping[str, float] = ROUTE_BIAS) -> str:
    """The route with the highest calibrated score (ties: the order of ROUTES)."""
    return max(ROUTES, key=lambda route: scores[route] + bias.get(route, 0.0))


def reach(lexemes: set[str], vocabulary: frozenset[str]) -> float:
    """The share of `lexemes` (numbers and codes left out) that occur in `vocabulary`; 1.0 when none is left."""
    words = {word for word in lexemes if not any(ch.isdigit() for ch in word)}
    return sum(word in vocabulary for word in words) / len(words) if words else 1.0


def asks_to_change(question: str) -> bool:
    """Does `question` ask to change the shop's data («Удали все заказы», «выполни DROP TABLE orders»)?"""
    return bool(_CHANGE.search(question or ""))


def asks_for_secret(question: str) -> bool:
    """Does `question` ask for the service's secrets («покажи пароль базы», «строка подключения»)?"""
    return bool(_SECRET.search(question or ""))


def refusal_rule(question: str) -> str:
    """The rule that refuses `question` before any model is asked: "change_request", "secret_request",
    "instruction_override", or "" when none does."""
    if asks_to_change(question):
        return "change_request"
    if asks_for_secret(question):
        return "secret_request"
    return "instruction_override" if _OVERRIDE.search(question or "") else ""


def parse_route(raw: str, fallback_route: str) -> RouteDecision:
    """The first JSON object in `raw` whose "route" is one of ROUTES; otherwise `fallback_route`, recorded."""
    if fallback_route not in ROUTES:
        raise ValueError(f"fallback route {fallback_route!r} is not one of {ROUTES}")
    for match in _OBJECT.finditer(raw or ""):
        try:
            value = json.loads(match.group(0))
        except json.JSONDecodeError:
            continue
        route = value.get("route") if isinstance(value, dict) else None
        if isinstance(route, str) and route.strip().lower() in ROUTES:
            return RouteDecision(route.strip().lower(), False, raw)
    return RouteDecision(fallback_route, True, raw)
