"""The kind-labelled retrieval set (labkit/data/retrieval.jsonl) is well formed, and split loading works.

No services: these tests read the JSONL files only.
"""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest

from labkit.core.corpora import load_corpus, load_queries
from labkit.core.corpora.news import HELDOUT_PATH, QUERIES_PATH, RETRIEVAL_PATH
from labkit.core.corpus import SPLITS, DataError, query_kinds

KINDS = {"paraphrase", "homonym", "entity", "number", "typo", "multiword"}
MIN_QUERIES = 84
MIN_PER_KIND = 12

# A keyboard-layout slip: Russian typed with the Latin layout on (ЙЦУКЕН keys -> QWERTY letters).
_LAYOUT = str.maketrans("qwertyuiop[]asdfghjkl;'zxcvbnm,.", "йцукенгшщзхъфывапролджэячсмитьбю")


def _records() -> list[dict]:
    lines = RETRIEVAL_PATH.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.casefold().replace("ё", "е"))


def _distance(a: str, b: str) -> int:
    """Levenshtein distance (insert, delete, substitute)."""
    previous = list(range(len(b) + 1))
    for i, char_a in enumerate(a, start=1):
        current = [i]
        for j, char_b in enumerate(b, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (char_a != char_b)))
        previous = current
    return previous[-1]


def _near(word: str, vocabulary: set[str], limit: int) -> bool:
    return any(_distance(word, known) <= limit for known in vocabulary)


def _inflection(word: str, vocabulary: set[str]) -> bool:
    """Whether `word` differs from a known word only in its last two letters (хоккей/хоккею, минфина/минфин)."""
    for known in vocabulary:
        stem = max(len(word), len(known)) - 2
        if stem >= 3 and word[:stem] == known[:stem]:
            return True
    return False


def _misspelt_words(query: str, corpus_words: set[str], normal_words: set[str]) -> list[str]:
    """Words of `query` that are not normal words or inflections, yet are a slip away from a corpus word."""
    found = []
    for word in _words(query):
        if word in normal_words or word in corpus_words or _inflection(word, corpus_words):
            continue
        if len(word) >= 4 and _near(word, corpus_words, 2):
            found.append(word)  # a missing, extra, swapped or wrong letter
        elif word.isascii() and _near(word.translate(_LAYOUT), corpus_words, 1):
            found.append(word)  # typed with the wrong keyboard layout
    return found


def test_file_loads_with_enough_queries_of_every_kind():
    records = _records()
    assert len(load_queries(RETRIEVAL_PATH)) == len(records) >= MIN_QUERIES  # extra fields are ignored
    kinds = Counter(record["kind"] for record in records)
    assert set(kinds) == KINDS, kinds
    assert min(kinds.values()) >= MIN_PER_KIND, kinds
    assert query_kinds(RETRIEVAL_PATH) == {record["query"]: record["kind"] for record in records}


def test_relevant_ids_exist_and_every_document_is_wanted_somewhere():
    ids = {doc.id for doc in load_corpus()}
    wanted: set[int] = set()
    for record in _records():
        relevant = record["relevant"]
        assert relevant and len(set(relevant)) == len(relevant), record
        assert set(relevant) <= ids, record
        wanted |= set(relevant)
    assert wanted == ids, f"documents no query asks for: {sorted(ids - wanted)}"


def test_no_duplicate_queries_within_the_file_or_with_the_older_sets():
    mine = [record["query"].casefold() for record in _records()]
    duplicated = [query for query, n in Counter(mine).items() if n > 1]
    assert not duplicated
    older = {q.query.casefold() for q in load_queries(QUERIES_PATH) + load_queries(HELDOUT_PATH)}
    assert not set(mine) & older


def test_split_is_stratified_by_kind():
    per_kind: dict[str, Counter[str]] = {}
    for record in _records():
        assert record["split"] in SPLITS, record
        per_kind.setdefault(record["kind"], Counter())[record["split"]] += 1
    for kind, counts in per_kind.items():
        assert abs(counts["tune"] - counts["report"]) <= 1, (kind, counts)


def test_tune_and_report_partition_the_file():
    everything = load_queries(RETRIEVAL_PATH)
    tune = load_queries(RETRIEVAL_PATH, split="tune")
    report = load_queries(RETRIEVAL_PATH, split="report")
    assert tune and report
    assert not {q.query for q in tune} & {q.query for q in report}
    assert sorted(tune + report) == sorted(everything)


def test_typo_queries_really_contain_a_misspelling():
    records = _records()
    corpus_words = {word for doc in load_corpus() for word in _words(doc.text)}
    sound = [r["query"] for r in records if r["kind"] != "typo"]
    sound += [q.query for q in load_queries(QUERIES_PATH) + load_queries(HELDOUT_PATH)]
    normal_words = {word for query in sound for word in _words(query)}
    for record in records:
        if record["kind"] == "typo":
            assert _misspelt_words(record["query"], corpus_words, normal_words), record["query"]
    # The check is not vacuous: correctly spelt words, also inflections absent from the corpus, are no misspelling.
    for sound_query in ("цена золота", "хоккей", "облигации минфина", "медаль теннисистки", "курс рубля"):
        assert not _misspelt_words(sound_query, corpus_words, normal_words), sound_query
    assert _misspelt_words("цена залота", corpus_words, normal_words) == ["залота"]
    assert _misspelt_words("ufpghjv", corpus_words, normal_words) == ["ufpghjv"]  # "газпром"


def test_unknown_split_argument_is_a_value_error():
    with pytest.raises(ValueError, match="unknown split 'train'"):
        load_queries(RETRIEVAL_PATH, split="train")


@pytest.mark.parametrize(
    "line, message",
    [
        ('{"query": "x", "relevant": [1]}', "missing field 'split'"),
        ('{"query": "x", "relevant": [1], "split": "dev"}', "field 'split' must be one of tune, report"),
        ('{"query": "x", "relevant": [1], "split": 1}', "field 'split' must be str"),
    ],
)
def test_record_without_a_valid_split_names_file_and_line(tmp_path, line, message):
    path = tmp_path / "queries.jsonl"
    path.write_text('{"query": "ok", "relevant": [1], "split": "tune"}\n\n' + line + "\n", encoding="utf-8")
    assert [q.query for q in load_queries(path)] == ["ok", "x"]  # without a split the field is ignored
    with pytest.raises(DataError) as err:
        load_queries(path, split="tune")
    assert f"{path}:3" in str(err.value)
    assert message in str(err.value)


def test_seed_queries_have_no_split_and_say_so():
    with pytest.raises(DataError, match=re.escape(f"{QUERIES_PATH}:1: missing field 'split'")):
        load_queries(QUERIES_PATH, split="tune")


def test_a_split_with_no_queries_is_reported(tmp_path):
    path = tmp_path / "queries.jsonl"
    path.write_text('{"query": "ok", "relevant": [1], "split": "tune"}\n', encoding="utf-8")
    with pytest.raises(DataError, match="no queries with split 'report'"):
        load_queries(path, split="report")


def test_query_kinds_needs_a_kind_and_one_kind_per_query(tmp_path):
    path = tmp_path / "queries.jsonl"
    path.write_text('{"query": "a", "relevant": [1], "kind": "typo"}\n{"query": "b", "relevant": [1]}\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"queries.jsonl:2: missing field 'kind'"):
        query_kinds(path)
    path.write_text('{"query": "a", "relevant": [1], "kind": "typo"}\n{"query": "a", "relevant": [2], "kind": "entity"}\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"queries.jsonl:2: query 'a' listed again with kind 'entity'"):
        query_kinds(path)
