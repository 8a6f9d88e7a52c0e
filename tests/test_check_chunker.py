"""Exercise 18's checker: the reference passes every case, each typical mistake gets its own hint."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from labkit.course.checks.cases import run_cases
from labkit.course.checks.chunker import EXERCISE, ChunkerContext, coverage_sweep

TOKEN = re.compile(r"\w+|[^\w\s]")


def right_spans(text, size, overlap):
    if size < 1 or not 0 <= overlap < size:
        raise ValueError("bad size or overlap")
    tokens = [m.span() for m in TOKEN.finditer(text)]
    windows = []
    for first in range(0, len(tokens), size - overlap):
        last = min(first + size, len(tokens)) - 1
        windows.append((tokens[first][0], tokens[last][1]))
        if last == len(tokens) - 1:
            break
    return windows


def no_stop(text, size, overlap):  # windows go on to the end of the token list
    tokens = [m.span() for m in TOKEN.finditer(text)]
    return [(tokens[f][0], tokens[min(f + size, len(tokens)) - 1][1]) for f in range(0, len(tokens), size - overlap)]


def split_words(text, size, overlap):  # whitespace words instead of tokens
    if size < 1 or not 0 <= overlap < size:
        raise ValueError("bad")
    words = [m.span() for m in re.finditer(r"\S+", text)]
    out = []
    for first in range(0, len(words), size - overlap):
        last = min(first + size, len(words)) - 1
        out.append((words[first][0], words[last][1]))
        if last == len(words) - 1:
            break
    return out


def silent(text, size, overlap):  # bad arguments give no chunks instead of an error
    return right_spans(text, size, overlap) if size >= 1 and 0 <= overlap < size else []


def right_collapse(chunks, parent_of):
    seen, out = set(), []
    for chunk in chunks:
        doc = parent_of.get(chunk)
        if doc is not None and doc not in seen:
            seen.add(doc)
            out.append(doc)
    return out


def sorted_collapse(chunks, parent_of):
    return sorted({parent_of[c] for c in chunks if c in parent_of})


SIZES, OVERLAPS = (60, 200), (0, 20)


@pytest.fixture(scope="module")
def context():
    return ChunkerContext(coverage_sweep(right_spans, SIZES, OVERLAPS), seed=7)


def verdicts(spans, collapse, sweep, context):
    answers = EXERCISE.collect({"chunk_spans": spans, "collapse_ranking": collapse, "sweep": sweep}, context.seed)
    return {case.name: case.problems for case in run_cases(EXERCISE.cases, answers, context, hidden=True)}


def test_the_reference_earns_every_point(context):
    sweep = coverage_sweep(right_spans, SIZES, OVERLAPS)
    assert all(not problems for problems in verdicts(right_spans, right_collapse, sweep, context).values())
    assert EXERCISE.max_points == 10 and EXERCISE.hidden_points == 3


def test_each_mistake_is_named(context):
    sweep = coverage_sweep(no_stop, SIZES, OVERLAPS)
    got = verdicts(no_stop, sorted_collapse, sweep, context)
    fixed = " ".join(got["chunk_spans на готовых примерах и отказ на неверных size/overlap"])
    assert "лишние фрагменты в конце" in fixed
    assert any("по лучшему (первому)" in p for p in got["collapse_ranking на готовых примерах"])
    assert got["таблица sweep: фрагменты и доля целых ответов для каждого size × overlap"], "more chunks than the reference"
    quiet = verdicts(silent, right_collapse, None, context)
    assert any("ValueError" in p for p in quiet["chunk_spans на готовых примерах и отказ на неверных size/overlap"])
    words = verdicts(split_words, right_collapse, None, context)
    assert any("знаки препинания" in p for p in words["chunk_spans на готовых примерах и отказ на неверных size/overlap"])
    assert any("не заполнена" in p for p in words["таблица sweep: фрагменты и доля целых ответов для каждого size × overlap"])


def test_unfilled_and_broken_answers_get_a_sentence_not_a_traceback(context):
    def broken(*_args):
        raise KeyError("oops")

    got = verdicts(lambda *a: None, broken, pd.DataFrame({"size": [60]}), context)
    text = " ".join(p for problems in got.values() for p in problems)
    assert "возвращает None" in text and "упала: KeyError" in text and "нет столбцов" in text


def test_overlap_keeps_answers_whole_at_a_price():
    sweep = coverage_sweep(right_spans, (120,), (0, 40)).set_index("overlap")
    assert sweep.loc[40, "coverage"] > sweep.loc[0, "coverage"] and sweep.loc[40, "chunks"] > sweep.loc[0, "chunks"]
