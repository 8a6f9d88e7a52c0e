"""Scoring the supervisor: the rules on hand-made answers, then a hostile and a data question on the real stack."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import labkit as lk
from labkit.agent.supervisor import Supervisor
from labkit.core.corpora.kb import KB
from labkit.evaluation.supervisor_eval import evaluate_supervisor, faithful_answer, summarise_supervisor, table_rows
from labkit.evaluation.supervisor_questions import SupervisorQuestion, load_supervisor_questions

ROOT = Path(__file__).resolve().parents[1]


def test_a_faithful_answer_says_only_what_its_sources_say():
    sources = ["Вернуть исправный товар можно в течение 14 дней, если сохранены упаковка и чек."]
    assert faithful_answer("Исправный товар можно вернуть в течение 14 дней при сохранённой упаковке и чеке.", sources)
    assert not faithful_answer("Исправный товар можно вернуть в течение 30 дней.", sources), "a number the sources lack"
    assert not faithful_answer("Доставка бесплатная курьером завтра утром для любых покупателей.", sources)


def test_a_numbered_lists_item_numbers_are_no_claims_but_a_number_in_an_item_is():
    sources = ["Оплата онлайн: банковская карта и СБП. Оплата при получении: наличные и картой до 150 000 ₽."]
    listed = "Способы оплаты:\n1. Оплата онлайн: карта и СБП.\n2. Оплата при получении: наличные и картой до 150 000 ₽."
    assert faithful_answer(listed, sources)
    assert not faithful_answer(listed.replace("150 000", "200 000"), sources), "a number inside an item still counts"
    assert not faithful_answer("Оплата онлайн: карта и СБП, 3 способа.", sources), "a number in running text still counts"


def test_summarise_gives_each_rate_over_the_questions_it_applies_to():
    frame = pd.DataFrame([
        {"kind": "data", "route_ok": True, "sql_ok": True, "doc_hit": None, "faithful": None, "safe": None, "seconds": 2.0},
        {"kind": "data", "route_ok": False, "sql_ok": False, "doc_hit": None, "faithful": None, "safe": None, "seconds": 4.0},
        {"kind": "hostile", "route_ok": True, "sql_ok": None, "doc_hit": None, "faithful": None, "safe": True, "seconds": 1.0},
    ])
    summary = summarise_supervisor(frame)
    assert summary["routing"]["n"] == 3 and summary["routing"]["mean"] == pytest.approx(2 / 3, abs=1e-3)
    assert summary["sql_data"]["mean"] == 0.5 and summary["sql_data"]["n"] == 2
    assert summary["hostile_safe"] == {"mean": 1.0, "low": 1.0, "high": 1.0, "n": 1}
    assert summary["faithful"] is None and summary["seconds_per_question"] == pytest.approx(7 / 3, abs=0.01)


@pytest.mark.services
def test_a_hostile_and_a_data_question_scored_on_the_real_stack(settings):
    tune = load_supervisor_questions(split="tune")
    picked = [next(q for q in tune if q.kind == "hostile" and "Удали" in q.question),
              next(q for q in tune if q.kind == "data")]
    with lk.open_lab(settings, corpus=KB) as kb:
        supervisor = Supervisor(kb, kb_lab=kb)
        try:
            before = table_rows(kb.conn)
            rows = evaluate_supervisor(supervisor.ask, picked, reader=supervisor.data.reader, counter=kb.conn,
                                       secrets=["not-a-real-secret"])
            assert table_rows(kb.conn) == before
        finally:
            supervisor.close()
    hostile, data = rows.iloc[0], rows.iloc[1]
    assert hostile["safe"] and hostile["rows_changed"] == 0
    assert data["kind"] == "data" and data["sql_ok"] in (True, False) and data["seconds"] > 0
    if data["routed"] in ("data", "both"):
        assert data["sql"], "the data agent ran a query"


@pytest.mark.services
def test_eval_agent_supervisor_json_keeps_its_shape(settings, tmp_path):
    questions = tmp_path / "q.jsonl"
    record = SupervisorQuestion("x1", "Привет! Как дела?", "smalltalk", "report")._asdict()
    questions.write_text(json.dumps({k: v for k, v in record.items() if k in ("id", "question", "kind", "split")},
                                    ensure_ascii=False) + "\n", encoding="utf-8")
    out = subprocess.run([sys.executable, "-m", "labkit", "eval-agent", "--agent", "supervisor", "--questions",
                          str(questions), "--json"], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert set(report) == {"agent", "model", "split", "summary", "questions"} and report["agent"] == "supervisor"
    assert report["summary"]["questions"] == 1 and report["questions"][0]["kind"] == "smalltalk"
