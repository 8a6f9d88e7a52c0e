"""The knowledge base of «ТехноМир»: 44 long support documents and the chunks they are searched in (15_kb_chunking).

A fictional Russian electronics retailer's policies, FAQs, manuals, regulations and offers, written
for the course (``labkit/data/kb/README.md`` describes the files). Two corpora read the same file:

* ``KB_DOCUMENTS``: one row per document (table ``kb_documents``): what a whole-document search
  sees, and what e5 cuts to its first 512 tokens;
* ``KB``: one row per chunk (table ``kb_chunks``), cut by ``KB_CHUNKING``; what the course's
  knowledge-base search, its evaluation (``./run.sh eval --corpus kb``) and the document agent use.
  Rankings of chunks are collapsed to documents for Recall@k (a document ranks where its best chunk
  ranks);
* ``KB_FINE``: the same documents cut finer, by headings into pieces of at most 60 tokens (table
  ``kb_fine_chunks``), ``KB.finer``: only its vectors are searched, by the ``finer`` branch, which
  counts each hit for the chunk of ``KB`` that overlaps it most.
"""

from __future__ import annotations

from labkit.core.chunked import chunked
from labkit.core.chunking import ChunkSpec
from labkit.core.corpus import DATA_DIR, Corpus, Field

__all__ = ["KB", "KB_DOCUMENTS", "KB_CHUNKING", "KB_FINE", "KB_FINE_CHUNKING", "KB_DIR", "KB_SOURCE", "KB_QUERIES", "KB_CONTEXTS", "KB_VECTORS", "TYPE_NAMES"]

KB_DIR = DATA_DIR / "kb"
KB_SOURCE = KB_DIR / "documents.jsonl"
KB_QUERIES = KB_DIR / "queries.jsonl"  # 125 labelled queries with a kind, a fixed split and the answers' spans
KB_CONTEXTS = KB_DIR / "contexts.jsonl"  # a line of context per chunk of KB, written once by the default chat model
KB_VECTORS = KB_DIR / "vectors.npz"  # the embedded stack's e5 vectors of the KB's passage texts (labkit.store.shipped)

TYPE_NAMES: dict[str, str] = {
    "policy": "правила для покупателей",
    "faq": "вопросы и ответы",
    "manual": "инструкция к товару",
    "regulation": "внутренний регламент",
    "offer": "условия акции или услуги",
}
STATUS_NAMES: dict[str, str] = {"действует": "действует", "архив": "архивная редакция"}

KB_DOCUMENTS = Corpus(
    name="kb_documents",
    title="база знаний ТехноМира (документы целиком)",
    table="kb_documents",
    fields=(
        Field("key", "ключ автора"),
        Field("title", "заголовок"),
        Field("type", "тип документа", names=TYPE_NAMES),
        Field("category", "рубрика"),
        Field("products", "товары", many=True),
        Field("codes", "артикулы", many=True),
        Field("version", "редакция"),
        Field("date", "дата вступления в силу", "date"),
        Field("status", "статус", names=STATUS_NAMES),
    ),
    source=KB_SOURCE,
    queries=KB_QUERIES,
    retrieval=KB_QUERIES,
    text_column="body",
    text_field="text",
    ts_config="russian",
    fielded=("type", "category"),
    lexicon=("title",),
)
# Picked by `./run.sh bench-chunks` (labkit.evaluation.chunk_sweep, taught in 15_kb_chunking) on the tune split of
# KB_QUERIES over FULL_GRID: among the cuts whose longest chunk fits e5's 512 tokens, the best hybrid Recall@5, ties
# broken by answer-span recall, IoU, fewer chunks. Windows of 200 word tokens without overlap won (0.933, tied with
# sentence 400/80, whose chunks overflow the window); heading 200/40, the first guess, had 0.895. On the report split
# the two are within noise of each other (hybrid Recall@5 0.814 vs 0.819): the gap the tune split saw did not carry over.
KB_CHUNKING = ChunkSpec("fixed", 200, 0)
# The second, finer cut the `finer` branch searches by its vectors (labkit.retrieval.branches.finer, 16_kb_codes).
# Chosen on the tune split only: each cut of {heading 40, 60, 80, 100, 150; sentence 60, 100; fixed 60, 100}, no
# overlap, joined hybrid_codes_aliases as a fourth branch with the article's defaults (weight 1, rrf_k 60), and the
# cuts were ranked as pick_cut ranks them: document Recall@5, then answer-span recall. Heading 60 and heading 80 tied
# at 0.958 (against 0.940 without the branch); span recall gave heading 60 (0.811 against 0.810). By MRR heading 80
# would have won (0.825 against 0.806): the choice between the two is that close.
KB_FINE_CHUNKING = ChunkSpec("heading", 60, 0)
KB_FINE = chunked(KB_DOCUMENTS, KB_FINE_CHUNKING, name="kb_fine", table="kb_fine_chunks",
                  title="база знаний ТехноМира (мелкие фрагменты по разделам)")
KB = chunked(KB_DOCUMENTS, KB_CHUNKING, name="kb", table="kb_chunks",
             title="база знаний ТехноМира (фрагменты документов)", contexts=KB_CONTEXTS, finer=KB_FINE)
