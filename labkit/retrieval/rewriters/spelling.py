"""Query correction against the corpus' own words: a wrong keyboard layout and typos (taught in 11_beyond_rrf).

An embedder reads «ufpghjv» (Газпром typed with the English layout) or «савка» as noise,
and ``to_tsquery`` finds nothing for a misspelt word. Search engines fix such queries
before searching; ``correct_query`` does it with nothing but the corpus:

* the lexicon is every word of the news bodies and company names (read from Postgres on
  each call, so a changed corpus is followed), each with its Russian stem
  (``ts_lexize('russian_stem', ...)``, the same stemmer as the lexical branch);
* a query word is *known* when it is a lexicon word, a Russian stop word, shorter than
  ``MIN_LETTERS`` letters, or an inflection of a lexicon word: its stem and a lexicon stem
  agree (``same_word``: the snowball stemmer cuts «прибыль» to «прибыл» but «прибыли»
  to «приб»);
* an unknown word made of Latin letters is re-read with the Russian keyboard layout and
  kept in that form when it becomes a known word;
* otherwise it becomes the lexicon word one edit away (Damerau-Levenshtein distance 1: a
  letter added, dropped, changed or two swapped: «савка» -> «ставка»); when such words
  have different stems the word is left alone. Comparing stems instead would also
  "correct" real words («эксперты» -> «экспорт», «катание» -> «казани»). A word the corpus simply does not contain stays as it is.

``Spelling()`` is the rewrite step of a search pipeline (``labkit.retrieval.pipeline``),
printed ``spelling``: the pipeline searches the corrected query; a query without an unknown
word is searched exactly as typed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from psycopg import sql

from labkit.retrieval.branches.lexical import query_words

if TYPE_CHECKING:
    from labkit.core.context import Lab

__all__ = ["MIN_LETTERS", "Correction", "same_word", "edit_distance", "from_latin_layout", "correct_query",
           "Spelling"]

MIN_LETTERS = 5  # shorter words are left alone: too many real words sit one edit apart
_WORD = re.compile(r"\w+")
_LATIN = re.compile(r"[a-z\[\];',.`]+")
_LAYOUT = dict(zip("qwertyuiop[]asdfghjkl;'zxcvbnm,.`", "йцукенгшщзхъфывапролджэячсмитьбюё"))

# {table}: the corpus' documents; {words}: its text || ' ' || coalesce(<lexicon field>, '') ...
_LEXICON_SQL = """
WITH words AS (
    SELECT DISTINCT lower(w) AS word
    FROM {table}, regexp_split_to_table({words}, '[^[:alnum:]]+') AS w
    WHERE w <> ''
)
SELECT word, coalesce(ts_lexize('russian_stem', word), '{{}}') FROM words
"""
_STEMS_SQL = "SELECT w, ts_lexize('russian_stem', w) FROM unnest(%(words)s::text[]) AS w"


class Correction(NamedTuple):
    """A query as typed, as searched, and each change made (typed word -> corrected word)."""

    typed: str
    corrected: str
    changes: tuple[tuple[str, str], ...]


def same_word(stem: str, other: str) -> bool:
    """Are two stems one word's inflections? The shorter (4+ letters) starts the longer; from 6 letters on, its last may differ.

    «приб» and «прибыл» are one word; so are «гимнастк» and «гимнастик». «золт» and «золот»
    are not: a short stem that differs is a typo more often than an inflection.
    """
    shorter = min(len(stem), len(other))
    common = next((i for i, (a, b) in enumerate(zip(stem, other)) if a != b), shorter)
    return shorter >= 4 and (common == shorter or (shorter >= 6 and common == shorter - 1))


def edit_distance(a: str, b: str) -> int:
    """Damerau-Levenshtein distance (optimal string alignment): insert, delete, substitute, swap neighbours."""
    previous2: list[int] = []
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, start=1):
        current = [i] + [0] * len(b)
        for j, cb in enumerate(b, start=1):
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                current[j] = min(current[j], previous2[j - 2] + 1)
        previous2, previous = previous, current
    return previous[-1]


def from_latin_layout(word: str) -> str | None:
    """`word` as if typed with the Russian layout («ufpghjv» -> «газпром»); None unless it is all layout keys."""
    lowered = word.lower()
    return "".join(_LAYOUT[c] for c in lowered) if _LATIN.fullmatch(lowered) else None


def _lexicon_sql(lab: Lab) -> sql.Composed:
    """_LEXICON_SQL over the lab's corpus: the words of its text and of its lexicon fields (names)."""
    corpus = lab.corpus
    words = [sql.Identifier(corpus.text_column), *(sql.SQL("coalesce({}, '')").format(sql.Identifier(name))
                                                   for name in corpus.lexicon)]
    return sql.SQL(_LEXICON_SQL).format(table=sql.Identifier(corpus.table), words=sql.SQL(" || ' ' || ").join(words))


def _stems(lab: Lab, words: list[str]) -> dict[str, list[str] | None]:
    """Each word's Russian stems ([] for a stop word, None for a word the stemmer does not take)."""
    with lab.conn.cursor() as cur:
        cur.execute(_STEMS_SQL, {"words": words})
        return dict(cur.fetchall())


def correct_query(lab: Lab, query: str) -> Correction:
    """The query with wrong-layout and misspelt words replaced by corpus words. Taught in 11_beyond_rrf."""
    words = query_words(query)  # the words the lexical branch reads: distinct, lower-cased, bounded
    if not words:
        return Correction(query, query, ())
    with lab.conn.cursor() as cur:
        cur.execute(_lexicon_sql(lab))
        lexicon = {word: stems for word, stems in cur.fetchall()}
    known_stems = {stem for stems in lexicon.values() for stem in stems}
    layouts = {w: alt for w in words if (alt := from_latin_layout(w)) is not None}
    stems = _stems(lab, words + list(layouts.values()))

    def known(word: str) -> bool:
        found = stems.get(word)
        return (word in lexicon or found == [] or bool(set(found or ()) & known_stems)
                or any(same_word(stem, other) for stem in found or () for other in known_stems))

    changes: dict[str, str] = {}
    for word in words:
        if len(word) < MIN_LETTERS or word.isdigit() or known(word):
            continue
        alt = layouts.get(word)
        if alt is not None and known(alt):
            changes[word] = alt
            continue
        near = sorted(c for c in lexicon if abs(len(c) - len(word)) <= 1 and edit_distance(word, c) == 1)
        if near and len({tuple(lexicon[c]) for c in near}) == 1:
            changes[word] = near[0]
    if not changes:
        return Correction(query, query, ())
    def fix(match: re.Match[str]) -> str:
        typed = match.group(0)
        fixed = changes.get(typed.lower(), typed)
        return fixed[:1].upper() + fixed[1:] if typed[:1].isupper() and fixed is not typed else fixed

    corrected = _WORD.sub(fix, query)
    return Correction(query, corrected, tuple(changes.items()))


@dataclass(frozen=True)
class Spelling:
    """The rewrite step of a search pipeline: ``correct_query(lab, query).corrected``. Taught in 11_beyond_rrf."""

    def __call__(self, lab: Lab, query: str) -> str:
        return correct_query(lab, query).corrected

    def __str__(self) -> str:
        return "spelling"
