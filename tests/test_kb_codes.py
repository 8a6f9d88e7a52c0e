"""The knowledge base's exact codes, abbreviations, filters and iterative scans, on real Postgres (16_kb_codes)."""

from __future__ import annotations

import dataclasses
import json
import random

import pytest
from psycopg import sql
from test_fuzz import EDGE_CASES, STRINGS

import labkit as lk
from labkit.agent.supervisor.documents import SEARCH, TOP_CHUNKS
from labkit.agent.supervisor.split import split_both
from labkit.cli import main as cli_main
from labkit.core.corpora.kb import KB
from labkit.evaluation.supervisor_questions import load_supervisor_questions
from labkit.retrieval.branches.codes import code_index_name
from labkit.retrieval.branches.vector import vector_sql
from labkit.store.vectors import lab_vector_table

pytestmark = pytest.mark.services


@pytest.fixture(scope="module")
def kb(settings):
    with lk.open_lab(settings, corpus=KB) as lab:
        yield lab


def _keys_of(lab, chunk_id):
    row = lab.conn.execute(sql.SQL("SELECT {}(body || ' ' || coalesce(codes, '')) FROM kb_chunks WHERE id = %s").format(
        sql.Identifier(lk.CODE_KEYS_FUNCTION)), (chunk_id,)).fetchone()
    return set(row[0])


def test_the_russian_parser_splits_a_code_and_drops_its_letter(kb):
    tokens = kb.conn.execute("SELECT token, lexemes FROM ts_debug('russian', '7748-К') WHERE alias <> 'blank'").fetchall()
    assert tokens == [("7748", ["7748"]), ("К", [])], "«к» is a Russian stop word: 7748-К and 7748-М look alike"


@pytest.mark.parametrize(("text", "keys"), [
    ("артикул 7748-К", ["7748к"]),
    ("артикул 7748-K", ["7748к"]),  # the Latin K reads as the Cyrillic one
    ("7748‑К и 7748К", ["7748к", "7748к"]),  # a non-breaking hyphen, no hyphen
    ("статья 152.1 ГК РФ", ["152.1"]),
    ("MacBook Pro 14 M4", ["14", "м4"]),
    ("рассрочка 0-0-6", ["006"]),
    ("как вернуть телевизор", []),
    ("5 дней", []),  # one character is no key
])
def test_code_keys(kb, text, keys):
    assert lk.code_keys(kb, text) == keys


def test_the_code_branch_finds_the_exact_code_and_not_its_neighbours(kb):
    for query, key, neighbour in [("артикул 7748-К", "7748к", "7784к"), ("7748-М обменять можно?", "7748м", "7748к"),
                                  ("5512-К", "5512к", "7748к")]:
        hits = lk.search_codes(kb, query, 20)
        assert hits and all(key in _keys_of(kb, hit.doc_id) for hit in hits), query
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
        assert not any(neighbour in _keys_of(kb, hit.doc_id) and key not in _keys_of(kb, hit.doc_id) for hit in hits)
    assert lk.search_codes(kb, "как вернуть телевизор", 10) == [] and lk.search_codes(kb, "7748-К", 0) == []


def test_the_code_keys_are_served_by_their_expression_index(kb):
    lk.ensure_code_index(kb)
    assert not lk.ensure_code_index(kb), "made once"
    statement = lk.codes_sql(KB).as_string(kb.conn)
    with kb.conn.transaction(force_rollback=True):
        kb.conn.execute("SET LOCAL enable_seqscan = off")
        plan = "\n".join(row[0] for row in kb.conn.execute(
            "EXPLAIN " + statement, {"keys": ["7748к"], "k1": 1.2, "limit": 5, "within": None}))
    assert f"Bitmap Index Scan on {code_index_name(KB)}" in plan


def test_the_code_branch_needs_a_codes_field(lab_ro):
    with pytest.raises(ValueError, match="has no text field 'codes'"):
        lk.search_codes(lab_ro, "7748-К", 5)
    with pytest.raises(lk.LabError, match="cannot run here: the corpus 'news' has no text field 'codes'"):
        lk.evaluate(lab_ro, lk.load_queries()[:1], ["hybrid_codes"])


