"""labkit: the code the notebooks of the hybrid-search RAG lab call.

Each module holds one idea and names the notebook that teaches it. A notebook (or a
command) starts with ``lab = labkit.setup()``: the one place where services are found;
every function below takes that ``Lab`` (or plain data) as its argument.
``import labkit`` starts nothing and loads no engine (Postgres server, llama.cpp, e5, LangGraph).
"""

from labkit.agent.faithfulness import check_answer, cited_ids, faithfulness_rate
from labkit.agent.graph import Agent, AgentResult, open_checkpointer, planner_context
from labkit.agent.markup import strip_markup
from labkit.agent.planner import (
    FINAL_PROMPT,
    REPLY_PROMPT,
    SYSTEM_PROMPT,
    FakeStubbornChat,
    Plan,
    check_reply,
    check_scope,
    drop_ungrounded,
    plan,
    route_calls,
)
from labkit.agent.runaway import cut_runaway
from labkit.agent.scope import Scope, corpus_scope
from labkit.agent.sql.check import SqlRefused, check_select
from labkit.agent.sql.fake import FakeRepeatingSqlChat
from labkit.agent.sql.graph import SqlAgent, SqlResult, sql_messages
from labkit.agent.sql.hints import column_hint, miscounted_orders, unasked_values, unknown_values
from labkit.agent.sql.policy import next_step_without_progress_rule, normalise_sql, stop_rule
from labkit.agent.sql.schema import describe_schema
from labkit.agent.supervisor import ROUTES, DocumentAgent, RouteDecision, Supervisor, SupervisorResult
from labkit.agent.supervisor.documents import ANSWERABLE
from labkit.agent.supervisor.routes import (
    REACH,
    ROUTE_BIAS,
    asks_to_change,
    pick_route,
    reach,
    refusal_rule,
    route_bias,
    route_name,
    route_scores,
)
from labkit.agent.supervisor.split import BothParts, split_both
from labkit.agent.tools import (
    DEFAULT_TOOLS,
    Company,
    Tone,
    ToolResult,
    Topic,
    call_tool,
    format_result,
    get_metrics,
    search_articles,
    tool_schema,
)
from labkit.core.chunked import chunked
from labkit.core.chunking import (
    CHUNKERS,
    Chunk,
    ChunkSpec,
    fixed_chunks,
    heading_chunks,
    sections,
    sentence_chunks,
    span_overlap,
    word_tokens,
)
from labkit.core.context import Lab, LoadReport
from labkit.core.corpora import CORPORA, DEFAULT_CORPUS, corpus_named, load_corpus, load_queries
from labkit.core.corpora.kb import KB, KB_CHUNKING, KB_CONTEXTS, KB_DOCUMENTS, KB_FINE, KB_FINE_CHUNKING, KB_QUERIES
from labkit.core.corpora.news import (
    COMPANIES,
    CORPUS_PATH,
    HELDOUT_PATH,
    NEWS,
    QUERIES_PATH,
    RETRIEVAL_PATH,
    TONE_NAMES,
    TONES,
    TOPIC_GLOSSES,
    TOPIC_IPTC,
    TOPIC_NAMES,
    TOPIC_RUBRICS,
    TOPICS,
    Doc,
)
from labkit.core.corpus import (
    DATA_DIR,
    KIND_NAMES,
    SPLITS,
    Corpus,
    DataError,
    Field,
    LabelledQuery,
    kind_name,
    query_kinds,
)
from labkit.core.errors import LabError
from labkit.core.ranking import Hit, ids
from labkit.core.settings import NO_TOOLS_MODEL, Settings, get_settings, lab_home, normalize_host
from labkit.core.shop.data import ShopData, read_products, validate_shop
from labkit.core.shop.generate import generate_shop, shop_data
from labkit.core.text import count, model_size, plural, say, shorten
from labkit.core.tokens import cut_offset, head_of
from labkit.course.checks import (
    CERTIFICATE_RECALL,
    CHALLENGE_TOP_K,
    ChallengeCheck,
    CheckResult,
    check_challenge,
    check_chunker,
    check_entity_tool,
    check_model_table,
    check_sql_retry,
    check_weighted_rrf,
    exercise_questions,
    leaderboard_frame,
    ready,
)
from labkit.course.checks.chunker import answer_spans, coverage_sweep
from labkit.course.coursemap import course_map, course_map_markdown
from labkit.course.glossary import mode_glossary
from labkit.course.sources import KB_ARTICLE_RECALL_AT_10
from labkit.evaluation.chunk_sweep import FULL_GRID, SweepResult, pick_cut, sweep_chunking, sweep_frame
from labkit.evaluation.filtered_scan import CopyReport, ScanResult, copy_vectors, filtered_scan
from labkit.evaluation.judge_quality import judged_pairs, separation
from labkit.evaluation.leaderboard import Scores, Standing, leaderboard, score_pipeline, scores_of
from labkit.evaluation.leakage import Supplied, supplied_words
from labkit.evaluation.metrics import METRICS, mean_metric, metric_value, ndcg_at_k, recall_at_k, reciprocal_rank
from labkit.evaluation.realvectors import REAL_LABEL, RealVectors, kb_chunks, real_vectors
from labkit.evaluation.rerank_cost import BENCH_DEPTHS, bench_pairs, measure_judge_cost
from labkit.evaluation.retrieval import (
    DepthResult,
    EvalReport,
    TuningResult,
    branch_rankings,
    compare_hybrid_latency,
    default_grid,
    evaluate,
    pick_coverage_depth,
    time_modes,
    tune_fusion,
    weight_grid,
)
from labkit.evaluation.scale import (
    build_hnsw,
    choose_setting,
    exact_search,
    filtered_search,
    hnsw_bytes,
    hnsw_search,
    load_vectors,
    plot_tradeoff,
    sweep_builds,
    sweep_ef_search,
)
from labkit.evaluation.scalebench import run_bench
from labkit.evaluation.significance import (
    Interval,
    QueriesNeeded,
    bootstrap_ci,
    compare_modes,
    detection_power,
    min_discordant,
    paired_test,
    per_query_scores,
    queries_needed,
)
from labkit.evaluation.spans import ChunkScores, SpanQuery, TokenIndex, load_span_queries, score_chunks, span_scores
from labkit.evaluation.sql_accuracy import (
    GoldCheck,
    SqlAccuracy,
    SqlQuestion,
    check_against_gold,
    evaluate_sql_agent,
    load_sql_questions,
    same_result,
    sql_accuracy,
)
from labkit.evaluation.supervisor_eval import (
    check_sql_step,
    evaluate_supervisor,
    faithful_answer,
    lab_secrets,
    last_sql_call,
    rows_changed,
    summarise_supervisor,
    table_rows,
)
from labkit.evaluation.supervisor_questions import load_supervisor_questions
from labkit.evaluation.synthetic import (
    REALISTIC,
    SYNTHETIC,
    Shape,
    compare_structure,
    fit_realistic,
    make_queries,
    make_realistic,
    make_vectors,
    misfit,
    synthetic_set,
)
from labkit.evaluation.tool_choice import (
    AgentQuestion,
    choice_is_correct,
    evaluate_agent,
    evaluate_tool_choice,
    load_agent_questions,
)
from labkit.evaluation.vectorshape import (
    Structure,
    measure_structure,
    neighbour_profile,
    pca_dimension,
    twonn_dimension,
)
from labkit.models.availability import ModelMissing, check_models
from labkit.models.chat import Reply, ask_model, split_thinking
from labkit.models.embedding import FORMATS, document_text, embed_documents, embed_query, model_family, query_text
from labkit.models.relevance import (
    JUDGE_INSTRUCT,
    JUDGE_SYSTEM,
    JudgeUnavailable,
    judge_messages,
    judge_relevance,
    yes_probability,
)
from labkit.models.tokenizer import E5_TOKEN_LIMIT, model_tokens, token_limit
from labkit.retrieval.branches.bm25 import BM25_SQL, bm25_scores, fetch_postings, query_lexemes, search_bm25
from labkit.retrieval.branches.codes import (
    CODE_KEYS_DDL,
    CODE_KEYS_FUNCTION,
    CODE_PATTERN,
    code_keys,
    codes_sql,
    ensure_code_index,
    search_codes,
)
from labkit.retrieval.branches.contextual import search_contextual, search_contextual_lexical
from labkit.retrieval.branches.expanded import (
    EXPAND_COMMAND,
    documents_without_questions,
    search_expanded,
    search_expanded_lexical,
    sync_expanded_vectors,
)
from labkit.retrieval.branches.fielded import FIELDED_VECTORS, fielded_params, search_fielded
from labkit.retrieval.branches.finer import finer_lab, search_finer
from labkit.retrieval.branches.latent import (
    LatentUnavailable,
    encode_latent,
    ensure_latent_terms,
    latent_problem,
    search_latent,
)
from labkit.retrieval.branches.lexical import NORMALIZATIONS, TS_CONFIG, lexical_sql, query_words, search_lexical
from labkit.retrieval.branches.prf import PrfConfig, prf_branch, search_vector_prf
from labkit.retrieval.branches.registry import BRANCHES, Branch, CorpusNeed, Need, Stored
from labkit.retrieval.branches.vector import ITERATIVE_SCAN, embeddable, search_vector, vector_sql
from labkit.retrieval.contexts import ContextReport, context_lines, ensure_contexts, parse_context
from labkit.retrieval.documents import collapse, document_hits, parents
from labkit.retrieval.filters import Filters, query_filters
from labkit.retrieval.fusion import (
    HYBRID_SQL,
    RRF_K,
    FusionConfig,
    SearchMode,
    fuse,
    rrf,
    search_hybrid,
    search_hybrid_sql,
)
from labkit.retrieval.heads import head_texts, search_texts, vector_agreement
from labkit.retrieval.modes import (
    ALIASED_BM25,
    COVERAGE_DEPTH,
    COVERAGE_DEPTHS,
    DEFAULT_FUSION,
    DEFAULT_PRF,
    HYBRID_CODES,
    HYBRID_CODES_ALIASES,
    HYBRID_CODES_ALIASES_FINER,
    HYBRID_CONTEXTUAL,
    KB_MODES,
    MODE_INFO,
    SEARCH_MODES,
    ModeInfo,
    all_modes,
    available_modes,
    corrected,
    covered,
    judged,
    mode_misfit,
    mode_name,
    mode_needs,
    mode_problem,
    modes_for,
    modes_taught,
    search_hybrid_bm25,
    search_hybrid_expanded,
    search_hybrid_latent,
    search_hybrid_prf,
    skipped_note,
    unavailable_modes,
)
from labkit.retrieval.pipeline import Pipeline, search_fused
from labkit.retrieval.questions import ExpansionReport, ensure_expansion, parse_questions
from labkit.retrieval.rerankers.coverage import Coverage, covered_lexemes, rerank_by_coverage
from labkit.retrieval.rerankers.judge import (
    JUDGE_DEPTH,
    KB_SHIPPED_SCORES,
    Judge,
    corpus_text,
    judge_scores,
    rerank_by_judge,
    shipped_models,
)
from labkit.retrieval.rewriters.aliases import (
    Aliases,
    aliases_table,
    ensure_aliases,
    expand_aliases,
    mine_aliases,
    synonym_file_problem,
    synonym_sample,
)
from labkit.retrieval.rewriters.spelling import Correction, Spelling, correct_query, from_latin_layout
from labkit.retrieval.spec import SpecError, pipeline_from_spec, pipeline_spec
from labkit.services.setup import closed_port_chat, open_lab, setup
from labkit.services.stack import StackError, down, ensure_stack, status, up
from labkit.store.connection import DatabaseUnavailable, connect
from labkit.store.embedcache import EMBEDDING_STATS, as_array, cached_embeddings, cached_query_embedding
from labkit.store.loading import ensure_corpus
from labkit.store.scorecache import SCORE_STATS
from labkit.store.shop.loading import ShopLoadReport, ensure_shop
from labkit.store.shop.reader import QueryResult, ReaderUnavailable, open_reader, run_select
from labkit.store.vectors import lab_vector_table, vector_table

