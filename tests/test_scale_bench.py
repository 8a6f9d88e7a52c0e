"""./run.sh bench, and the scale experiment's lock (real Postgres).

Apart from test_scale.py on purpose: its module fixture keeps a session that holds the scale lock,
and a bench in the same module would wait for it.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from labkit.cli import main as cli_main
from labkit.evaluation import scale, synthetic
from labkit.evaluation.scalebench import REAL_BUILDS
from labkit.store.connection import connect
from labkit.store.locks import SCALE_LOCK, LockBusy, hold_session_lock


@pytest.mark.services
def test_bench_prints_json(settings, capsys):
    assert cli_main(["bench", "--size", "1000", "--queries", "5", "--builds", "8:32,16:64", "--kb-documents", "16",
                     "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert [p["ef_search"] for p in result["ef_search"]] == list(scale.EF_SEARCH_VALUES)  # the keys of earlier benches
    assert result["data"] == "noisy" and result["filtered"]["rows_with_relaxed_order"] == 10
    assert list(result["sets"]) == list(synthetic.SYNTHETIC)
    for entry in result["sets"].values():  # each build once a float32 graph, then once a halfvec one
        assert [(b["m"], b["ef_construction"], b["storage"]) for b in entry["builds"]] == [
            (8, 32, "vector"), (16, 64, "vector"), (8, 32, "halfvec"), (16, 64, "halfvec")]
        assert all(b["index_mb"] > 0 for b in entry["builds"])
        assert entry["choice"] is None or entry["choice"]["storage"] in scale.STORAGES  # at 1000 rows no index is 10x
        assert all(p["speedup"] == pytest.approx(p["exact_ms"] / p["hnsw_ms"]) for b in entry["builds"]
                   for p in b["ef_search"])
    assert list(result["structure"]) == ["real", *synthetic.SYNTHETIC]
    real = result["structure"]["real"]
    assert real["rows"] > 100 and 1 < real["twonn"] < 384 and real["query_d1"] > 0
    assert [(b["m"], b["ef_construction"]) for b in result["real"]["builds"]] == [tuple(p) for p in REAL_BUILDS]
    assert "sql_over_python" in result["hybrid_latency"], result["hybrid_latency"]


@pytest.mark.services
def test_bench_prints_ratios(settings, capsys):
    assert cli_main(["bench", "--size", "500", "--queries", "3", "--data", "realistic", "--builds", "4:16",
                     "--kb-documents", "0"]) == 0
    out = capsys.readouterr().out
    assert "realistic: 500 vectors" in out and "speed-up" in out and "structure" not in out
    assert "4, ef_construction=16, vector (index" in out and "halfvec (index" in out


@pytest.mark.services
def test_bench_of_halfvec_graphs_alone_has_no_filter_line(settings, capsys):
    """The filter is measured on a float32 graph: without one the bench says nothing of it, and does not fail."""
    assert cli_main(["bench", "--size", "300", "--queries", "2", "--data", "noisy", "--builds", "4:16",
                     "--kb-documents", "0", "--storage", "halfvec", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["filtered"] is None and [b["storage"] for b in result["sets"]["noisy"]["builds"]] == ["halfvec"]



@pytest.mark.services
def test_a_second_session_waits_for_the_scale_experiment_instead_of_replacing_its_table(settings):
    vectors, topics = synthetic.make_vectors(200, seed=3)
    with connect(settings) as first, connect(settings) as second:
        scale.load_vectors(first, vectors, topics)
        scale.load_vectors(first, vectors, topics)  # the holder may reload as often as it likes
        with pytest.raises(LockBusy, match=rf"scale experiment.*held by pid {first.info.backend_pid} "):
            hold_session_lock(second, SCALE_LOCK, wait_seconds=0.3)
        count = first.execute("SELECT count(*) FROM scale_vectors").fetchone()[0]
        assert count == 200, "the first session's table is untouched"
    with connect(settings) as third:  # the holder disconnected: the lock went with it
        scale.load_vectors(third, np.asarray(vectors[:50]), topics[:50])
