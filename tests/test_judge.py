"""The judge re-ranker (taught in 17_kb_rerank): the chat model's P(yes) per passage, cached, over a ranking's head."""

from __future__ import annotations

import json
import math

import ollama
import pytest
from psycopg import sql

import labkit as lk
from labkit.core.corpus import DataError
from labkit.evaluation.rerank_cost import bench_pairs, measure_judge_cost
from labkit.models.relevance import (
    JUDGE_SYSTEM,
    MAX_PASSAGE_CHARS,
    PROMPT_MD5,
    JudgeUnavailable,
    judge_messages,
    yes_probability,
)
from labkit.retrieval.rerankers.judge import (
    Judge,
    corpus_text,
    judge_scores,
    load_shipped_scores,
    write_shipped_scores,
)
from labkit.services.modelserver.convert import RequestError, check_chat_request, to_openai_request
from labkit.services.modelserver.logprobs import TOP_LOGPROBS_ERROR, ollama_logprobs, openai_fields
from labkit.services.pgembedded import free_port
from labkit.store.scorecache import SCORE_STATS, ScoreKey, text_md5

SMALL = "qwen2.5-coder:0.5b"  # the cheaper judge: these tests check the mechanics, not the quality


# --- P(yes) from the first token's alternatives ------------------------------------------------------------------

def test_yes_probability_normalises_over_yes_and_no_in_any_case():
    assert yes_probability([("yes", math.log(0.6)), ("no", math.log(0.2))]) == pytest.approx(0.75)
    # « Yes» and «YES» are the same answer; their mass adds up
    assert yes_probability([(" Yes", math.log(0.3)), ("YES", math.log(0.3)), ("No", math.log(0.2))]) == pytest.approx(0.75)
    assert yes_probability([("maybe", -0.1), ("no", -1.0), ("yes", -1.0)]) == pytest.approx(0.5)


def test_a_word_missing_from_the_alternatives_gets_the_least_listed_probability():
    alternatives = [("yes", math.log(0.9)), ("Да", math.log(0.05)), ("!", math.log(0.01))]
    assert yes_probability(alternatives) == pytest.approx(0.9 / 0.91)
    assert yes_probability([("Hello", -0.3), ("Hey", -0.45)]) == 0.5
    with pytest.raises(ValueError, match="no alternatives"):
        yes_probability([])


def test_the_prompt_puts_the_query_before_the_passage_and_cuts_long_passages():
    system, user = judge_messages("как вернуть телевизор", "Порядок возврата " + "х" * 2 * MAX_PASSAGE_CHARS)
    assert system == {"role": "system", "content": JUDGE_SYSTEM} and user["role"] == "user"
    text = user["content"]
    assert text.index("<Query>: как вернуть телевизор") < text.index("<Document>: Порядок возврата")
    assert len(text.split("<Document>: ", 1)[1]) == MAX_PASSAGE_CHARS
    assert len(PROMPT_MD5) == 32


# --- the model server: Ollama's logprobs fields ------------------------------------------------------------------

def test_llama_cpp_logprobs_become_ollamas_shape():
    entries = [{"id": 1, "token": "Д", "bytes": [208, 148], "logprob": -0.1,
                "top_logprobs": [{"id": 1, "token": "Д", "bytes": [208, 148], "logprob": -0.1},
                                 {"id": 2, "token": "Н", "bytes": [208, 157], "logprob": -3.0}]},
               {"id": 3, "token": "", "bytes": [208], "logprob": -0.5, "top_logprobs": []},
               {"id": 4, "token": "", "bytes": [], "logprob": -0.7}]
    assert ollama_logprobs(entries, 1) == [
        {"token": "Д", "logprob": -0.1, "bytes": [208, 148], "top_logprobs": [{"token": "Д", "logprob": -0.1,
                                                                                "bytes": [208, 148]}]},
        {"token": "\ufffd", "logprob": -0.5, "bytes": [208]},  # half a letter: Go writes invalid UTF-8 as U+FFFD
        {"token": "", "logprob": -0.7},  # bytes omitted when empty (omitempty)
    ]
    assert all("top_logprobs" not in item for item in ollama_logprobs(entries, 0))


def test_top_logprobs_zero_still_asks_llama_cpp_for_one_alternative():
    assert openai_fields({"logprobs": True}) == {"logprobs": True, "top_logprobs": 1}
    assert openai_fields({"logprobs": True, "top_logprobs": 5}) == {"logprobs": True, "top_logprobs": 5}
    assert openai_fields({"top_logprobs": 5}) == {} and openai_fields({"logprobs": False}) == {}
    request = to_openai_request({"messages": [{"role": "user", "content": "x"}], "logprobs": True,
                                 "top_logprobs": 20}, 4096)
    assert request["logprobs"] is True and request["top_logprobs"] == 20