__all__ = [
    # the edge: settings, services, the lab context
    "Settings", "get_settings", "lab_home", "normalize_host", "NO_TOOLS_MODEL", "LabError", "StackError",
    "up", "down", "status", "ensure_stack", "Lab", "setup", "open_lab", "ModelMissing", "check_models",
    # data: corpora as values, the news corpus' codes and files
    "Corpus", "Field", "CORPORA", "DEFAULT_CORPUS", "NEWS", "corpus_named", "KB", "KB_DOCUMENTS", "KB_CHUNKING", "KB_FINE", "KB_FINE_CHUNKING",
    "Chunk", "ChunkSpec", "chunked", "fixed_chunks", "sentence_chunks", "heading_chunks", "span_overlap", "collapse",
    "document_hits", "coverage_sweep", "answer_spans",
    "COMPANIES", "TONES", "TOPICS", "TOPIC_NAMES", "TOPIC_GLOSSES", "TOPIC_IPTC", "TOPIC_RUBRICS", "TONE_NAMES", "DATA_DIR", "CORPUS_PATH", "QUERIES_PATH", "HELDOUT_PATH",
    "RETRIEVAL_PATH", "SPLITS", "query_kinds", "KIND_NAMES", "kind_name",
    "DataError", "Doc", "LabelledQuery", "load_corpus", "load_queries",
    # database and embeddings
    "DatabaseUnavailable", "LoadReport", "connect", "ensure_corpus", "vector_table", "lab_vector_table",
    "EMBEDDING_STATS", "as_array", "cached_embeddings", "cached_query_embedding",
    "document_text", "query_text", "embed_documents", "embed_query", "model_family", "FORMATS",
    # search
    "Hit", "ids", "TS_CONFIG", "query_words", "lexical_sql", "search_lexical",
    "embeddable", "vector_sql", "search_vector",
    "BM25_SQL", "bm25_scores", "fetch_postings", "query_lexemes", "search_bm25",
    "encode_latent", "ensure_latent_terms", "search_latent", "latent_problem", "LatentUnavailable",
    "RRF_K", "BRANCHES", "SearchMode", "FusionConfig", "DEFAULT_FUSION", "HYBRID_SQL", "rrf", "fuse",
    "search_fused", "search_hybrid", "search_hybrid_sql", "search_hybrid_bm25", "search_hybrid_latent",
    "ensure_expansion", "ExpansionReport", "parse_questions", "search_expanded", "search_expanded_lexical",
    "EXPAND_COMMAND", "documents_without_questions",
    "sync_expanded_vectors", "search_hybrid_expanded", "PrfConfig", "DEFAULT_PRF", "search_vector_prf",
    "search_hybrid_prf", "prf_branch", "FIELDED_VECTORS", "fielded_params", "search_fielded",
    "Correction", "correct_query", "corrected", "from_latin_layout",
    "COVERAGE_DEPTH", "COVERAGE_DEPTHS", "covered", "covered_lexemes", "rerank_by_coverage",
    "Branch", "Need", "Pipeline", "Spelling", "Coverage", "SpecError", "pipeline_spec", "pipeline_from_spec",
    "JUDGE_DEPTH", "judged", "judge_scores", "rerank_by_judge", "shipped_models", "KB_SHIPPED_SCORES", "Judge", "judge_relevance", "yes_probability",
    "JudgeUnavailable", "SCORE_STATS", "judged_pairs", "separation", "BENCH_DEPTHS", "bench_pairs", "measure_judge_cost",
    "JUDGE_SYSTEM", "JUDGE_INSTRUCT", "judge_messages", "corpus_text", "KB_ARTICLE_RECALL_AT_10",
    "Stored", "SEARCH_MODES", "available_modes", "unavailable_modes", "mode_problem", "skipped_note",
    "ModeInfo", "MODE_INFO", "mode_name", "modes_taught", "mode_needs",
    # the knowledge base's chunks (15_kb_chunking)
    "KB_QUERIES", "KB_CONTEXTS", "CHUNKERS", "sections", "word_tokens", "cut_offset", "head_of",
    "E5_TOKEN_LIMIT", "token_limit", "model_tokens", "head_texts", "search_texts", "vector_agreement",
    "SpanQuery", "ChunkScores", "TokenIndex", "load_span_queries", "span_scores", "score_chunks",
    "FULL_GRID", "SweepResult", "sweep_chunking", "pick_cut", "sweep_frame", "NORMALIZATIONS",
    "ContextReport", "ensure_contexts", "context_lines", "parse_context", "search_contextual", "search_contextual_lexical",
    "HYBRID_CONTEXTUAL",
    # the knowledge base's codes, abbreviations and filters (16_kb_codes)
    "CODE_KEYS_FUNCTION", "CODE_KEYS_DDL", "CODE_PATTERN", "code_keys", "codes_sql", "ensure_code_index", "search_codes",
    "finer_lab", "search_finer",
    "CorpusNeed", "parents", "document_hits", "ITERATIVE_SCAN", "Aliases", "aliases_table", "ensure_aliases", "expand_aliases", "mine_aliases", "synonym_file_problem", "synonym_sample",
    "Filters", "query_filters", "ALIASED_BM25", "HYBRID_CODES", "HYBRID_CODES_ALIASES", "HYBRID_CODES_ALIASES_FINER", "KB_MODES", "all_modes",
    "modes_for", "mode_misfit", "CopyReport", "ScanResult", "copy_vectors", "filtered_scan",
    # evaluation, tuning, timing
    "METRICS", "recall_at_k", "reciprocal_rank", "ndcg_at_k", "metric_value", "mean_metric",
    "EvalReport", "evaluate", "compare_hybrid_latency", "time_modes",
    "branch_rankings", "TuningResult", "default_grid", "weight_grid", "tune_fusion", "DepthResult",
    "pick_coverage_depth",
    "Interval", "bootstrap_ci", "paired_test", "per_query_scores", "compare_modes", "Supplied", "supplied_words",
    "QueriesNeeded", "min_discordant", "detection_power", "queries_needed",
    "Scores", "Standing", "score_pipeline", "scores_of", "leaderboard",
    # scale
    "make_vectors", "make_queries", "load_vectors", "exact_search", "build_hnsw", "hnsw_search", "hnsw_bytes",
    "sweep_ef_search", "sweep_builds", "choose_setting", "filtered_search", "plot_tradeoff", "run_bench",
    "make_realistic", "Shape", "REALISTIC", "SYNTHETIC", "synthetic_set", "compare_structure", "fit_realistic", "misfit",
    "Structure", "measure_structure", "twonn_dimension", "pca_dimension", "neighbour_profile",
    "REAL_LABEL", "RealVectors", "kb_chunks", "real_vectors",
    # agent
    "DEFAULT_TOOLS", "Company", "Tone", "Topic", "ToolResult", "call_tool", "format_result",
    "get_metrics", "search_articles", "tool_schema",
    "Reply", "ask_model", "split_thinking", "FINAL_PROMPT", "REPLY_PROMPT", "SYSTEM_PROMPT", "FakeStubbornChat", "Plan",
    "plan", "check_reply", "route_calls", "drop_ungrounded", "check_scope", "Scope", "corpus_scope", "strip_markup",
    "Agent", "AgentResult", "open_checkpointer", "planner_context",
    "AgentQuestion", "choice_is_correct", "evaluate_tool_choice", "load_agent_questions", "evaluate_agent",
    "check_answer", "cited_ids", "faithfulness_rate",
    # the shop and its SQL agent
    "ShopData", "read_products", "validate_shop", "generate_shop", "shop_data", "ShopLoadReport", "ensure_shop",
    "QueryResult", "ReaderUnavailable", "open_reader", "run_select", "SqlRefused", "check_select", "describe_schema",
    "SqlAgent", "SqlResult", "sql_messages", "column_hint", "unknown_values", "unasked_values", "miscounted_orders", "ROUTES", "DocumentAgent", "ANSWERABLE", "RouteDecision", "Supervisor", "SupervisorResult",
    "REACH", "ROUTE_BIAS", "route_bias", "BothParts", "split_both", "cut_runaway", "asks_to_change", "refusal_rule", "pick_route", "reach", "route_name", "route_scores", "closed_port_chat", "evaluate_supervisor", "last_sql_call", "check_sql_step",
    "faithful_answer", "lab_secrets", "rows_changed", "summarise_supervisor", "table_rows", "load_supervisor_questions", "next_step_without_progress_rule", "normalise_sql", "stop_rule",
    "FakeRepeatingSqlChat",
    "SqlQuestion", "load_sql_questions", "same_result", "GoldCheck", "check_against_gold", "evaluate_sql_agent",
    "SqlAccuracy", "sql_accuracy",
    # exercises
    "CheckResult", "ready", "check_chunker", "check_entity_tool", "check_model_table", "check_weighted_rrf", "exercise_questions",
    "check_sql_retry",
    # the challenge
    "ChallengeCheck", "check_challenge", "CERTIFICATE_RECALL", "CHALLENGE_TOP_K", "leaderboard_frame",
    # the course
    "course_map", "course_map_markdown", "mode_glossary",
    # texts for people
    "shorten", "plural", "count", "model_size", "say",
]  # fmt: skip
