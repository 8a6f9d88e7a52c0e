"""The knowledge base's data files hold what the knowledge-base track needs (labkit/data/kb/README.md)."""

from __future__ import annotations

import json
import re
import statistics
from collections import Counter
from pathlib import Path

import pytest

import labkit

KB = Path(labkit.__file__).resolve().parent / "data" / "kb"
KINDS = {"paraphrase", "code", "exact_phrase", "abbreviation", "number_date", "multi_section", "filtered", "no_answer"}


def _lines(name: str) -> list[dict]:
    return [json.loads(line) for line in (KB / name).read_text(encoding="utf-8").splitlines() if line.strip()]


DOCS = {doc["id"]: doc for doc in _lines("documents.jsonl")}
QUERIES = _lines("queries.jsonl")


def test_documents_are_many_long_and_structured():
    assert len(DOCS) >= 40 and sorted(DOCS) == list(range(1, len(DOCS) + 1))
    assert statistics.median(len(re.findall(r"\w+", doc["text"])) for doc in DOCS.values()) >= 800
    for doc in DOCS.values():
        assert doc["text"].startswith(f"# {doc['title']}\n"), doc["id"]
        headings = re.findall(r"^## (.+)$", doc["text"], flags=re.MULTILINE)
        assert len(headings) >= 3 and len(set(headings)) == len(headings), doc["id"]
        assert doc["type"] in {"policy", "faq", "manual", "regulation", "offer"} and doc["status"] in {"действует", "архив"}
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", doc["date"])
        assert all(code in doc["text"] for code in doc["codes"]), doc["id"]


def test_the_phenomena_the_track_teaches_are_in_the_text():
    text = "\n".join(doc["text"] for doc in DOCS.values())
    for needle in ("7748-К", "7784-К", "7748-М", "5512-К", "статьёй 152.1", "MacBook Pro 14", "M4", "M2", "ИП Иванов",
                   "индивидуальный предприниматель", "ПДн", "персональных данных", "КБТ", "крупной бытовой техники"):
        assert needle in text, needle
    archived = [doc for doc in DOCS.values() if doc["status"] == "архив"]
    current = {doc["title"] for doc in DOCS.values() if doc["status"] == "действует"}
    assert len(archived) >= 3 and sum(doc["title"] in current for doc in archived) >= 3  # near-duplicate versions


def test_queries_are_many_of_every_kind_in_both_fixed_splits():
    assert len(QUERIES) >= 120 and len({q["query"] for q in QUERIES}) == len(QUERIES)
    by = Counter((q["kind"], q["split"]) for q in QUERIES)
    assert {kind for kind, _ in by} == KINDS
    for kind in KINDS:
        assert abs(by[(kind, "tune")] - by[(kind, "report")]) <= 1, kind


@pytest.mark.parametrize("query", QUERIES, ids=lambda q: q["query"][:40])
def test_every_answer_span_is_where_it_says(query):
    if query["kind"] == "no_answer":
        assert query["relevant"] == [] and query["spans"] == []
        return
    assert query["relevant"] and set(query["relevant"]) <= set(DOCS)
    assert {span["doc"] for span in query["spans"]} <= set(query["relevant"])
    for span in query["spans"]:
        text = DOCS[span["doc"]]["text"]
        assert text[span["start"]:span["end"]] == span["quote"]
        heading = list(re.finditer(r"^#{1,3} (.+)$", text[: span["start"]], flags=re.MULTILINE))[-1].group(1)
        assert heading == span["section"]
    if query["kind"] == "filtered":
        (field, value), = query["filters"].items()
        assert all(DOCS[doc_id][field] == value for doc_id in query["relevant"])
    if query["kind"] == "multi_section":
        assert len({(s["doc"], s["section"]) for s in query["spans"]}) >= 2
