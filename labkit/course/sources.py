"""The course's source article, cited one way everywhere (every notebook's «Литература» holds ``SOURCE_ARTICLE``).

The article is not part of the repository (its text is not ours to ship): a notebook names it by
title, says what it retells and where to find that, and calls it «статья-первоисточник» in prose.
``tests/test_sources.py`` checks every notebook against this line.
"""

from __future__ import annotations

__all__ = ["SOURCE_TITLE", "SOURCE_NAME", "SOURCE_ARTICLE"]

SOURCE_TITLE = "Hybrid Search RAG на pgvector и Ollama с LangGraph-агентом без облака"
SOURCE_NAME = "статья-первоисточник"  # the one name prose uses for it
SOURCE_ARTICLE = (
    f"Статья-первоисточник курса: «{SOURCE_TITLE}» (в репозиторий не входит). Она разбирает пост Knez "
    "«Как построить self-hosted RAG-систему с LangGraph-агентом на локальных LLM» на Хабре: "
    "[найти на habr.com](https://habr.com/ru/search/?q=self-hosted%20RAG%20LangGraph%20%D0%BB%D0%BE%D0%BA%D0%B0%D0%BB%D1%8C%D0%BD%D1%8B%D1%85%20LLM)."
)