@pytest.mark.parametrize("value, message", [
    (21, TOP_LOGPROBS_ERROR), (-1, TOP_LOGPROBS_ERROR),
    (True, "cannot unmarshal bool into Go struct field ChatRequest.top_logprobs of type int"),
    (2.5, "cannot unmarshal number 2.5 into Go struct field ChatRequest.top_logprobs of type int"),
    (3.0, "cannot unmarshal number 3.0 into Go struct field ChatRequest.top_logprobs of type int"),
    ("3", "cannot unmarshal string into Go struct field ChatRequest.top_logprobs of type int"),
])
def test_bad_logprobs_fields_are_refused_in_ollamas_words(value, message):
    with pytest.raises(RequestError) as caught:
        check_chat_request({"model": "m", "messages": [], "logprobs": True, "top_logprobs": value})
    assert str(caught.value).endswith(message)
    with pytest.raises(RequestError, match="ChatRequest.logprobs of type bool"):
        check_chat_request({"model": "m", "logprobs": "yes"})
    check_chat_request({"model": "m", "logprobs": True, "top_logprobs": 20})


# --- shipped scores, the step's name, the bench's pairs ----------------------------------------------------------

def test_shipped_scores_load_and_a_bad_line_names_its_place(tmp_path):
    good = {"model": "m", "prompt_md5": "p", "query_md5": "q", "text_md5": "t", "score": 0.25, "query": "for people"}
    path = tmp_path / "scores.jsonl"
    path.write_text(json.dumps(good) + "\n", encoding="utf-8")
    assert load_shipped_scores(path) == {ScoreKey("m", "p", "q", "t"): 0.25}
    path.write_text(json.dumps(good) + "\n" + json.dumps(dict(good, score=1.5)) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"scores.jsonl:2: expected"):
        load_shipped_scores(path)
    assert load_shipped_scores(tmp_path / "none.jsonl") == {}


def test_the_shipped_file_is_valid_and_keyed_by_the_current_prompt():
    shipped = load_shipped_scores()
    assert shipped and all(0.0 <= score <= 1.0 for score in shipped.values())
    assert {key.prompt_md5 for key in shipped} == {PROMPT_MD5}, "regenerate the file after changing the prompt"


def test_the_step_prints_like_the_lesson_and_refuses_an_empty_head():
    assert str(lk.judged(lk.SEARCH_MODES["hybrid"])) == "vector + lexical → RRF(k=60) → judge@20"
    assert str(lk.judged("bm25", 10, SMALL)) == f"bm25 → judge({SMALL})@10"
    assert str(Judge(5, text=lambda lab: corpus_text(lab))).endswith("judge@5[<lambda>]")
    with pytest.raises(ValueError, match="depth"):
        lk.judged("bm25", 0)


def test_bench_pairs_alternate_a_relevant_and_an_irrelevant_passage_of_tune_queries():
    pairs = bench_pairs(6, 500)
    assert [p.relevant for p in pairs] == [True, False] * 3
    assert all(p.query == q.query for p, q in zip(pairs[::2], pairs[1::2]))
    assert all(300 <= len(p.passage) <= 500 for p in pairs)
    tune = {json.loads(line)["query"] for line in (lk.DATA_DIR / "kb" / "queries.jsonl").read_text().splitlines()
            if json.loads(line)["split"] == "tune"}
    assert {p.query for p in pairs} <= tune


# --- on the running stack: real Postgres, the real model server ---------------------------------------------------

def _forget(lab: lk.Lab, query: str) -> None:
    lab.conn.execute("DELETE FROM relevance_cache WHERE query_md5 = %s", (text_md5(query),))


@pytest.mark.services
def test_the_head_is_reordered_by_p_yes_and_a_rerun_asks_the_model_nothing(lab):
    query = "золото дорожает"  # in no labelled set, so no score of it ships
    _forget(lab, query)
    hits = lk.SEARCH_MODES["hybrid"](lab, query, 6)
    before = SCORE_STATS.computed
    reranked = lk.rerank_by_judge(lab, query, hits, depth=3, model=SMALL)
    assert SCORE_STATS.computed - before == 3
    assert sorted(lk.ids(reranked[:3])) == sorted(lk.ids(hits[:3])) and lk.ids(reranked[3:]) == lk.ids(hits[3:])
    scores = [h.score for h in reranked[:3]]
    assert scores == sorted(scores, reverse=True) and all(0.0 < s < 1.0 for s in scores)
    assert all(h.score == 0.0 for h in reranked[3:])
    again = lk.judged(lk.SEARCH_MODES["hybrid"], 3, SMALL)(lab, query, 6)
    assert again == reranked and SCORE_STATS.computed - before == 3, "every score came from the cache"


