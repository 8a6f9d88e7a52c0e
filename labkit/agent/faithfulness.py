"""Is an agent's answer faithful to what the tools returned? An automatic check (taught in 06_agent).

A small model retelling search results invents: a «фигурист» became a «физикист», a count
came out as «3 новость», a topic code («finance») leaked into the Russian prose. The check
reads the answer against the tool results and the question and lists every problem:

* a number in the answer that is in neither the results nor the question («Нашлось N» excepted);
* an internal code (a topic or tone code, a tool name, a ``[12]`` document id);
* a content word whose stem is in neither the results nor the question (an invented fact);
* a sentence whose content words no single result line mostly holds (facts of two news mixed into one);
* a count of news whose noun form disagrees with the number («3 новость»).

It is strict on purpose: the agent falls back to quoting the results when its retelling fails.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from labkit.core.corpora.news import TONES, TOPICS
from labkit.core.text import plural

__all__ = ["Faithfulness", "check_answer", "faithfulness_rate", "strip_ids", "extractive_answer", "STEM"]

STEM = 5  # letters compared: «фигурист»/«фигуристка» share «фигур», «физикист» does not
COVERAGE = 0.75  # share of a sentence's content words one result line must hold
_WORD = re.compile(r"[а-яёa-z]+", re.IGNORECASE)
_NUMBER = re.compile(r"\d+(?:[.,]\d+)?")
_COUNTED = re.compile(r"(\d+)\s+(новост[а-яё]*)", re.IGNORECASE)
_DOC_ID = re.compile(r"\[\d+\]")
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


def check_answer(answer: str, results: Sequence[str], question: str = "") -> Faithfulness:
    """Check `answer` against the tool `results` (the texts the model read) and the `question`."""
    sources = [*results, question]
    problems: list[str] = []
    known_numbers = {n.replace(",", ".") for text in sources for n in _NUMBER.findall(text)}
    known = _stems(sources)
    lines = [line for text in results for line in text.splitlines() if line.strip()]
    counted = re.sub(rf"^Нашлось {len(lines)} ", "Нашлось ", answer)  # how many results: said only as extractive_answer does
    problems += [f"число {n} не из данных" for n in _NUMBER.findall(counted)
                 if n.replace(",", ".") not in known_numbers]
    for word in _WORD.findall(counted):
        value = next((n for stem, n in _NUMBER_WORDS.items()
                      if word.casefold() == stem or (len(stem) > 4 and word.casefold().startswith(stem))), None)
        if value is not None and str(value) not in known_numbers and word.casefold()[:STEM] not in known:
            problems.append(f"число «{word}» ({value}) не из данных")
    problems += [f"служебный код {code}" for code in _CODES
                 if re.search(rf"(?<![\w-]){re.escape(code)}(?![\w-])", answer, re.IGNORECASE)]
    problems += [f"номер документа {match}" for match in _DOC_ID.findall(answer)]
    for word in _WORD.findall(answer):
        stem = word.casefold()[:STEM]
        if len(word) >= STEM and stem not in known and not word.casefold().startswith(_FRAME):
            problems.append(f"слово «{word}» не из данных")
    line_stems = [_stems([line]) for line in lines]
    for sentence in re.split(r"[.!?;,]+", answer):  # a clause at a time: «X, а Y» may join two news
        words = {w.casefold()[:STEM] for w in _WORD.findall(sentence)
                 if len(w) >= STEM and not w.casefold().startswith(_FRAME)}
        best = max((len(words & stems) for stems in line_stems), default=0)
        if len(words) >= 3 and best < COVERAGE * len(words):
            problems.append(f"фраза «{sentence.strip()[:60]}» смешивает разные новости")
    for number, noun in _COUNTED.findall(answer):
        right = plural(int(number), "новость", "новости", "новостей")
        if noun.casefold() != right and noun.casefold() in ("новость", "новости", "новостей"):
            problems.append(f"«{number} {noun}»: нужно «{number} {right}»")
    return Faithfulness(tuple(dict.fromkeys(problems)))


def faithfulness_rate(verdicts: Sequence[Faithfulness]) -> float:
    """The share of faithful answers (nan for none)."""
    return sum(v.ok for v in verdicts) / len(verdicts) if verdicts else float("nan")


def strip_ids(result: str) -> str:
    """A tool result without its ``[12]`` document ids: the model then has none to leak."""
    return re.sub(r"^\[\d+\]\s*", "", result, flags=re.MULTILINE)


def extractive_answer(results: Sequence[str]) -> str:
    """An answer that only quotes the results (faithful by construction): the fallback of a failed retelling."""
    lines = [line.strip() for text in results for line in strip_ids(text).splitlines() if line.strip()]
    if not lines:
        return "В базе ничего не нашлось."
    if len(lines) == 1:
        return lines[0] if lines[0].endswith(".") else f"{lines[0]}."
    quoted = "; ".join(f"«{line}»" for line in lines)
    return f"Нашлось {len(lines)} {plural(len(lines), 'новость', 'новости', 'новостей')}: {quoted}."
