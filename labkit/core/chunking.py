"""Cutting long documents into chunks a small embedder can read whole (taught in the knowledge-base track).

multilingual-e5-small reads at most 512 tokens and silently drops the rest, so a long support
article is embedded in pieces. Three ways to cut, each keeping every chunk's character span in
its document (so a search can be judged by the answer's span, not only by the document):

* ``fixed_chunks``: windows of `size` tokens that overlap by `overlap` tokens;
* ``sentence_chunks``: whole sentences packed up to `size` tokens, the last `overlap` tokens'
  worth of sentences repeated at the start of the next chunk;
* ``heading_chunks``: one chunk per Markdown section (``#``/``##``/``###``), a section longer than
  `size` cut again by sentences.

What is embedded is ``Chunk.indexed``: the document's title and the chunk's section path in front
of its text («Гарантийное обслуживание › Сроки ремонта: …»), so a chunk from the middle of a
document still says what it is about. Tokens are counted by a function you pass (``count``); the
default ``word_tokens`` counts words and punctuation marks, a cheap stand-in that the lesson
compares with the model's own count.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = [
    "Section",
    "Chunk",
    "TokenCounter",
    "word_tokens",
    "token_spans",
    "sections",
    "sentences",
    "fixed_chunks",
    "sentence_chunks",
    "heading_chunks",
    "span_overlap",
    "CHUNKERS",
    "ChunkSpec",
]

TokenCounter = Callable[[str], int]
_TOKEN = re.compile(r"\w+|[^\w\s]")
_HEADING = re.compile(r"^(#{1,3}) +(.+?) *$", re.MULTILINE)
# A sentence ends at . ! ? … (with closing quotes or brackets) followed by space and a capital,
# a digit or an opening quote/bracket, or at a line break; list items and headings are sentences too.
_SENTENCE_END = re.compile(r"(?<=[.!?…])[»\")\]]*\s+(?=[«\"(\[A-ZА-ЯЁ0-9—–-])|\n+")
# ...but not after an abbreviation («ул. Летниковская», «ст. 25») or a list item's number («2. Приходите»).
_NOT_AN_END = re.compile(r"(?:^|[\s(«])(?:ул|г|д|ст|п|пп|ч|т|пр|им|др|см|стр|тел|руб|коп|тыс|млн|млрд|кв|обл|корп|ред|"
                         r"мин|макс|ок|напр|т\.е|т\.к|т\.д|т\.п|т\.ч)\.$|(?:^|\n)\s*\d{1,3}\.$")


def word_tokens(text: str) -> int:
    """A rough token count: words and punctuation marks (e5's own tokenizer cuts Russian finer)."""
    return len(_TOKEN.findall(text))


def token_spans(text: str) -> list[tuple[int, int]]:
    """The character span of each of ``word_tokens``' tokens, in order (span metrics count answers in these)."""
    return [match.span() for match in _TOKEN.finditer(text)]


@dataclass(frozen=True)
class Section:
    """A Markdown section of a document: its heading path and its body's character span."""

    path: tuple[str, ...]  # ("Гарантийное обслуживание", "Сроки ремонта")
    head: int  # where its heading line starts (== start for the text before the first heading)
    start: int  # its body: text[start:end]
    end: int


@dataclass(frozen=True)
class Chunk:
    """One piece of a document, with where it lies in the document's text."""

    doc_id: int
    number: int  # 0, 1, ... within the document
    text: str
    start: int  # character offsets in the document text: text == document[start:end]
    end: int
    section: tuple[str, ...] = ()  # the heading path of the section the chunk starts in
    title: str = ""

    @property
    def indexed(self) -> str:
        """What gets embedded and indexed: title and section path, then the chunk's text."""
        head = " › ".join(dict.fromkeys(part for part in (self.title, *self.section) if part))  # no title twice
        return f"{head}: {self.text}" if head else self.text


def sections(text: str) -> list[Section]:
    """The document's sections by its ``#``/``##``/``###`` headings; text before the first heading is a section too.

    A section's span is its body (the heading line excluded) up to the next heading of any level.
    """
    found = list(_HEADING.finditer(text))
    result: list[Section] = []
    if not found or found[0].start() > 0 and text[: found[0].start()].strip():
        result.append(Section((), 0, 0, found[0].start() if found else len(text)))
    path: list[str] = []
    for number, match in enumerate(found):
        level = len(match.group(1))
        path = [*path[: level - 1], *[""] * max(0, level - 1 - len(path)), match.group(2).strip()]
        end = found[number + 1].start() if number + 1 < len(found) else len(text)
        result.append(Section(tuple(p for p in path if p), match.start(), match.end(), end))
    return result


def sentences(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """Character spans of the sentences (and list items, headings) of ``text[start:end]``, blanks trimmed."""
    end = len(text) if end is None else end
    spans: list[tuple[int, int]] = []
    position = start
    for match in _SENTENCE_END.finditer(text, start, end):
        if "\n" not in match.group() and _NOT_AN_END.search(text[position:match.start()]):
            continue
        spans.append((position, match.start()))
        position = match.end()
    spans.append((position, end))
    trimmed = []
    for left, right in spans:
        piece = text[left:right]
        if piece.strip():
            left += len(piece) - len(piece.lstrip())
            right -= len(piece) - len(piece.rstrip())
            trimmed.append((left, right))
    return trimmed


def _section_at(parts: Sequence[Section], offset: int) -> tuple[str, ...]:
    """The heading path of the section whose heading or body holds `offset`."""
    return next((section.path for section in reversed(parts) if section.head <= offset), ())


def _make(doc_id: int, text: str, spans: Sequence[tuple[int, int]], title: str,
          parts: Sequence[Section] | None = None) -> list[Chunk]:
    parts = sections(text) if parts is None else parts
    return [Chunk(doc_id, number, text[left:right], left, right, _section_at(parts, left), title)
            for number, (left, right) in enumerate(spans)]


def _check(size: int, overlap: int) -> None:
    if size < 1:
        raise ValueError(f"size must be at least 1 token, got {size}")
    if not 0 <= overlap < size:
        raise ValueError(f"overlap must lie in [0, size), got {overlap} with size {size}")


def fixed_chunks(doc_id: int, text: str, size: int, overlap: int = 0, title: str = "") -> list[Chunk]:
    """Windows of `size` tokens (``word_tokens`` tokens), each starting `size - overlap` tokens after the last.

    Taught in the chunking lesson: the simplest cut, blind to sentences and headings.
    """
    _check(size, overlap)
    tokens = token_spans(text)
    if not tokens:
        return []
    spans = []
    for first in range(0, len(tokens), size - overlap):
        last = min(first + size, len(tokens)) - 1
        spans.append((tokens[first][0], tokens[last][1]))
        if last == len(tokens) - 1:
            break
    return _make(doc_id, text, spans, title)


def _pack(text: str, pieces: Sequence[tuple[int, int]], size: int, overlap: int,
          count: TokenCounter) -> list[tuple[int, int]]:
    """Pack consecutive sentence spans into chunks of at most `size` tokens (a longer sentence alone),
    starting each next chunk with the last sentences of the previous one worth at most `overlap` tokens."""
    lengths = [count(text[left:right]) for left, right in pieces]
    spans: list[tuple[int, int]] = []
    first = 0
    while first < len(pieces):
        last, total = first, lengths[first]
        while last + 1 < len(pieces) and total + lengths[last + 1] <= size:
            last += 1
            total += lengths[last]
        spans.append((pieces[first][0], pieces[last][1]))
        if last + 1 >= len(pieces):
            break
        back, carried = last + 1, 0
        while back - 1 > first and carried + lengths[back - 1] <= overlap:
            back -= 1
            carried += lengths[back]
        first = back
    return spans


def sentence_chunks(doc_id: int, text: str, size: int, overlap: int = 0, title: str = "",
                    count: TokenCounter = word_tokens) -> list[Chunk]:
    """Whole sentences packed into chunks of at most `size` tokens, overlapping by whole sentences.

    Taught in the chunking lesson: no chunk ends mid-sentence, so no answer is cut in two halves.
    """
    _check(size, overlap)
    return _make(doc_id, text, _pack(text, sentences(text), size, overlap, count), title)


def heading_chunks(doc_id: int, text: str, size: int, overlap: int = 0, title: str = "",
                   count: TokenCounter = word_tokens) -> list[Chunk]:
    """One chunk per Markdown section; a section over `size` tokens is cut by sentences (with `overlap`).

    Taught in the chunking lesson: the document's own structure decides, so a chunk is one topic.
    """
    _check(size, overlap)
    parts = sections(text)
    spans: list[tuple[int, int]] = []
    for section in parts:
        pieces = sentences(text, section.start, section.end)
        if pieces:
            spans += _pack(text, pieces, size, overlap, count)
    return _make(doc_id, text, spans, title, parts)


def span_overlap(chunk: tuple[int, int], answer: tuple[int, int]) -> tuple[float, float]:
    """(recall, IoU) of an answer's character span by a chunk's span: how much of the answer the chunk
    holds, and intersection over union of the two spans."""
    inter = max(0, min(chunk[1], answer[1]) - max(chunk[0], answer[0]))
    union = max(chunk[1], answer[1]) - min(chunk[0], answer[0])
    length = answer[1] - answer[0]
    return (inter / length if length > 0 else 0.0), (inter / union if union > 0 else 0.0)


CHUNKERS: dict[str, Callable[..., list[Chunk]]] = {
    "fixed": fixed_chunks, "sentence": sentence_chunks, "heading": heading_chunks,
}
"""The three ways to cut, by name (the chunking lesson's sweep iterates them)."""


@dataclass(frozen=True)
class ChunkSpec:
    """How to cut: one of CHUNKERS with its size and overlap in tokens; ``str()`` is «heading 200/40».

    `headed` false indexes each chunk's bare text, without the title and section path in front
    (``Chunk.indexed``): the chunking lesson measures what that head is worth (``str()`` then ends in «bare»).
    """

    method: str = "heading"
    size: int = 200
    overlap: int = 40
    headed: bool = True

    def __post_init__(self) -> None:
        if self.method not in CHUNKERS:
            raise ValueError(f"method must be one of {', '.join(CHUNKERS)}, not {self.method!r}")
        _check(self.size, self.overlap)

    def cut(self, doc_id: int, text: str, title: str = "") -> list[Chunk]:
        """The chunks of one document."""
        return CHUNKERS[self.method](doc_id, text, self.size, self.overlap, title=title)

    def indexed(self, chunk: Chunk) -> str:
        """What is indexed for `chunk` under this spec: ``chunk.indexed`` (title and section path first), or its bare text."""
        return chunk.indexed if self.headed else chunk.text

    @property
    def slug(self) -> str:
        """A name part for tables: ``heading_200_40`` (``heading_200_40_bare`` without the head)."""
        return f"{self.method}_{self.size}_{self.overlap}" + ("" if self.headed else "_bare")

    def __str__(self) -> str:
        return f"{self.method} {self.size}/{self.overlap}" + ("" if self.headed else " bare")