def test_any_string_through_the_code_branch_and_the_abbreviations(kb):
    for text in STRINGS:
        try:
            hits = lk.search_codes(kb, text, 5)
            expansion = lk.expand_aliases(kb, text)
        except Exception as exc:  # noqa: BLE001 (report which string broke what)
            pytest.fail(f"{type(exc).__name__}: {exc} on {text[:80]!r}")
        assert len(hits) <= 5 and expansion.typed == text and expansion.searched.startswith(text)


def test_any_string_through_the_knowledge_base_modes_and_a_filter(kb):
    rng = random.Random(16)
    short = [s for s in STRINGS[len(EDGE_CASES):] if len(s) <= 60]
    strings = EDGE_CASES + rng.sample(short, 40) + ["7748-К", "ИП Иванов", "ЗоЗПП ст. 25"]
    lk.cached_embeddings(kb, [lk.embeddable(s) for s in strings if lk.embeddable(s).strip()], "query")
    filtered = lk.HYBRID_CODES_ALIASES.where(lk.Filters.of(type="manual"))
    finer_filtered = lk.HYBRID_CODES_ALIASES_FINER.where(lk.Filters.of(type="manual"))
    for text in strings:
        for name, mode in [*lk.KB_MODES.items(), ("filtered", filtered), ("finer, filtered", finer_filtered)]:
            try:
                hits = mode(kb, text, 5)
            except Exception as exc:  # noqa: BLE001
                pytest.fail(f"{name} raised {type(exc).__name__}: {exc} on {text[:80]!r}")
            assert len(hits) <= 5


def test_the_finer_branch_ranks_the_labs_own_chunks_by_their_best_finer_piece(kb):
    query = "наушники не видят второй наушник"
    hits = lk.search_finer(kb, query, 8)
    chunks = {row[0]: row[1:] for row in kb.conn.execute("SELECT id, doc, span_start, span_end FROM kb_chunks")}
    assert len(hits) == 8 and len({hit.doc_id for hit in hits}) == 8 and {hit.doc_id for hit in hits} <= set(chunks)
    assert [hit.score for hit in hits] == sorted((hit.score for hit in hits), reverse=True)
    fine = lk.finer_lab(kb)  # the finer cut: its own table of pieces, its own vectors
    assert fine.corpus is lk.KB_FINE and fine.loaded is not None and fine.loaded.table != kb.loaded.table
    top = lk.search_vector(fine, query, 1)[0]  # the best piece overall gives the first chunk its score
    doc, start, end = kb.conn.execute("SELECT doc, span_start, span_end FROM kb_fine_chunks WHERE id = %s",
                                      (top.doc_id,)).fetchone()
    first = chunks[hits[0].doc_id]
    assert abs(top.score - hits[0].score) < 1e-6 and first[0] == doc and min(first[2], end) > max(first[1], start)
    allowed = [hit.doc_id for hit in hits[5:]] + [min(chunks)]  # the returns policy: far below, as every piece is read
    within = lk.search_finer(kb, query, 10, within=allowed)
    assert {hit.doc_id for hit in within} == set(allowed)
    assert lk.search_finer(kb, "   ", 5) == [] and lk.search_finer(kb, query, 5, within=[]) == []


def test_only_a_corpus_with_a_finer_cut_gets_the_finer_branch():
    assert lk.mode_misfit("finer", lk.KB) is None and "finer" in lk.mode_misfit("finer", lk.NEWS)
    assert "hybrid_codes_aliases_finer" in lk.modes_for(lk.KB) and "hybrid_codes_aliases_finer" not in lk.modes_for(lk.NEWS)
    with pytest.raises(ValueError, match="finer cut"):
        dataclasses.replace(lk.KB, finer=lk.KB_DOCUMENTS)  # whole documents are no cut of chunks


def test_abbreviations_are_mined_from_the_documents():
    texts = ["Доставка крупной бытовой техники (КБТ) бесплатна.", "Магазин работает в центре (Москва).",
             "Закон «О защите прав потребителей» (ЗоЗПП) и персональных данных (ПДн).", "Пакет (X)."]
    assert {(a.abbr, a.expansion) for a in lk.mine_aliases(texts)} == {
        ("КБТ", "крупной бытовой техники"), ("ЗоЗПП", "Закон О защите прав потребителей"), ("ПДн", "персональных данных")}
    twice = lk.mine_aliases([texts[0], texts[0], texts[2]])
    assert twice[0] == ("КБТ", "крупной бытовой техники", 2), "the most used pair first"


