"""evaluate() and the eval CLI on the real stack, cross-checked against ranx."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import labkit as lk
from labkit.cli import main as cli_main

REPO = Path(__file__).resolve().parents[1]


def main(argv: list[str]) -> int:
    """The eval command, run in-process."""
    return cli_main(["eval", *argv])


@pytest.fixture(scope="module")
def report(settings, expansion):
    with lk.open_lab(settings) as lab:
        yield lk.evaluate(lab, lk.load_queries(), top_k=3)


@pytest.mark.services
def test_report_shape_and_ranges(report):
    assert report.modes == tuple(lk.SEARCH_MODES) and len(report.queries) == 12
    frame = report.to_frame()
    assert list(frame.columns) == ["recall@3", "mrr", "ndcg@3"] and list(frame.index) == list(lk.SEARCH_MODES)
    assert ((frame >= 0) & (frame <= 1)).all().all()
    per_query = report.per_query_frame()
    assert len(per_query) == 12 and set(lk.SEARCH_MODES) <= set(per_query.columns)


@pytest.mark.services
def test_means_match_the_metric_functions(report):
    for mode in report.modes:
        recalls = [lk.recall_at_k(q.rankings[mode], q.relevant, 3) for q in report.queries]
        assert report.means[mode]["recall"] == pytest.approx(sum(recalls) / len(recalls))


# ranx computes the reference values in a child with numba's compiler off: compiling its kernels
# takes about a minute on 2 cores, evaluating these few queries in plain Python a few seconds.
RANX = """
import json, sys
from ranx import Qrels, Run, evaluate
given = json.load(sys.stdin)
qrels = Qrels(given["qrels"])
print(json.dumps({mode: {name: float(value) for name, value in
                         evaluate(qrels, Run(run), ["recall@3", "mrr", "ndcg@3"]).items()}
                  for mode, run in given["runs"].items()}))
