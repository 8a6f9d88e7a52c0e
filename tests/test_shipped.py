"""The shipped vectors of the knowledge base: whose they are, what they cover, and who gets them (labkit.store.shipped)."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
import ollama
import pytest
from privatepg import scratch_database

import labkit as lk
from labkit.core.corpora.kb import KB_VECTORS
from labkit.core.corpus import DataError
from labkit.core.settings import EMBEDDED_DEFAULTS
from labkit.evaluation.chunk_sweep import sweep_corpus
from labkit.services.modelserver.registry import MODELS, e5_digest
from labkit.services.pgembedded import free_port
from labkit.services.setup import describe
from labkit.store.shipped import kept_vectors, read_shipped, served_digest, shipped_for, text_key, write_shipped

E5 = "multilingual-e5-small:q4"


def test_the_file_names_the_embedded_e5_and_the_digest_of_its_weights():
    shipped = read_shipped(KB_VECTORS)
    assert shipped.model == E5 == EMBEDDED_DEFAULTS["embed_model"]
    assert shipped.digest == e5_digest() == MODELS[E5].digest and len(shipped.digest) == 64
    assert {v.shape for v in shipped.vectors.values()} == {(MODELS[E5].embedding_length,)}


def test_the_file_covers_the_chunks_the_whole_documents_and_the_bare_cut():
    vectors = read_shipped(KB_VECTORS).vectors
    bare = sweep_corpus(lk.KB_DOCUMENTS, dataclasses.replace(lk.KB_CHUNKING, headed=False))
    for corpus in (lk.KB, lk.KB_DOCUMENTS, bare):
        missing = [doc.id for doc in corpus.documents() if text_key(doc.text) not in vectors]
        assert not missing, f"{corpus.name}: no shipped vector for {missing[:5]}: run ./run.sh ship-vectors"
    for vector in list(vectors.values())[:50]:
        assert abs(float(np.linalg.norm(vector)) - 1.0) < 1e-3


def test_a_written_file_reads_back_and_a_foreign_file_is_refused(tmp_path):
    path = tmp_path / "v.npz"
    vectors = [np.full(4, 0.5, dtype=np.float32), np.arange(4, dtype=np.float32)]
    texts = ["a", "b", *(f"text {i}" for i in range(410))]  # "text 405" has a key ending in a zero byte
    assert any(text_key(text).endswith(b"\0") for text in texts)
    vectors += [np.full(4, i, dtype=np.float32) for i in range(410)]
    assert write_shipped(path, "m:1", "ab" * 32, texts, vectors) == len(texts)
    back = read_shipped(path)
    assert (back.model, back.digest) == ("m:1", "ab" * 32)
    assert all(np.array_equal(back.vectors[text_key(text)], vector) for text, vector in zip(texts, vectors))
    np.savez(tmp_path / "bad.npz", model=np.array("m:1"), digest=np.array("short"), keys=np.zeros((1, 32), dtype=np.uint8),
             vectors=np.zeros((1, 4), dtype=np.float32))
    with pytest.raises(DataError, match="digest"):
        read_shipped(tmp_path / "bad.npz")
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(DataError, match="junk.npz"):
        read_shipped(tmp_path / "junk.npz")


def test_a_rewrite_keeps_the_vectors_the_file_holds_byte_for_byte_and_drops_texts_no_longer_used(tmp_path):
    path = tmp_path / "v.npz"
    old = {"a": np.array([0.1, 0.2], dtype=np.float32), "b": np.array([0.3, 0.4], dtype=np.float32)}
    write_shipped(path, "m:1", "ab" * 32, list(old), list(old.values()))
    keys = {text_key("b"), text_key("c")}  # "a" is no longer collected, "c" is new
    shipped = read_shipped(path)
    kept = kept_vectors(shipped, "m:1", "ab" * 32, keys)
    assert set(kept) == {text_key("b")}
    assert kept_vectors(shipped, "m:1", "cd" * 32, keys) == {}, "other weights: nothing is kept"
    assert kept_vectors(shipped, "m:2", "ab" * 32, keys) == {}, "another model: nothing is kept"
    assert kept_vectors(None, "m:1", "ab" * 32, keys) == {}, "no file: nothing is kept"
    assert write_shipped(path, "m:1", "ab" * 32, ["c"], [np.array([0.5, 0.6])], kept) == 2
    back = read_shipped(path).vectors
    assert set(back) == {text_key("b"), text_key("c")}
    assert back[text_key("b")].tobytes() == old["b"].tobytes()


class ListsOtherWeights:
    """A fake model client (named as such): a server that lists the lab's model name with other weights.

    No real part of the stack can serve the same name with other weights on demand.
    """

    def list(self):
        return SimpleNamespace(models=[SimpleNamespace(model=E5, digest="0" * 64)])


def test_a_server_listing_other_weights_gets_no_shipped_vector():
    lab = SimpleNamespace(models=ListsOtherWeights(), embed_model=E5, shipped=None)
    assert served_digest(lab) == "0" * 64
    assert shipped_for(lab) == {} and lab.shipped == {}, "the answer is kept for the lab"


def test_a_server_that_does_not_answer_gets_nothing_and_is_asked_again_later():
    down = ollama.Client(host=f"http://127.0.0.1:{free_port()}", timeout=5)  # a real client, nobody listening
    lab = SimpleNamespace(models=down, embed_model=E5, shipped=None)
    assert served_digest(lab) is None
    assert shipped_for(lab) == {} and lab.shipped is None


@pytest.mark.services
def test_a_fresh_database_takes_the_chunks_from_the_file_and_they_are_the_servers_own(settings):
    with scratch_database(settings, "lab_shipped_test") as scratch:
        with lk.open_lab(scratch, load=False, corpus=lk.KB) as lab:
            report = lk.ensure_corpus(lab)
            chunks = lk.KB.documents()
            assert (report.shipped_texts, report.embedded_texts, report.embedding_calls) == (len(chunks), 0, 0)
            assert "векторов из файла курса" in describe(lab)
            sample = [chunks[0].text, chunks[len(chunks) // 2].text, chunks[-1].text]
            stored = lk.cached_embeddings(lab, sample, "passage")
            fresh = np.asarray(lk.embed_documents(lab.models, lab.embed_model, sample), dtype=np.float32)
            stored = np.asarray(stored, dtype=np.float32)
            same = np.einsum("ij,ij->i", stored, fresh)  # unit vectors: the cosine of each text's two vectors
            other = (stored[0] @ fresh[-1], stored[-1] @ fresh[0])  # the first and the last text, crossed
            # the server's own model: the same vector up to the CPU's arithmetic (byte for byte on the shipping
            # machine, cosine 0.99997 on another CPU), while two different passages are far apart
            assert same.min() >= 0.9999, same
            assert max(other) < 0.98, other


@pytest.mark.services
def test_another_embedding_model_gets_nothing_from_the_file(settings):
    other = dataclasses.replace(settings, embed_model="qwen2.5-coder-embed:0.5b")
    with lk.open_lab(other, load=False, corpus=lk.KB) as lab:
        assert served_digest(lab) == MODELS["qwen2.5-coder-embed:0.5b"].digest
        assert shipped_for(lab) == {}


@pytest.mark.services
def test_the_derived_texts_and_the_first_tokens_of_a_fresh_database_are_in_the_file(settings):
    from labkit.cli.ship_vectors import _derived_texts

    vectors = read_shipped(KB_VECTORS).vectors
    with scratch_database(settings, "lab_shipped_derived") as scratch:
        with lk.open_lab(scratch, corpus=lk.KB) as lab:
            lk.ensure_contexts(lab, generate=False)
            for branch in ("contextual", "fielded"):
                lk.BRANCHES[branch](lab, "возврат телевизора", 1)
            derived = _derived_texts(lab)
            assert len(derived) == 2 * len(lk.KB.documents())
            texts = {doc.id: doc.text for doc in lk.KB_DOCUMENTS.documents()}
            heads = lk.head_texts(texts, lk.E5_TOKEN_LIMIT, lk.model_tokens(lab.embed_model))
            missing = [text[:60] for text in [*derived, *heads.values()] if text_key(text) not in vectors]
            assert not missing, f"no shipped vector for {missing[:3]}: run ./run.sh ship-vectors"