def test_abbreviations_expand_both_ways(kb):
    lk.ensure_aliases(kb)
    assert lk.ensure_aliases(kb) == 0, "current: nothing re-mined"
    forward = lk.expand_aliases(kb, "вывоз кбт при возврате платный?")
    assert forward.searched.startswith("вывоз кбт при возврате платный? ") and "бытов" in forward.searched
    backward = lk.expand_aliases(kb, "крупную бытовую технику повредили")
    assert backward.searched.endswith(" КБТ") and backward.added[0][1] == "КБТ"
    assert lk.expand_aliases(kb, "как вернуть телевизор").added == ()
    assert str(lk.Aliases()) == "aliases" and lk.Aliases()(kb, "что такое ПДн").endswith("персональных данных")


def test_a_synonym_dictionary_needs_a_file_in_the_servers_folder(kb):
    problem = lk.synonym_file_problem(kb.conn, "labkit_no_such_file")
    assert problem is not None and "tsearch_data" in problem and "labkit_no_such_file.syn" in problem
    assert lk.synonym_file_problem(kb.conn, "synonym_sample") is None
    assert lk.synonym_sample(kb.conn, ["postgres", "золото"]) == {"postgres": ["pgsql"], "золото": None}


def test_a_filter_stage_ranks_only_the_rows_it_lets_through(kb):
    manual = lk.Filters.of(type="manual", status="действует")
    allowed = manual.ids(kb)
    expected = [row[0] for row in kb.conn.execute(
        "SELECT id FROM kb_chunks WHERE type = 'manual' AND status = 'действует' ORDER BY id")]
    total = kb.conn.execute("SELECT count(*) FROM kb_chunks").fetchone()[0]
    assert allowed == expected and 0 < len(allowed) < total
    for name, mode in [("vector", lk.Pipeline.of("vector")), ("bm25", lk.Pipeline.of("bm25")),
                       ("lexical", lk.Pipeline.of("lexical")), ("codes", lk.KB_MODES["codes"]),
                       ("hybrid_codes_aliases", lk.HYBRID_CODES_ALIASES)]:
        hits = mode.where(manual)(kb, "кронштейн 7748-К", 30)
        assert hits and set(lk.ids(hits)) <= set(allowed), name
    tv = lk.Filters.of(products="Телевизор ТехноВид 65Q7", date={"from": "2026-01-01"})
    rows = kb.conn.execute("SELECT id, products, date FROM kb_chunks WHERE id = ANY(%s)", (tv.ids(kb),)).fetchall()
    assert rows and all("Телевизор ТехноВид 65Q7" in p.split("; ") and str(d) >= "2026-01-01" for _, p, d in rows)
    assert lk.HYBRID_CODES_ALIASES.where(lk.Filters.of(category="нет такой рубрики"))(kb, "кронштейн", 5) == []
    with pytest.raises(ValueError, match="нет среди значений"):
        lk.HYBRID_CODES_ALIASES.where(lk.Filters.of(type="manuals"))(kb, "кронштейн", 5)


def test_a_filtered_vector_search_is_exact_on_the_knowledge_base(kb):
    within = lk.Filters.of(type="manual", products="Наушники ТехноЗвук Buds 3").ids(kb)  # 4 % of the rows
    query = "как вернуть деньги за покупку"
    embedding = lk.cached_query_embedding(kb, query)
    params = {"embedding": embedding, "limit": 10, "within": within}
    plan = "\n".join(row[0] for row in kb.conn.execute(
        "EXPLAIN " + vector_sql(lab_vector_table(kb), within=True).as_string(kb.conn), params))
    assert "_pkey" in plan and "hnsw" not in plan, "on ~400 rows the filter's ids are read by primary key"
    rows = kb.conn.execute(sql.SQL("SELECT id, embedding <=> %s FROM {} WHERE id = ANY(%s)").format(
        sql.Identifier(lab_vector_table(kb))), (embedding, within)).fetchall()
    exact = [i for i, _ in sorted(rows, key=lambda row: (row[1], row[0]))][:10]
    assert lk.ids(lk.search_vector(kb, query, 10, within=within)) == exact
    assert lk.search_vector(kb, query, 10, within=[]) == []


