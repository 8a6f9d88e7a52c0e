"""Does the planner's call fit the question? Moving, trimming and adding calls by what the question asks (taught in 06_agent).

A small model slips in ways the question itself reveals: it counts when asked for the news
themselves, searches when asked for a count, gives a value to the wrong tool, adds a filter
nobody asked for, searches on small talk, or calls nothing on «Расскажи про спорт». Every
check here reads the question, the offered tools' schemas (their enums and Russian glosses)
and, for small talk, the corpus' ``Scope``; anything the question does not contradict is left
as the model chose it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from labkit.agent.scope import Scope, asks_about_articles
from labkit.agent.tools import tool_schema
from labkit.core.corpora.news import TOPIC_GLOSSES

__all__ = ["GROUNDING", "TOPIC_GROUNDING", "LISTING_WORDS", "is_grounded", "grounded_values", "drop_ungrounded",
           "route_calls", "asks_count", "subject_query", "fallback_call", "names_tool_values", "check_scope"]


# Words that ask for an enum value although they do not contain it (a value is also matched by itself).
GROUNDING: dict[str, tuple[str, ...]] = {
    "positive": ("позитив", "положительн", "хорош", "успех", "удач"),
    "negative": ("негатив", "отрицательн", "плох", "провал", "неудач"),
    "neutral": ("нейтрал",),
    "ЦБ": ("цб", "центробанк", "центральн", "банк росси", "регулятор"),
    "Сбербанк": ("сбер",),
    "Минфин": ("министерств", "минфин"),
}
_WORDS = re.compile(r"\w+")
# A question about how many news there are (not «Сколько стоит золото?»).
_QUANTITY = r"\b(?:сколько|как много|много ли|количеств\w*|число)\b"
_COUNT = re.compile(_QUANTITY + r".*\b(?:новост|материал|стат|публикац|сообщени|замет)", re.IGNORECASE | re.DOTALL)
# Any «how many» at all: «А сколько про финансы?» after a count question still asks for a count.
_HOW_MANY = re.compile(_QUANTITY, re.IGNORECASE)
# Words of a search query that name no subject: a query of these and filter words only is a listing.
LISTING_WORDS = frozenset("""
    новость новости новостей новостях все всё весь про о об обо по в на базе какие какая какой есть есть ли ли
    покажи найди список компания компании компанию компанией тон тона тоном материалы статьи публикации
    расскажи расскажите покажите найдите что пишут известно нибудь
