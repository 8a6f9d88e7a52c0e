"""The search modes the lab compares, by name: one table of pipelines and every tuned value beside it.

Taught in 05_evaluation (the table), 10_bm25 and 11_beyond_rrf (the modes after RRF). Each mode is a
``labkit.retrieval.pipeline.Pipeline`` — rewrite steps → branches with weights → RRF → re-rank
steps — called like any search mode, ``mode(lab, query, top_k) -> list[Hit]``, and printed as its
stages (``print(SEARCH_MODES["fielded_covered"])`` gives ``spelling → fielded → coverage@4``). The
eval command and the notebooks iterate this dict, so a mode added here is evaluated everywhere.

Some branches need a capability not every machine has (the latent terms need the in-process
e5, whose wheels exist for Linux x86_64 only); a mode needs what its branches need, checked at
run time: ``available_modes()`` is what this process can run, ``unavailable_modes()`` says why not.

``SEARCH_MODES`` fit any corpus. Some modes read fields only one corpus has (the knowledge base's
article codes): they live in tables of their own below (``KB_MODES``), each mode says what it
needs of its corpus (``Pipeline.misfit``), and ``modes_for(corpus)`` is every mode that fits a
corpus; ``available_modes(corpus)`` and the eval command go by it (16_kb_codes).
"""

from __future__ import annotations

from collections.abc import Iterable

from labkit.core.corpora import DEFAULT_CORPUS
from labkit.core.corpus import Corpus
from labkit.retrieval.branches.fielded import fielded_text
from labkit.retrieval.branches.prf import PrfConfig, prf_branch
from labkit.retrieval.branches.registry import BRANCHES, Need, first_problem
from labkit.retrieval.fusion import FusionConfig
from labkit.retrieval.pipeline import Pipeline, Stage
from labkit.retrieval.rerankers.coverage import Coverage, TextSource
from labkit.retrieval.rerankers.judge import JUDGE_DEPTH, Judge, corpus_text
from labkit.retrieval.rewriters.aliases import Aliases
from labkit.retrieval.rewriters.spelling import Spelling

__all__ = ["HYBRID", "HYBRID_BM25", "DEFAULT_FUSION", "HYBRID_EXPANDED", "HYBRID_CONTEXTUAL", "DEFAULT_PRF", "COVERAGE_DEPTHS",
           "COVERAGE_DEPTH", "SEARCH_MODES", "search_hybrid_bm25", "search_hybrid_latent", "search_hybrid_expanded",
           "search_hybrid_prf", "corrected", "covered", "judged", "mode_problem", "available_modes", "unavailable_modes",
           "skipped_note", "ALIASED_BM25", "HYBRID_CODES", "HYBRID_CODES_ALIASES", "KB_MODES", "all_modes", "modes_for",
           "mode_misfit"]

# --- the tuned values, each with how it was tuned --------------------------------------------------------

HYBRID = FusionConfig.of({"vector": 1.0, "lexical": 1.0})  # lesson 04's plain hybrid: equal weights, rrf_k 60
HYBRID_BM25 = FusionConfig.of({"vector": 1.0, "bm25": 1.0})  # 10_bm25: BM25 in place of ts_rank_cd
# Chosen by labkit.evaluation.retrieval.tune_fusion on queries.jsonl with default_grid() (re-run in 11_beyond_rrf):
# many configurations tie at the top on 12 queries; the tie-break keeps the plain defaults.
DEFAULT_FUSION = FusionConfig.of({"vector": 1.0, "lexical": 1.0, "latent": 1.0}, rrf_k=60)
# Picked by tune_fusion (Recall@3, then MRR) on the "tune" split of retrieval.jsonl only (11_beyond_rrf), over the
# expanded vector branch x {lexical, expanded_lexical, bm25} x weights {0.5, 1, 2}^2 x rrf_k {5, 10, 30, 60}.
HYBRID_EXPANDED = FusionConfig.of({"expanded": 2.0, "expanded_lexical": 0.5}, rrf_k=5)
# Picked on the "tune" split of retrieval.jsonl only (Recall@3, then MRR) over docs {1, 2, 3, 5} x beta
# {0.25, 0.5, 1}: Recall@3 tied across the grid, so MRR decided; the gain over the plain hybrid is small.
DEFAULT_PRF = PrfConfig(docs=1, beta=0.25)
COVERAGE_DEPTHS = (4, 5, 6, 10)  # head sizes pick_coverage_depth tries (a head of 3 cannot change Recall@3)
COVERAGE_DEPTH = 4  # the tune split's choice (11_beyond_rrf); tests/test_coverage.py checks it still is

