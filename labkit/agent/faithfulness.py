"""Is an agent's answer faithful to what the tools returned? An automatic check (taught in 06_agent).

A small model retelling search results invents: a «фигурист» became a «физикист», a count
came out as «3 новость», a topic code («finance») leaked into the Russian prose. The answer
cites the news it retells by their ids, ``[12]``, as the tool results show them. The check
reads the answer against the tool results and the question and lists every problem:

* a cited id that is not among the news the tools returned (an invented source);
* an answer that cites none of the news the tools returned, or a sentence retelling news without a citation;
* a number in the answer that is in neither the results nor the question («Нашлось N» excepted);
* an internal code (a topic or tone code, a tool name) or model markup (``<tools>``, JSON);
* a content word whose stem is in neither the results nor the question (an invented fact);
* a clause whose content words no single cited news item mostly holds (facts of two news mixed
  into one, or a fact put on the wrong source);
* a count of news whose noun form disagrees with the number («3 новость»).

It is strict on purpose: the agent falls back to quoting the results when its retelling fails.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from labkit.agent.markup import has_markup
from labkit.core.corpora.news import TONES, TOPICS
from labkit.core.text import plural

__all__ = ["Faithfulness", "check_answer", "faithfulness_rate", "strip_ids", "extractive_answer", "off_topic_answer",
           "cited_ids", "retrieved_ids", "result_items", "STEM"]

STEM = 5  # letters compared: «фигурист»/«фигуристка» share «фигур», «физикист» does not
COVERAGE = 0.75  # share of a clause's content words one (cited) result line must hold
_WORD = re.compile(r"[а-яёa-z]+", re.IGNORECASE)
_NUMBER = re.compile(r"\d+(?:[.,]\d+)?")
_COUNTED = re.compile(r"(\d+)\s+(новост[а-яё]*)", re.IGNORECASE)
_CITATION = re.compile(r"\[\s*(\d+(?:\s*,\s*\d+)*)\s*\]")  # [12] or [12, 15]
_RESULT_LINE = re.compile(r"^\[(\d+)\]\s*(.*)$")  # a news item as format_result shows it: [12] text (details)
_SENTENCE_END = re.compile(r"(?<=[.!?…])(?:\s*\[[\d,\s]+\])*\s+|(?<=\])\s*[.!?…]+\s*")
# Numbers written as words count as numbers: «три новости» must match a 3 in the data.
_NUMBER_WORDS = {stem: n for n, stems in enumerate([
    (), ("один", "одна", "одно", "одну"), ("два", "две", "двух"), ("три", "трёх", "трех"), ("четыр",), ("пять", "пяти"),
    ("шесть", "шести"), ("семь", "семи"), ("восемь", "восьми"), ("девять", "девяти"), ("десять", "десяти"),
]) for stem in stems}
_CODES = {*TOPICS, *TONES, "search_articles", "get_metrics", "search_by_entity"}
# Words any faithful retelling may use although no result contains them (how Russian talks about news).
_FRAME = ("новост", "сообщ", "пишут", "говор", "найде", "нашл", "нашёл", "базе", "данны", "котор", "такж", "также",
          "согла", "связа", "касаю", "тема", "темы", "теме", "котор", "этом", "однак", "кроме", "сейча", "други",
          "можно", "сказа", "отмеч", "упоми", "указ", "извес", "инфор", "посвя", "следу", "посл", "перв", "одна",
          "одной", "одно", "несколь", "всего", "всех", "котора", "являе", "стало", "стали", "было", "были", "будет",
          "больш", "ещё", "есть", "нет", "свою", "свои", "своей", "своих", "очень", "имеет", "ответ", "вопро")


@dataclass(frozen=True)
class Faithfulness:
    """The verdict on one answer: ``ok`` when ``problems`` is empty."""

    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.problems


def _stems(texts: Iterable[str]) -> set[str]:
    return {word.casefold()[:STEM] for text in texts for word in _WORD.findall(text)}


def cited_ids(answer: str) -> list[int]:
    """The news ids an answer cites (``[12]``, ``[12, 15]``), in order, each once."""
    found = [int(n) for group in _CITATION.findall(answer) for n in group.split(",")]
    return list(dict.fromkeys(found))


def result_items(results: Sequence[str]) -> dict[int, str]:
    """The items (news, chunks) the tool results hold, id -> its line's text (lines ``[12] text``), in order."""
    return {int(m.group(1)): m.group(2).strip() for text in results for line in text.splitlines()
            if (m := _RESULT_LINE.match(line.strip()))}


