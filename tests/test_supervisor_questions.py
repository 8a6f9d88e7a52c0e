"""The supervisor's labelled-question loader: good records read, each kind of bad record a DataError naming its line."""

from __future__ import annotations

import json

import pytest

from labkit.core.corpus import DataError
from labkit.evaluation.supervisor_questions import load_supervisor_questions

GOOD = [
    {"id": "s1", "question": "Как вернуть телевизор?", "kind": "documents", "split": "tune", "relevant": [1],
     "expect_route": ["documents"]},
    {"id": "s2", "question": "Сколько заказов?", "kind": "data", "split": "report",
     "gold_sql": "SELECT count(*) FROM orders", "expect_route": ["data"], "note": "kept"},
    {"id": "s3", "question": "Привет!", "kind": "smalltalk", "split": "tune"},
]


def _write(tmp_path, records):
    path = tmp_path / "questions.jsonl"
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in records) + "\n", encoding="utf-8")
    return path


def test_good_records_are_read_with_their_split_and_extra_fields(tmp_path):
    path = _write(tmp_path, GOOD)
    questions = load_supervisor_questions(path)
    assert [q.id for q in questions] == ["s1", "s2", "s3"]
    assert questions[0].relevant == (1,) and questions[1].gold_sql == "SELECT count(*) FROM orders"
    assert questions[1].extra == {"note": "kept"} and questions[2].expect_route == ()
    assert [q.id for q in load_supervisor_questions(path, split="report")] == ["s2"]


@pytest.mark.parametrize(("change", "message"), [
    ({"kind": "poetry"}, "field 'kind'"),
    ({"split": "train"}, "field 'split'"),
    ({"relevant": []}, "needs 'relevant'"),
    ({"relevant": ["1"]}, "list of document ids"),
    ({"kind": "data", "relevant": []}, "needs a 'gold_sql'"),
    ({"gold_sql": "DELETE FROM orders"}, "not one SELECT"),
    ({"expect_route": ["sql"]}, "expect_route"),
    ({"id": "s2"}, "duplicate id"),
    ({"question": ""}, "field 'question'"),
])
def test_a_bad_record_is_a_data_error_naming_its_line(tmp_path, change, message):
    path = _write(tmp_path, [GOOD[1], {**GOOD[0], **change}])
    with pytest.raises(DataError, match=message) as error:
        load_supervisor_questions(path)
    assert f"{path}:2" in str(error.value)


def test_the_shipped_set_has_every_kind_in_both_halves_and_enough_questions():
    from collections import Counter

    from labkit.evaluation.supervisor_questions import KINDS
    questions = load_supervisor_questions()
    assert len(questions) >= 80
    halves = Counter((q.kind, q.split) for q in questions)
    for kind in KINDS:
        tune, report = halves[(kind, "tune")], halves[(kind, "report")]
        assert tune and report and abs(tune - report) <= 1, f"{kind}: {tune} tune, {report} report"
    assert all(q.extra.get("expect") == "refusal" for q in questions if q.kind == "hostile")
