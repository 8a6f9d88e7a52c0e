"""labkit: the code the notebooks of the hybrid-search RAG lab call.

Each module holds one idea and names the notebook that teaches it.
"""

from .settings import Settings, get_settings, lab_home
from .stack import StackError, down, ensure_stack, status, up
from .embedding import document_text, embed_documents, embed_query, query_text
from .tools import (ALL_TOOLS, DEFAULT_TOOLS, Company, Tone, Topic, ToolResult, call_tool, format_result,
                    get_metrics, search_articles, search_by_entity, tool_schema)
from .planner import FINAL_PROMPT, SYSTEM_PROMPT, FakeStubbornChat, Plan, plan
from .agent import Agent, AgentResult, open_checkpointer, planner_context
from .agent_eval import AgentQuestion, choice_is_correct, evaluate_tool_choice, load_agent_questions
from .checks import CheckResult, check_entity_tool, check_model_table, check_weighted_rrf
from .corpus import COMPANIES, TONES, TOPICS, DataError, Doc, LabelledQuery, load_corpus, load_queries
from .ranking import Hit, ids
from .db import DatabaseUnavailable, LoadReport, connect, ensure_corpus, vector_table
from .embedcache import EMBEDDING_STATS
from .lexical import query_words, search_lexical
from .vector import search_vector
from .fusion import rrf, search_hybrid, search_hybrid_sql
from .metrics import ndcg_at_k, recall_at_k, reciprocal_rank
from .modes import SEARCH_MODES
from .evaluation import EvalReport, compare_hybrid_latency, evaluate
from .bm25 import bm25_scores, fetch_postings, query_lexemes, search_bm25
from .latent import encode_latent, ensure_latent_terms, search_latent
from .improved import (DEFAULT_FUSION, HELDOUT_PATH, FusionConfig, branch_rankings, search_fused, search_hybrid_bm25,
                       search_hybrid_latent, time_modes, tune_fusion)
from .scale import build_hnsw, exact_search, filtered_search, hnsw_search, load_vectors, make_queries, make_vectors, sweep_ef_search

__all__ = [
    "Settings",
    "get_settings",
    "lab_home",
    "StackError",
    "down",
    "ensure_stack",
    "status",
    "up",
    "document_text",
    "embed_documents",
    "embed_query",
    "query_text",
    "ALL_TOOLS",
    "DEFAULT_TOOLS",
    "Company",
    "Tone",
    "Topic",
    "ToolResult",
    "call_tool",
    "format_result",
    "get_metrics",
    "search_articles",
    "search_by_entity",
    "tool_schema",
    "FINAL_PROMPT",
    "SYSTEM_PROMPT",
    "Agent",
    "AgentResult",
    "Plan",
    "open_checkpointer",
    "planner_context",
    "FakeStubbornChat",
    "plan",
    "AgentQuestion",
    "choice_is_correct",
    "evaluate_tool_choice",
    "load_agent_questions",
    "CheckResult",
    "check_entity_tool",
    "check_model_table",
    "check_weighted_rrf",
    "COMPANIES",
    "TONES",
    "TOPICS",
    "DataError",
    "Doc",
    "LabelledQuery",
    "load_corpus",
    "load_queries",
    "Hit",
    "ids",
    "DatabaseUnavailable",
    "LoadReport",
    "connect",
    "ensure_corpus",
    "vector_table",
    "EMBEDDING_STATS",
    "query_words",
    "search_lexical",
    "search_vector",
    "rrf",
    "search_hybrid",
    "search_hybrid_sql",
    "ndcg_at_k",
    "recall_at_k",
    "reciprocal_rank",
    "SEARCH_MODES",
    "EvalReport",
    "compare_hybrid_latency",
    "evaluate",
    "bm25_scores",
    "fetch_postings",
    "query_lexemes",
    "search_bm25",
    "search_hybrid_bm25",
    "encode_latent",
    "ensure_latent_terms",
    "search_latent",
    "DEFAULT_FUSION",
    "HELDOUT_PATH",
    "FusionConfig",
    "branch_rankings",
    "search_fused",
    "search_hybrid_latent",
    "time_modes",
    "tune_fusion",
    "build_hnsw",
    "exact_search",
    "filtered_search",
    "hnsw_search",
    "load_vectors",
    "make_queries",
    "make_vectors",
    "sweep_ef_search",
]