def retrieved_ids(results: Sequence[str]) -> list[int]:
    """The ids of the news the tool results hold, in order, each once."""
    return list(result_items(results))


def _sentences(answer: str) -> list[str]:
    """The answer's sentences: a line is never joined to the next, a citation written right after a sentence's
    end on its line («… рекорд. [6]») belongs to that sentence, one opening a line («[6] Фигурист…») to its own."""
    parts = []
    for line in answer.splitlines():
        start = 0
        for match in _SENTENCE_END.finditer(line):
            parts.append(line[start:match.end()])
            start = match.end()
        parts.append(line[start:])
    return [p.strip() for p in parts if p.strip()]


def _content(text: str) -> set[str]:
    """The stems of the content words of `text` (long words that are not how Russian talks about news)."""
    return {w.casefold()[:STEM] for w in _WORD.findall(text) if len(w) >= STEM and not w.casefold().startswith(_FRAME)}


def check_answer(answer: str, results: Sequence[str], question: str = "") -> Faithfulness:
    """Check `answer` against the tool `results` (as the tools returned them, ids included) and the `question`.

    Taught in 06_agent. When the results hold news (lines ``[12] text``), every sentence that retells
    them must cite at least one, every cited id must be one of them, and each clause must be held by
    a news item it (or its sentence) cites.
    """
    lines: dict[int | None, list[str]] = {}
    for text in results:
        for line in text.splitlines():
            if line.strip():
                match = _RESULT_LINE.match(line.strip())
                key, body = (int(match.group(1)), match.group(2)) if match else (None, line.strip())
                lines.setdefault(key, []).append(body)
    documents = {key: " ".join(bodies) for key, bodies in lines.items() if key is not None}
    texts = [body for bodies in lines.values() for body in bodies]
    sources = [*texts, question]
    problems: list[str] = []
    cited = cited_ids(answer)
    problems += [f"ссылка [{i}] не на найденную новость" for i in cited if i not in documents]
    if documents and not any(i in documents for i in cited):  # «Да, были.» retells nothing it could be checked on
        problems.append("ответ не ссылается ни на одну из найденных новостей")
    prose = _CITATION.sub(" ", answer)  # the citations are checked above; below, the words
    if not _WORD.search(prose):
        problems.append("в ответе нет ни слова, только ссылки" if cited else "пустой ответ")
    if has_markup(answer):
        problems.append("разметка модели в ответе")
    known_numbers = {n.replace(",", ".") for text in sources for n in _NUMBER.findall(text)}
    known = _stems(sources)
    counted = re.sub(rf"^Нашлось {len(texts)} ", "Нашлось ", prose)  # how many results: said only as extractive_answer does
    problems += [f"число {n} не из данных" for n in _NUMBER.findall(counted)
                 if n.replace(",", ".") not in known_numbers]
    for word in _WORD.findall(counted):
        value = next((n for stem, n in _NUMBER_WORDS.items()
                      if word.casefold() == stem or (len(stem) > 4 and word.casefold().startswith(stem))), None)
        if value is not None and str(value) not in known_numbers and word.casefold()[:STEM] not in known:
            problems.append(f"число «{word}» ({value}) не из данных")
    problems += [f"служебный код {code}" for code in _CODES
                 if re.search(rf"(?<![\w-]){re.escape(code)}(?![\w-])", prose, re.IGNORECASE)]
    for word in _WORD.findall(prose):
        stem = word.casefold()[:STEM]
        if len(word) >= STEM and stem not in known and not word.casefold().startswith(_FRAME):
            problems.append(f"слово «{word}» не из данных")
    def shown(clause: str) -> str:
        return re.sub(r"\s+([.,;:!?])", r"\1", " ".join(_CITATION.sub(" ", clause).split()))[:60]

    every_line = [_stems([text]) for text in texts]
    for sentence in _sentences(answer):
        own = [i for i in cited_ids(sentence) if i in documents]
        if documents and _content(_CITATION.sub(" ", sentence)) and not cited_ids(sentence):
            problems.append(f"фраза «{shown(sentence)}» без ссылки на новость")
        for clause in re.split(r"[;,]+", sentence):  # a clause at a time: «X, а Y» may join two news
            words = _content(_CITATION.sub(" ", clause))
            if len(words) < 3:
                continue
            held = [i for i in cited_ids(clause) if i in documents] or own
            candidates = [_stems([documents[i]]) for i in held] if held else every_line
            best = max((len(words & stems) for stems in candidates), default=0)
            if best < COVERAGE * len(words):
                problems.append(f"фраза «{shown(clause)}» не держится на процитированной новости" if held
                                else f"фраза «{shown(clause)}» смешивает разные новости")
    for number, noun in _COUNTED.findall(prose):
        right = plural(int(number), "новость", "новости", "новостей")
        if noun.casefold() != right and noun.casefold() in ("новость", "новости", "новостей"):
            problems.append(f"«{number} {noun}»: нужно «{number} {right}»")
    return Faithfulness(tuple(dict.fromkeys(problems)))