@pytest.mark.services
def test_shipped_scores_cost_no_model_call(lab, tmp_path):
    query = "тестовый запрос для присланных оценок"
    _forget(lab, query)
    statement = sql.SQL("SELECT id, {text} FROM {table} WHERE id IN (1, 2)").format(
        text=sql.Identifier(lab.corpus.text_column), table=sql.Identifier(lab.corpus.table))
    texts = dict(lab.conn.execute(statement).fetchall())
    shipped = {ScoreKey(SMALL, PROMPT_MD5, text_md5(query), text_md5(texts[i])): score for i, score in ((1, 0.2), (2, 0.9))}

    def no_call(**_: object) -> None:
        raise AssertionError("the model was asked for a shipped score")

    assert judge_scores(lab, query, [1, 2, 99999], SMALL, send=no_call, shipped=shipped) == {1: 0.2, 2: 0.9, 99999: 0.0}
    assert judge_scores(lab, query, [2, 1], SMALL, send=no_call, shipped={}) == {2: 0.9, 1: 0.2}, "now in the cache"
    # the shipped file is written from the cache: the same keys and scores come back from it
    path = tmp_path / "scores.jsonl"
    assert write_shipped_scores(lab, [query, "a query never judged"], [SMALL], path) == 2
    assert load_shipped_scores(path) == shipped
    # a second query's scores are added to the file; the first query's lines stay
    other = "второй тестовый запрос для присланных оценок"
    _forget(lab, other)
    judge_scores(lab, other, [1], SMALL, shipped={ScoreKey(SMALL, PROMPT_MD5, text_md5(other), text_md5(texts[1])): 0.5})
    assert write_shipped_scores(lab, [other], [SMALL], path) == 3
    assert load_shipped_scores(path) == {**shipped, ScoreKey(SMALL, PROMPT_MD5, text_md5(other), text_md5(texts[1])): 0.5}


@pytest.mark.services
def test_a_model_server_that_is_down_is_one_readable_error(lab):
    query = "запрос к выключенному серверу"
    _forget(lab, query)
    down = ollama.Client(host=f"http://127.0.0.1:{free_port()}", timeout=5).chat  # a real client, nobody listening
    with pytest.raises(JudgeUnavailable, match=r"Сервер моделей не ответил.*\./run\.sh status") as caught:
        judge_scores(lab, query, [1], SMALL, send=down, shipped={})
    assert isinstance(caught.value, lk.LabError)


@pytest.mark.services
def test_the_bench_prices_each_depth_from_the_measured_pair(lab):
    result = measure_judge_cost(lab, [SMALL], bench_pairs(2, 200), depths=(1, 4))
    model = result["models"][SMALL]
    assert result["pairs"] == 2 and model["seconds_per_pair"] > 0 and model["compared"] == 1
    assert model["cost_s"]["4"] == pytest.approx(4 * model["seconds_per_pair"])
    assert model["times_first_stage"]["4"] == pytest.approx(4 * model["seconds_per_pair"] * 1000 / result["first_stage_ms"])
    assert model["passage_tokens"] > 20 and result["cached_ms"] >= 0
    assert lab.conn.execute("SELECT count(*) FROM relevance_cache WHERE prompt_md5 LIKE 'bench-%'").fetchone()[0] == 0


@pytest.mark.services
def test_the_labelled_queries_heads_are_shipped(lab):
    """The course's measurements on the news corpus cost no model call, even with an empty cache."""
    queries = [q.query for q in lk.load_queries(lk.RETRIEVAL_PATH, split="report")[:3]]
    for query in queries:
        _forget(lab, query)
    before = SCORE_STATS.computed
    for model in ("qwen2.5-coder:1.5b", SMALL):
        for query in queries:
            lk.judged(lk.SEARCH_MODES["hybrid"], 10, model)(lab, query, 10)
    assert SCORE_STATS.computed == before


@pytest.mark.services
def test_the_shipped_knowledge_base_scores_cover_the_heads_lesson_17_and_the_capstone_judge(settings):
    """17_kb_rerank and 30_capstone judge the best KB mode's first ten chunks on every report query: a fresh clone
    must find each pair's score in the file, or those notebooks ask the model for seconds per pair."""
    shipped = load_shipped_scores(lk.KB_SHIPPED_SCORES)
    with lk.open_lab(settings, corpus=lk.KB) as kb:
        statement, params = corpus_text(kb)
        texts = {int(i): str(t) for i, t in kb.conn.execute(statement, params)}
        missing = []
        for query in lk.load_queries(lk.KB.retrieval, split="report"):
            for chunk in lk.ids(lk.HYBRID_CODES_ALIASES_FINER(kb, query.query, 50))[:10]:
                key = ScoreKey(kb.chat_model, PROMPT_MD5, text_md5(query.query), text_md5(texts[chunk]))
                if key not in shipped:
                    missing.append((query.query, chunk))
    assert not missing, f"{len(missing)} pairs without a shipped score, e.g. {missing[:3]}: fill the cache and run " \
                        "write_shipped_scores (labkit.retrieval.rerankers.judge)"
