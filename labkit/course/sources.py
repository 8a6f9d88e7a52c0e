"""The course's source articles, each cited one way everywhere (a notebook's «Литература» holds its line).

The articles are not part of the repository (their text is not ours to ship): a notebook names
one by title, says what it retells and where to find that, and calls it «статья-первоисточник» in
prose. ``SOURCE_ARTICLE`` is the news track's (lessons 00–13, 30), ``KB_ARTICLE`` the knowledge-base
track's (15–18), ``AGENTS_ARTICLE`` the supervisor's (19–21). ``tests/test_sources.py`` checks every
notebook against these lines.
"""

from __future__ import annotations

__all__ = ["SOURCE_TITLE", "SOURCE_NAME", "SOURCE_ARTICLE", "KB_TITLE", "KB_ARTICLE", "AGENTS_TITLE", "AGENTS_ARTICLE",
           "ARTICLES", "KB_ARTICLE_RECALL_AT_10"]

SOURCE_TITLE = "Hybrid Search RAG на pgvector и Ollama с LangGraph-агентом без облака"
SOURCE_NAME = "статья-первоисточник"  # the one name prose uses for it
SOURCE_ARTICLE = (
    f"Статья-первоисточник курса: «{SOURCE_TITLE}» (в репозиторий не входит). Она разбирает пост Knez "
    "«Как построить self-hosted RAG-систему с LangGraph-агентом на локальных LLM» на Хабре: "
    "[найти на habr.com](https://habr.com/ru/search/?q=self-hosted%20RAG%20LangGraph%20%D0%BB%D0%BE%D0%BA%D0%B0%D0%BB%D1%8C%D0%BD%D1%8B%D1%85%20LLM)."
)

KB_TITLE = "Гибридный поиск BM25 + эмбеддинги для базы знаний"
KB_ARTICLE = (
    f"Статья-первоисточник трека базы знаний: «{KB_TITLE}» (в репозиторий не входит). "
    "Она разбирает, где ломаются чистый BM25 и чистые эмбеддинги на базе знаний магазина, гибрид с RRF "
    "на PostgreSQL и Elasticsearch, нарезку длинных документов, артикулы, сокращения, фильтры и re-ranker."
)

AGENTS_TITLE = "Интеграция мульти-агентного ядра: связка LangGraph, LangChain и локальной инфраструктуры Ollama"
AGENTS_ARTICLE = (
    f"Статья-первоисточник уроков о супервизоре: «{AGENTS_TITLE}» (в репозиторий не входит). Она строит "
    "глобальное состояние графа, супервизор над агентами документов и SQL, исправление ошибок инструментов "
    "и человека в контуре."
)

ARTICLES = {SOURCE_TITLE: SOURCE_ARTICLE, KB_TITLE: KB_ARTICLE, AGENTS_TITLE: AGENTS_ARTICLE}
"""Each article's title -> the one line that cites it."""

# The knowledge-base article's Recall@10 «в типовом проекте на русскоязычной базе знаний» (its section on evaluation),
# by the course's mode of the same recipe; the last one is its hybrid with a cross-encoder re-ranker. Shown in 17_kb_rerank.
KB_ARTICLE_RECALL_AT_10 = {"bm25": (0.60, 0.72), "vector": (0.64, 0.78), "hybrid_bm25": (0.82, 0.90), "+ reranker": (0.88, 0.94)}