def faithfulness_rate(verdicts: Sequence[Faithfulness]) -> float:
    """The share of faithful answers (nan for none)."""
    return sum(v.ok for v in verdicts) / len(verdicts) if verdicts else float("nan")


def strip_ids(result: str) -> str:
    """A tool result without its ``[12]`` document ids (the text a person reads in a quote)."""
    return re.sub(r"^\[\d+\]\s*", "", result, flags=re.MULTILINE)


def extractive_answer(results: Sequence[str]) -> str:
    """An answer that only quotes the results, each news with its id (faithful by construction).

    The fallback of a failed retelling. Taught in 06_agent.
    """
    items = []
    for text in results:
        for line in text.splitlines():
            if line.strip():
                match = _RESULT_LINE.match(line.strip())
                items.append((match.group(2).strip(), f" [{match.group(1)}]") if match else (line.strip(), ""))
    if not items:
        return "В базе ничего не нашлось."
    if len(items) == 1:
        body, cite = items[0]
        return f"{body.rstrip('.')}{cite}."
    quoted = "; ".join(f"«{body}»{cite}" for body, cite in items)
    return f"Нашлось {len(items)} {plural(len(items), 'новость', 'новости', 'новостей')}: {quoted}."


def off_topic_answer(queries: Sequence[str], results: Sequence[str]) -> str:
    """The answer when no word of the searched `queries` occurs in the news: say so, then quote the nearest results.

    A vector search always returns neighbours; retelling them as the answer to «Сколько новостей про погоду?»
    would be faithful to the results and still wrong. Taught in 06_agent.
    """
    asked = ", ".join(f"«{query}»" for query in dict.fromkeys(queries))
    nearest = extractive_answer(results)
    if nearest == extractive_answer([]):
        return f"Новостей об этом в базе нет: слов запроса {asked} нет ни в одной новости."
    return (f"Новостей об этом в базе нет: слов запроса {asked} нет ни в одной новости. "
            f"Ближайшие по смыслу, но не об этом: {nearest[0].lower()}{nearest[1:]}")