""".split())


def _fold(text: str) -> str:
    return str(text).casefold().replace("ё", "е")


def _topic_words(gloss: str) -> tuple[str, ...]:
    """The word starts that ask for a topic: each gloss word cut by up to three letters (4 at least).

    A start that also begins a listing word («компа» of «компаний», as in «компании») names no topic.
    """
    starts = (w if len(w) < 4 else w[: max(4, len(w) - 3)] for w in _WORDS.findall(_fold(gloss)))
    return tuple(dict.fromkeys(s for s in starts if not any(word.startswith(s) for word in LISTING_WORDS)))


TOPIC_GROUNDING: dict[str, tuple[str, ...]] = {topic: _topic_words(gloss) for topic, gloss in TOPIC_GLOSSES.items()}


def is_grounded(value: str, question: str) -> bool:
    """Does the question ask for this argument value? Taught in 06_agent.

    A topic is asked for by a word starting like a word of its gloss («сырьевых» for
    «сырьё: нефть, ...»); another value by its stem or one of its GROUNDING words.
    """
    text, value = _fold(question), str(value).strip()
    if value in TOPIC_GROUNDING:
        return any(re.search(rf"\b{re.escape(start)}" + (r"\b" if len(start) < 4 else ""), text)
                   for start in TOPIC_GROUNDING[value])
    stem = _fold(value)[: max(2, len(value) - 2)]  # «Сбербанк» matches «Сбербанка», «Яндекс» «Яндексе»
    return stem in text or any(word in text for word in GROUNDING.get(value, ()))


def grounded_values(enum: Sequence[str], question: str) -> list[str]:
    """The values of `enum` the question asks for."""
    return [value for value in enum if is_grounded(value, question)]


def _wanted(schema: dict[str, Any], key: str, value: Any, question: str) -> bool:
    """Keep a required or free-text argument; keep an enum filter only when it is the one value asked for."""
    enum = schema["properties"].get(key, {}).get("enum")
    if key in schema["required"] or enum is None or not isinstance(value, str):
        return True
    return value in enum and grounded_values(enum, question) == [value]  # «и хорошие, и плохие»: no tone


def drop_ungrounded(calls: list[dict[str, Any]], question: str,
                    tools: Sequence[Callable[..., Any]]) -> list[dict[str, Any]]:
    """The calls without optional filter arguments the question did not ask for. Taught in 06_agent.

    A small model likes to add ``tone="neutral"`` to «Какие новости есть про Яндекс?», which
    hides every other Yandex news. Required arguments and free text (``query``) stay untouched;
    a value outside the enum goes too (the model named something the data does not have), and
    so does a filter when the question names two of its values («и хорошие, и плохие»). A
    filter-only tool left with no filter at all would list arbitrary news: the call becomes a
    free-text search for the question instead, when such a tool is offered.
    """
    schemas = _schemas(tools)
    search = next((name for name, schema in schemas.items() if schema["required"] == ["query"]), None)
    kept = []
    for call in calls:
        schema = schemas.get(call["name"])
        arguments = call["arguments"]
        if schema is None or not isinstance(arguments, dict):
            kept.append(call)
            continue
        arguments = {key: value for key, value in arguments.items() if _wanted(schema, key, value, question)}
        if not arguments and call["arguments"] and not schema["required"] and search:
            kept.append({"name": search, "arguments": {"query": question}})
        else:
            kept.append({**call, "arguments": arguments})
    return kept


def _schemas(tools: Sequence[Callable[..., Any]]) -> dict[str, dict[str, Any]]:
    return {schema["name"]: schema["parameters"] for schema in (tool_schema(func)["function"] for func in tools)}


def _enum_params(schema: dict[str, Any]) -> dict[str, list[str]]:
    return {key: prop["enum"] for key, prop in schema["properties"].items() if "enum" in prop}


def _asked(schema: dict[str, Any], question: str) -> dict[str, str]:
    """The enum arguments of a tool the question asks for: each parameter with exactly one value asked for."""
    found = {key: grounded_values(enum, question) for key, enum in _enum_params(schema).items()}
    return {key: values[0] for key, values in found.items() if len(values) == 1}


def _misplaced(name: str, arguments: dict[str, Any], schemas: dict[str, dict[str, Any]],
               question: str) -> dict[str, Any] | None:
    """The call moved to the one other tool whose enum holds a value this tool does not take; None if none such."""
    own = _enum_params(schemas[name])
    for key, value in arguments.items():
        if not isinstance(value, str) or (key in schemas[name]["properties"] and value in own.get(key, [value])):
            continue  # free text, or a value this tool takes
        homes = [(target, other_key) for target, schema in schemas.items() if target != name
                 for other_key, enum in _enum_params(schema).items() if value in enum]
        if len(homes) == 1 and is_grounded(value, question):
            target, other_key = homes[0]
            return {"name": target, "arguments": {**_asked(schemas[target], question), other_key: value}}
    return None


def _roles(schemas: dict[str, dict[str, Any]]) -> tuple[str | None, str | None, str | None]:
    """(the counting tool, the filter-only tool, the free-text search) among the offered ones, by their schemas.

    Counting: one required argument, an enum (get_metrics). Filter-only: no required argument, every
    argument an enum (search_by_entity). Search: exactly ``query`` required (search_articles).
    """
    counter = next((name for name, s in schemas.items()
                    if len(s["required"]) == 1 and s["required"][0] in _enum_params(s)), None)
    lister = next((name for name, s in schemas.items()
                   if not s["required"] and s["properties"] and len(_enum_params(s)) == len(s["properties"])), None)
    search = next((name for name, s in schemas.items() if s["required"] == ["query"]), None)
    return counter, lister, search


def asks_count(question: str) -> bool:
    """Does the question ask how many news there are («Сколько новостей…», «Как много материалов…»)?"""
    return bool(_COUNT.search(question))


def subject_query(question: str) -> str:
    """A search query from the question: its words without the listing ones («какие», «новости», «расскажи»)."""
    words = [w for w in _WORDS.findall(question) if _fold(w) not in LISTING_WORDS]
    return " ".join(words) or question.strip()


def fallback_call(question: str, tools: Sequence[Callable[..., Any]]) -> dict[str, Any] | None:
    """The call a question about the news asks for when the model's own cannot be right. Taught in 06_agent.

    A count of the one topic named, for a count question; the filter-only tool, when the question
    names its values (a company, a tone); otherwise a search for the question's own words.
    None when no offered tool fits.
    """
    schemas = _schemas(tools)
    counter, lister, search = _roles(schemas)
    if counter and asks_count(question):
        key = schemas[counter]["required"][0]
        asked = _asked(schemas[counter], question)
        if key in asked:
            return {"name": counter, "arguments": {key: asked[key]}}
    if lister and (filters := _asked(schemas[lister], question)):
        return {"name": lister, "arguments": filters}
    if search:
        return {"name": search, "arguments": {"query": subject_query(question)}}
    return None


def route_calls(calls: list[dict[str, Any]], question: str,
                tools: Sequence[Callable[..., Any]]) -> list[dict[str, Any]]:
    """Send a call the question plainly meant for another offered tool there. Taught in 06_agent.

    Four slips of a small model, each fixed only when the question itself says so:

    * a count question («Сколько новостей о происшествиях?») answered by a search, or by a
      count of a topic the question does not name: the counting tool (a required topic)
      with the one topic the question names;
    * a value given to the wrong tool (``get_metrics(topic="neutral")``): the tool whose
      enum holds it;
    * a search whose query is only filter words («негативные новости», «Магнит»): the
      filter-only tool with the values the question names;
    * a count for a question that asks no «how many» but for the news themselves («Какие есть
      новости про спорт?», «Что плохого пишут о Газпроме?»): the call ``fallback_call`` makes.

    Anything else is left as the model chose it; a call to a tool that is not offered too
    (the tools node tells the model so).
    """
    schemas = _schemas(tools)
    counter, lister, _ = _roles(schemas)
    if counter and calls and calls[0].get("name") in schemas and asks_count(question):
        key = schemas[counter]["required"][0]
        asked = _asked(schemas[counter], question)
        chosen = calls[0]["arguments"].get(key) if isinstance(calls[0].get("arguments"), dict) else None
        if key in asked and (calls[0]["name"] != counter or not is_grounded(str(chosen), question)):
            return [{"name": counter, "arguments": {key: asked[key]}}]
    routed = []
    for call in calls:
        schema, arguments = schemas.get(call["name"]), call.get("arguments")
        if schema is None or not isinstance(arguments, dict):
            routed.append(call)
            continue
        moved = _misplaced(call["name"], arguments, schemas, question)
        if moved is not None:
            routed.append(moved)
            continue
        if call["name"] == counter and not _HOW_MANY.search(question):
            routed.append(fallback_call(question, tools) or call)
            continue
        query = arguments.get("query")
        if lister and schema["required"] == ["query"] and isinstance(query, str):
            asked = _asked(schemas[lister], question)
            rest = [w for w in _WORDS.findall(_fold(query))
                    if w not in LISTING_WORDS and not any(is_grounded(v, w) for v in asked.values())]
            if asked and not rest:
                routed.append({"name": lister, "arguments": asked})
                continue
        routed.append(call)
    return routed


def names_tool_values(question: str, tools: Sequence[Callable[..., Any]]) -> bool:
    """Does the question name a value one of the tools takes (a topic by its gloss, a company, a tone)?"""
    return any(grounded_values(enum, question)
               for schema in _schemas(tools).values() for enum in _enum_params(schema).values())


def check_scope(calls: list[dict[str, Any]], question: str, tools: Sequence[Callable[..., Any]], scope: Scope,
                *, failed: bool = False) -> list[dict[str, Any]]:
    """The calls a question gets by what the base is about. Taught in 06_agent.

    A question *about the news* asks about news as such («Что пишут…») or names a value a tool
    takes (a topic, a company, a tone); a question *within the base's reach* is about the news
    or speaks the documents' words (``Scope.within``). Then:

    * a call for a question beyond the base's reach (small talk, «Какая столица Франции?») is
      dropped: the agent answers without tools;
    * a question about the news that got no call («Расскажи про спорт.») gets ``fallback_call``;
      so does one within reach whose reply `failed` (nothing but markup, or nothing at all).

    Everything else stays as the model chose it: a search for «О чём договорились страны ОПЕК+?»,
    whose words are the news' own, although it names no topic.
    """
    about = asks_about_articles(question) or names_tool_values(question, tools)
    within = about or scope.within(question)
    if calls and not within:
        return []
    if not calls and (about or (failed and within)):
        call = fallback_call(question, tools)
        return [call] if call else []
    return calls