# --- the modes: one line each ----------------------------------------------------------------------------

SEARCH_MODES: dict[str, Pipeline] = {
    "vector": Pipeline.of("vector"),
    "lexical": Pipeline.of("lexical"),
    "hybrid": Pipeline.of(HYBRID),
    # taught in 10_bm25 and 11_beyond_rrf: BM25 in SQL, its hybrid, the latent terms and the three-branch hybrid
    "bm25": Pipeline.of("bm25"),
    "hybrid_bm25": Pipeline.of(HYBRID_BM25),
    "latent": Pipeline.of("latent"),
    "hybrid_latent": Pipeline.of(DEFAULT_FUSION),
    # taught in 11_beyond_rrf: documents expanded with generated questions (labkit.retrieval.questions), and
    # pseudo-relevance feedback: a vector branch moved toward the plain hybrid's top hits, fused with ts_rank_cd
    "expanded": Pipeline.of("expanded"),
    "expanded_lexical": Pipeline.of("expanded_lexical"),
    "hybrid_expanded": Pipeline.of(HYBRID_EXPANDED),
    "hybrid_prf": Pipeline.of({prf_branch(Pipeline.of(HYBRID), DEFAULT_PRF): 1.0, "lexical": 1.0}),
    # taught in 11_beyond_rrf: documents embedded with their topic's gloss and company, the same on the query with
    # wrong keyboard layout and typos fixed against the corpus' words, and that with its head re-ranked by how
    # many query words each fielded text holds
    "fielded": Pipeline.of("fielded"),
    "fielded_corrected": Pipeline.of("fielded", rewrite=[Spelling()]),
    "fielded_covered": Pipeline.of("fielded", rewrite=[Spelling()], rerank=[Coverage(COVERAGE_DEPTH, fielded_text)]),
}

# --- taught in 15_kb_chunking: contextual chunks (a line of context per chunk, labkit.retrieval.contexts) ------
# For a corpus of chunks only (the branches need CHUNKS), so they are in KB_MODES below. HYBRID_CONTEXTUAL is the plain
# hybrid's fusion (equal weights, rrf_k 60): nothing was tuned.
HYBRID_CONTEXTUAL = FusionConfig.of({"contextual": 1.0, "contextual_lexical": 1.0})

# the modes under the names of the functions they replaced
search_hybrid_bm25 = SEARCH_MODES["hybrid_bm25"]
search_hybrid_latent = SEARCH_MODES["hybrid_latent"]
search_hybrid_expanded = SEARCH_MODES["hybrid_expanded"]
search_hybrid_prf = SEARCH_MODES["hybrid_prf"]


def corrected(search: Stage) -> Pipeline:
    """The search mode `search` run on the corrected query: a pipeline with the ``spelling`` step first. Taught in 11_beyond_rrf."""
    return Pipeline.of(search, rewrite=[Spelling()])


def covered(search: Stage, depth: int = COVERAGE_DEPTH, text: TextSource = fielded_text) -> Pipeline:
    """The search mode `search` with its first `depth` hits re-ranked by the query words `text` holds. Taught in 11_beyond_rrf."""
    return Pipeline.of(search, rerank=[Coverage(depth, text)])


def judged(search: Stage, depth: int = JUDGE_DEPTH, model: str | None = None, text: TextSource = corpus_text) -> Pipeline:
    """The search mode `search` with its first `depth` hits re-ranked by the chat model's P(yes). Taught in 17_kb_rerank.

    `model` None is the lab's chat model; `text` is what the judge reads (default: the corpus' text column).
    Every pair costs a model call once, then comes from the cache (``labkit.retrieval.rerankers.judge``).
    """
    return Pipeline.of(search, rerank=[Judge(depth, model, text)])