"""


@pytest.mark.services
def test_metrics_agree_with_ranx(report):
    qrels = {f"q{i}": {str(d): 1 for d in q.relevant} for i, q in enumerate(report.queries)}
    # ranx's recall divides by |relevant|, ours by min(k, |relevant|): equal when |relevant| <= k
    assert all(len(q.relevant) <= report.top_k for q in report.queries)
    runs = {mode: {f"q{i}": {str(d): float(len(q.rankings[mode]) - pos) for pos, d in enumerate(q.rankings[mode])}
                   or {"none": 0.0}
                   for i, q in enumerate(report.queries)}
            for mode in report.modes}
    done = subprocess.run([sys.executable, "-c", RANX], input=json.dumps({"qrels": qrels, "runs": runs}),
                          env={**os.environ, "NUMBA_DISABLE_JIT": "1"}, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    theirs = json.loads(done.stdout)
    assert set(theirs) == set(report.modes)
    for mode in report.modes:
        ours = report.means[mode]
        assert ours["recall"] == pytest.approx(theirs[mode]["recall@3"]), mode
        assert ours["mrr"] == pytest.approx(theirs[mode]["mrr"]), mode
        assert ours["ndcg"] == pytest.approx(theirs[mode]["ndcg@3"]), mode


@pytest.mark.services
def test_hybrid_is_rrf_of_the_branches_in_the_report(report):
    for q in report.queries:
        assert q.rankings["hybrid"] == lk.ids(lk.rrf([q.rankings["vector"], q.rankings["lexical"]]))[:10]


@pytest.mark.services
def test_cli_json(settings, expansion, capsys):
    assert main(["--json", "--k", "3"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["k"] == 3 and list(data["modes"]) == list(lk.SEARCH_MODES)
    assert set(data["modes"]["hybrid"]) == {"recall", "mrr", "ndcg"}
    first = data["queries"][0]
    assert set(first) == {"query", "relevant", *lk.SEARCH_MODES} and first["query"] == "золото цена"


@pytest.mark.services
def test_cli_table_and_mode_choice(settings, capsys):
    assert main(["--modes", "lexical,hybrid", "--k", "2"]) == 0
    out = capsys.readouterr().out
    assert "recall@2" in out and "lexical" in out and "vector" not in out


EXPANDED = {"expanded", "expanded_lexical", "hybrid_expanded"}


@pytest.fixture()
def other_chat_model(settings) -> dict[str, str]:
    """An environment whose chat model (the lab's second one) never wrote expansion questions in this database."""
    return dict(os.environ, CHAT_MODEL=settings.alt_chat_model)


def _eval(*argv: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "labkit", "eval", *argv], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.services
def test_without_questions_the_expanded_modes_are_reported_unavailable(settings, other_chat_model):
    """Not rows equal to the vector and lexical ones: the reason, and the command that writes the questions."""
    done = _eval("--json", "--modes", "vector,lexical,hybrid", env=other_chat_model)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["unavailable"] == {}  # only the modes asked for are compared

    done = _eval("--json", env=other_chat_model)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert set(data["unavailable"]) == EXPANDED and not EXPANDED & set(data["modes"])
    assert set(data["modes"]) == set(lk.SEARCH_MODES) - EXPANDED
    for why in data["unavailable"].values():
        assert settings.alt_chat_model in why and lk.EXPAND_COMMAND in why

    table = _eval(env=other_chat_model)
    assert table.returncode == 0 and lk.EXPAND_COMMAND in table.stdout
    assert all(f"(mode {mode} left out:" in table.stdout for mode in EXPANDED)

    named = _eval("--modes", "vector,hybrid_expanded", env=other_chat_model)
    assert named.returncode == 1 and named.stderr.count("\n") == 1, named.stderr
    assert "hybrid_expanded" in named.stderr and lk.EXPAND_COMMAND in named.stderr and "Traceback" not in named.stderr


@pytest.mark.services
def test_a_lab_without_questions_leaves_the_expanded_modes_out(settings):
    with lk.open_lab(dataclasses.replace(settings, chat_model=settings.alt_chat_model)) as lab:
        assert set(lk.unavailable_modes(lab)) == EXPANDED and set(lk.unavailable_modes()) == set()
        assert lk.documents_without_questions(lab) == (30, 30)
        note = lk.skipped_note(lab=lab)
        assert "«гибрид + вопросы» (`hybrid_expanded`)" in note and lk.EXPAND_COMMAND in note
        report = lk.evaluate(lab, lk.load_queries()[:2])
        assert set(report.unavailable) == EXPANDED and not EXPANDED & set(report.modes)
        with pytest.raises(lk.LabError, match="run.sh expand"):
            lk.evaluate(lab, lk.load_queries()[:2], ["expanded"])


def test_cli_bad_queries_file(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"query": "x", "relevant": [1]}\n{oops\n', encoding="utf-8")
    assert main(["--queries", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:2" in err and err.count("\n") == 1 and "Traceback" not in err
    assert main(["--queries", str(tmp_path / "missing.jsonl")]) == 2


def test_cli_bad_arguments_exit_2_with_one_line(capsys):
    for argv, needle in ((["--modes", "nope"], "unknown mode"), (["--k", "0"], "at least 1"),
                         (["--k", "x"], "invalid int value"), (["--no-such-flag"], "unrecognized")):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert needle in err and err.count("\n") == 1 and err.startswith("labkit eval: error:"), err


@pytest.mark.services
def test_python_m_labkit_eval(settings):
    """The CLI in a new process; `--top-k` is the long name of `--k`."""
    env = dict(os.environ)
    done = subprocess.run(
        [sys.executable, "-m", "labkit", "eval", "--json", "--modes", "lexical", "--top-k", "2"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert list(data["modes"]) == ["lexical"] and data["k"] == 2


@pytest.mark.services
def test_compare_hybrid_latency(lab_ro):
    latency = lk.compare_hybrid_latency(lab_ro, ["золото", "ставка на спорт"], repeats=3)
    assert latency.runs == 6 and latency.python_ms > 0 and latency.sql_ms > 0
    assert latency.ratio == pytest.approx(latency.sql_ms / latency.python_ms)
