"""No string breaks a search mode: ≥ 1,000 seeded random strings through every mode in SEARCH_MODES.

Lexical sees all N_STRINGS strings. The other modes may run a model on the query (an
embedding call, ~20 ms; the latent-terms encoder, up to seconds for 500 tokens), so they
see every edge case (including the 10 kB ones) plus a seeded sample of SUBSET random
strings of at most SUBSET_MAX_CHARS characters (longer text is cut before any model
anyway): more than 1,000 strings for every mode.
"""

from __future__ import annotations

import random

import pytest

import labkit as lk
from labkit.retrieval.branches.vector import embeddable

N_STRINGS = 2000
SUBSET = 1000
SUBSET_MAX_CHARS = 100
EDGE_CASES = [
    "", " ", "\n\t", "\x00", "a\x00b", "&", "|", "!", "!!", "()", "(", ")", ":*", "a:*", "<->", "<1>", "a <-> b",
    "'", "''", '"', "\\", "\\\\", "\\'", "';DROP TABLE news;--", "золото & | ! ставка", "ключ:A", "!золото",
    "😀", "🇷🇺🥇", "\u200b", "\ufeff", "\u0301", "ё̈", "x" * 10_000, "золото " * 2_000, "%s %(x)s {}", "\ud800",
]  # fmt: skip
ALPHABET = list("&|!:()<->*'\"\\ ,.;%{}[]\t\n\x00") + list("золотставкаЦБ") + list("abcXYZ019_") + [
    "😀", "🥇", "\u0301", "\u200b", "ß", "İ", "中", "ع", "\ud800", "<->", "<2>", ":*", "'ab'", "золото", "ставка",
]  # fmt: skip


def _random_strings(n: int, seed: int = 20261202) -> list[str]:
    rng = random.Random(seed)
    strings = list(EDGE_CASES)
    while len(strings) < n:
        length = rng.choice([1, 2, 5, 10, 30, 100, rng.randint(0, 3000)])
        strings.append("".join(rng.choice(ALPHABET) for _ in range(length)))
    return strings


STRINGS = _random_strings(N_STRINGS)


def test_the_generator_is_varied():
    assert len(STRINGS) >= 1000 and len(set(STRINGS)) > 1000 and len(_subset()) > 1000
    assert any(len(s) >= 10_000 for s in STRINGS) and "" in STRINGS and any("\x00" in s for s in STRINGS)


def _subset() -> list[str]:
    rng = random.Random(7)
    short = sorted({s for s in STRINGS[len(EDGE_CASES) :] if len(s) <= SUBSET_MAX_CHARS})
    return EDGE_CASES + rng.sample(short, SUBSET)


@pytest.fixture(scope="module")
def embedded(lab_ro) -> None:
    """The random strings' query vectors, asked for in batches (about 30 requests, not 1,000; then cached), once.

    Prepared as the modes prepare a query (``embeddable``), so they find them in the cache. The edge
    cases are left out: each mode embeds those itself, one string per request.
    """
    texts = [embeddable(text) for text in _subset()[len(EDGE_CASES):]]
    lk.cached_embeddings(lab_ro, [text for text in texts if text.strip()], "query")


@pytest.mark.parametrize("mode", sorted(lk.SEARCH_MODES))
@pytest.mark.services
def test_no_string_raises(lab_ro, embedded, mode):
    search = lk.SEARCH_MODES[mode]
    strings = STRINGS if mode == "lexical" else _subset()
    for text in strings:
        try:
            hits = search(lab_ro, text, 5)
        except Exception as exc:  # noqa: BLE001 (report which string broke which mode)
            pytest.fail(f"{mode} raised {type(exc).__name__}: {exc} on {text[:80]!r}")
        assert isinstance(hits, list) and len(hits) <= 5


@pytest.mark.services
def test_single_sql_hybrid_survives_the_strings_too(lab_ro):
    for text in _subset():
        lk.search_hybrid_sql(lab_ro, text, 5)