# --- the knowledge base's modes: exact codes and abbreviations (16_kb_codes) -----------------------------
# They need the corpus field `codes` (Pipeline.misfit): modes_for(news) leaves them out, eval --corpus kb runs them.
# Chosen on the "tune" split of the knowledge base's queries only (16_kb_codes): each new branch joins the hybrid
# with the article's defaults (weight 1, rrf_k 60) and stays when the tune split's Recall@5 does not drop and the
# kinds it is for rise; a free weight grid on the tune split picks by the paraphrases instead (the lesson shows it).

# BM25 on the query with its abbreviations expanded; not a mode of its own (it would fit the news corpus too),
# a branch of the last mode below, and evaluated on its own in 16_kb_codes
ALIASED_BM25 = Pipeline.of("bm25", rewrite=[Aliases()])
HYBRID_CODES = FusionConfig.of({"vector": 1.0, "bm25": 1.0, "codes": 1.0})

KB_MODES: dict[str, Pipeline] = {
    "contextual": Pipeline.of("contextual"),
    "contextual_lexical": Pipeline.of("contextual_lexical"),
    "hybrid_contextual": Pipeline.of(HYBRID_CONTEXTUAL),
    "codes": Pipeline.of("codes"),
    "hybrid_codes": Pipeline.of(HYBRID_CODES),
    "hybrid_codes_aliases": Pipeline.of({"vector": 1.0, ALIASED_BM25: 1.0, "codes": 1.0}),
}
HYBRID_CODES_ALIASES = KB_MODES["hybrid_codes_aliases"]


# --- which modes fit which corpus (16_kb_codes) -----------------------------------------------------------

def all_modes() -> dict[str, Pipeline]:
    """Every mode of every table: SEARCH_MODES, then the corpus-specific tables (KB_MODES)."""
    return {**SEARCH_MODES, **KB_MODES}


def modes_for(corpus: Corpus = DEFAULT_CORPUS) -> dict[str, Pipeline]:
    """The modes that can search `corpus` (its fields are what their branches read), in table order."""
    return {name: mode for name, mode in all_modes().items() if mode.misfit(corpus) is None}


def mode_misfit(name: str, corpus: Corpus = DEFAULT_CORPUS) -> str | None:
    """Why the mode (or branch) `name` cannot search `corpus`; None when it can or there is no such name."""
    found = all_modes().get(name) or BRANCHES.get(name)
    return found.misfit(corpus) if found is not None else None


# --- what this process can run ---------------------------------------------------------------------------

def _needs(name: str) -> tuple[Need, ...]:
    """What the mode (or branch) `name` needs; () for a name that is neither."""
    found = all_modes().get(name) or BRANCHES.get(name)
    return found.needs if found is not None else ()


def mode_problem(name: str) -> str | None:
    """Why the mode (or branch) `name` cannot run in this process; None when it can. Taught in 05_evaluation."""
    return first_problem(_needs(name))


def available_modes(corpus: Corpus = DEFAULT_CORPUS) -> dict[str, Pipeline]:
    """The modes for `corpus` (``modes_for``) this process can run, in table order. Taught in 05_evaluation."""
    return {name: mode for name, mode in modes_for(corpus).items() if mode.problem() is None}


def unavailable_modes(corpus: Corpus = DEFAULT_CORPUS) -> dict[str, str]:
    """Modes for `corpus` this process cannot run, each with the reason. Taught in 05_evaluation."""
    return {name: problem for name, mode in modes_for(corpus).items() if (problem := mode.problem()) is not None}


def skipped_note(names: Iterable[str] | None = None) -> str:
    """A Russian sentence on which of `names` (default: all modes) cannot run here and why; "" when all can.

    Taught in 11_beyond_rrf: notebooks print it and leave those modes out instead of failing.
    """
    skipped = [name for name in (SEARCH_MODES if names is None else names) if mode_problem(name) is not None]
    if not skipped:
        return ""
    why = "; ".join(dict.fromkeys(need.ru for name in skipped for need in _needs(name) if need.check() is not None))
    listed = ", ".join(f"`{name}`" for name in skipped)
    return (f"На этой машине недоступно: {listed} — {why}. Эти режимы пропускаем, остальное работает как обычно "
            f"(сообщение библиотеки: {mode_problem(skipped[0])}).")
