"""``ship-vectors``: the embedded stack's vectors of the knowledge base's passage texts, written to the course's file.

    ./run.sh ship-vectors [--afresh] [--json]

For the maintainers, after the knowledge base, its chunking or its context lines change. In a
fresh database of the lab's server (made for the run and dropped after it, so the texts are a fresh
clone's, whatever the ``lab`` database has gathered) every passage the KB track embeds is collected:
the chunks (``KB``) and its finer cut (``KB.finer``), the whole documents and their first tokens
(15_kb_chunking), the chunks without their heading (the sweep's bare cut) and every derived text a KB
mode embeds (the contextual and the fielded texts). A text the file already holds, by the same model with
the same weights, keeps its vector byte for byte (``kept_vectors``: embedded again in other batches on the same
machine, a text's vector moved by up to 0.002 in a coordinate, enough to flip near-ties); every other text
(all of them when the file's model or weights differ) is embedded by the lab's model
server, the cache bypassed; texts no longer collected leave the file. `--afresh` embeds every text again.
The file is written with the model's name and the digest of its weights to ``labkit/data/kb/vectors.npz``
(``labkit.store.shipped``). Refused when the server lists no digest for the embedding model: such vectors
could never be matched to their weights. A file that cannot be read stops the run with its name: delete it
and run again.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from typing import TYPE_CHECKING, Any

from psycopg import sql

from labkit.core.corpora.kb import KB, KB_CHUNKING, KB_DOCUMENTS, KB_VECTORS
from labkit.core.errors import LabError
from labkit.evaluation.chunk_sweep import sweep_corpus
from labkit.models.embedding import embed_documents
from labkit.models.tokenizer import E5_TOKEN_LIMIT, model_tokens, token_limit
from labkit.retrieval.contexts import ensure_contexts
from labkit.retrieval.heads import head_texts
from labkit.retrieval.modes import available_modes
from labkit.services.setup import open_lab, setup
from labkit.store.loading import ensure_corpus
from labkit.store.scratch import scratch_database
from labkit.store.shipped import kept_vectors, read_shipped, served_digest, text_key, write_shipped

if TYPE_CHECKING:
    from labkit.core.context import Lab

__all__ = ["register", "run", "kb_passages"]


def register(sub: Any) -> None:
    """Add the ``ship-vectors`` command to the sub-parsers `sub`."""
    parser = sub.add_parser("ship-vectors", help="write the embedded stack's vectors of the knowledge base (maintainers)",
                            description="Embed the passage texts of the knowledge-base track that the file lacks (all with "
                                        f"--afresh) and write the vectors to {KB_VECTORS.relative_to(KB_VECTORS.parents[3])}.")
    parser.add_argument("--afresh", action="store_true",
                        help="embed every text again, also those whose vectors the file already holds")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(run=run)


def _derived_texts(lab: Lab) -> list[str]:
    """The texts every derived-vector table of the knowledge base holds for the lab's model (``TextVectors``)."""
    tables = [row[0] for row in lab.conn.execute(
        """
        SELECT c.table_name FROM information_schema.columns AS c
        WHERE c.table_schema = current_schema() AND c.column_name IN ('text_md5', 'embedding')
          AND (c.table_name LIKE %s OR c.table_name LIKE %s)
        GROUP BY 1 HAVING count(*) = 2
        ORDER BY 1
        """, (f"{KB.table}\\_%", f"{KB_DOCUMENTS.table}\\_%")).fetchall()]
    texts: list[str] = []
    for table in tables:
        texts += [row[0] for row in lab.conn.execute(
            sql.SQL("SELECT c.text FROM {v} AS v JOIN embedding_cache AS c ON c.model = v.model AND c.kind = 'passage' "
                    "AND md5(c.text) = v.text_md5 WHERE v.model = %s ORDER BY v.id").format(v=sql.Identifier(table)),
            (lab.embed_model,)).fetchall()]
    return texts


def kb_passages(lab: Lab) -> list[str]:
    """Every passage text the KB track embeds with the lab's model, each once (its tables loaded on the way)."""
    docs = KB_DOCUMENTS.documents()
    bare = sweep_corpus(KB_DOCUMENTS, dataclasses.replace(KB_CHUNKING, headed=False))
    count = model_tokens(lab.embed_model)
    if count is None:
        raise LabError(f"no tokenizer of {lab.embed_model} in this process: the first tokens of the documents cannot be cut")
    heads = head_texts({doc.id: doc.text for doc in docs}, token_limit(lab.embed_model) or E5_TOKEN_LIMIT, count)
    cuts = (KB, KB_DOCUMENTS, bare, *([KB.finer] if KB.finer is not None else []))
    for corpus in cuts:
        ensure_corpus(lab, corpus)
    ensure_contexts(lab, generate=False)
    for mode in available_modes(lab).values():  # every derived text a mode embeds gets its table
        mode(lab, "возврат товара", 1)
    texts = [doc.text for corpus in cuts for doc in corpus.documents()]
    return list(dict.fromkeys(texts + list(heads.values()) + _derived_texts(lab)))


FRESH_DATABASE = "labkit_ship_vectors"  # made for the run and dropped after it (labkit.store.scratch)


def run(args: argparse.Namespace) -> int:
    """Embed the knowledge base's passages the file lacks (every one with `--afresh`); write all with the weights' digest."""
    with setup(quiet=True, load=False, corpus=KB) as started:  # the stack up
        settings = started.settings
    with scratch_database(settings, FRESH_DATABASE) as fresh, open_lab(fresh, load=False, corpus=KB) as lab:
        digest = served_digest(lab)
        if not digest:
            raise LabError(f"the model server at {lab.settings.ollama_host} lists no digest for {lab.embed_model}: "
                           "only vectors that name their weights are shipped")
        texts = kb_passages(lab)
        keys = {text: text_key(text) for text in texts}
        current = set(keys.values())
        shipped = read_shipped(KB_VECTORS) if KB_VECTORS.is_file() else None
        kept = {} if args.afresh else kept_vectors(shipped, lab.embed_model, digest, current)
        new = [text for text in texts if keys[text] not in kept]
        dropped = len(set(shipped.vectors) - current) if shipped is not None else 0
        start = time.perf_counter()
        vectors = embed_documents(lab.models, lab.embed_model, new) if new else []
        seconds = time.perf_counter() - start
        written = write_shipped(KB_VECTORS, lab.embed_model, digest, new, vectors, kept)
        size = KB_VECTORS.stat().st_size
        report = {"model": lab.embed_model, "digest": digest, "texts": written, "kept": len(kept),
                  "embedded": len(new), "dropped": dropped, "seconds": round(seconds, 1), "file": str(KB_VECTORS),
                  "bytes": size}
    if args.json:
        print(json.dumps(report, ensure_ascii=False, indent=2))
    else:
        print(f"{written} passages of {report['model']} ({digest[:12]}): {len(kept)} kept from the file, {len(new)} "
              f"embedded in {seconds:.0f} s, {report['dropped']} no longer used dropped; written to {KB_VECTORS} "
              f"({size / 1e6:.1f} MB)")
    return 0