def test_a_selective_filter_on_a_larger_copy_needs_an_iterative_index_scan(kb):
    copied = lk.copy_vectors(kb, copies=10)
    in_table = kb.conn.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(copied.table))).fetchone()[0]
    assert copied.rows == in_table and copied.rows % 10 == 0 and copied.documents == 44
    query = lk.cached_query_embedding(kb, "как вернуть деньги за покупку")
    exact = lk.filtered_scan(kb, copied.table, query, 44, 10, use="exact")
    plain = lk.filtered_scan(kb, copied.table, query, 44, 10, ef_search=10, use="index")
    walked = lk.filtered_scan(kb, copied.table, query, 44, 10, ef_search=10, use="index", iterative="relaxed_order")
    stopped = lk.filtered_scan(kb, copied.table, query, 44, 10, ef_search=10, use="index", iterative="relaxed_order",
                               max_scan_tuples=20)
    assert len(exact.ids) == 10 and not any("hnsw" in line for line in exact.plan)
    assert any("Index Scan using kb_chunks_vec_copies_hnsw" in line for line in plain.plan)
    assert any("Filter: (doc = " in line for line in plain.plan)
    assert len(plain.ids) < 10 and len(walked.ids) == 10 and len(stopped.ids) < 10
    per_copy = copied.rows // 10  # copy ids run round by round: the copies of one chunk are per_copy apart
    assert all(len({(i - 1) % per_copy for i in found.ids}) == len(set(found.chunks)) for found in (walked, exact))
    assert all(chunk // 1000 == 44 for chunk in exact.chunks + walked.chunks), "every row passed the filter"
    with pytest.raises(ValueError, match="iterative must be one of"):
        lk.filtered_scan(kb, copied.table, query, 44, iterative="on")
    with pytest.raises(ValueError, match="use must be one of"):
        lk.filtered_scan(kb, copied.table, query, 44, use="fast")


def test_evaluation_searches_within_each_querys_filters(kb):
    filters = lk.query_filters(KB.retrieval)
    query = next(iter(filters))
    relevant = frozenset(next(json.loads(line)["relevant"] for line in KB.retrieval.read_text(encoding="utf-8").splitlines()
                              if json.loads(line)["query"] == query))
    labelled = [lk.LabelledQuery(query, relevant)]
    report = lk.evaluate(kb, labelled, ["hybrid_codes_aliases"], top_k=5, filters=filters)
    allowed_docs = {chunk // 1000 for chunk in filters[query].ids(kb)}
    assert set(report.queries[0].rankings["hybrid_codes_aliases"]) <= allowed_docs
    with pytest.raises(lk.LabError, match="cannot search within filters"):
        lk.evaluate(kb, labelled, {"fielded": lk.SEARCH_MODES["fielded"]}, filters=filters)


def test_eval_on_the_knowledge_base_runs_its_modes_and_the_news_refuses_them(capsys, tmp_path):
    queries = tmp_path / "kb.jsonl"
    queries.write_text(json.dumps({"query": "артикул 7748-К", "relevant": [38]}, ensure_ascii=False) + "\n",
                       encoding="utf-8")
    assert cli_main(["eval", "--corpus", "kb", "--queries", str(queries), "--k", "5", "--json",
                     "--modes", "codes,hybrid_codes_aliases"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert list(data["modes"]) == ["codes", "hybrid_codes_aliases"] and data["queries"][0]["codes"]
    with pytest.raises(SystemExit):
        cli_main(["eval", "--modes", "vector,codes"])
    assert "cannot search the corpus news" in capsys.readouterr().err


def test_the_document_agent_searches_with_the_mode_that_serves_its_own_tune_questions_best(kb):
    """Lessons 16 and 20 and ``documents.SEARCH`` say why the agent keeps hybrid_codes_aliases: on the supervisor's
    tune questions for documents (a «both» question: its rules part), its three chunks reach a needed document at
    least as often as the finer mode's."""
    questions = [q for q in load_supervisor_questions(split="tune") if q.kind in ("documents", "both")]
    assert len(questions) >= 10
    parts = {q.id: split_both(q.question) if q.kind == "both" else None for q in questions}
    asked = {q.id: parts[q.id].documents if parts[q.id] else q.question for q in questions}  # as the supervisor asks

    def reached(mode):
        hits = 0
        for question in questions:
            head = lk.ids(mode(kb, asked[question.id], TOP_CHUNKS))
            parent = lk.parents(kb, head)
            hits += any(parent[chunk] in question.relevant for chunk in head)
        return hits

    assert SEARCH is lk.HYBRID_CODES_ALIASES
    assert reached(SEARCH) >= reached(lk.HYBRID_CODES_ALIASES_FINER)
