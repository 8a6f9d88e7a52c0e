"""The news corpus: 30 short Russian news items full of homonyms, and its labelled queries (taught in 01_corpus).

The one module that names the news table and its files: everything else reads them from the
corpus a lab carries (``lab.corpus``, a ``labkit.core.corpus.Corpus``). Each item has a
company (or none), a tone and a topic; the topics' and tones' codes get Russian names here.
"""

from __future__ import annotations

from typing import Any

from labkit.core.corpus import DATA_DIR, Corpus, DataError, Field

__all__ = [
    "NEWS",
    "Doc",
    "TS_CONFIG",
    "CORPUS_PATH",
    "QUERIES_PATH",
    "HELDOUT_PATH",
    "RETRIEVAL_PATH",
    "EXPANSION_PATH",
    "TOPICS",
    "COMPANIES",
    "TONES",
    "TOPIC_NAMES",
    "TOPIC_GLOSSES",
    "TONE_NAMES",
]

CORPUS_PATH = DATA_DIR / "corpus.jsonl"
QUERIES_PATH = DATA_DIR / "queries.jsonl"  # the 12 labelled queries (05_evaluation)
HELDOUT_PATH = DATA_DIR / "heldout.jsonl"  # written after the corpus, never used for tuning (11_beyond_rrf)
# Larger labelled set with a "kind" and a fixed "split" per query: tune on "tune", report on "report" only.
RETRIEVAL_PATH = DATA_DIR / "retrieval.jsonl"
# The search questions the default chat model wrote for each document (labkit.retrieval.questions), shipped so a
# run need not spend minutes of chat-model time on them; a changed document or another model still generates its own.
EXPANSION_PATH = DATA_DIR / "news_expansion.jsonl"

# What a person reads instead of the codes (in answers, tables and plots).
TOPIC_NAMES: dict[str, str] = {
    "commodities": "сырьё и металлы",
    "energy": "энергетика",
    "finance": "финансы",
    "incident": "происшествия",
    "monetary": "денежно-кредитная политика",
    "realty": "недвижимость",
    "retail": "розничная торговля",
    "sport": "спорт",
    "tech": "технологии",
}
# What each topic holds, in the words a reader uses: shown to the agent's model beside the codes
# (labkit.agent.tools) and embedded with each document by the fielded search branch (labkit.retrieval.branches.fielded).
TOPIC_GLOSSES: dict[str, str] = {
    "commodities": "сырьё: нефть, золото, серебро, металлы, добыча",
    "energy": "энергетика: электроэнергия",
    "finance": "финансы: банки, прибыль компаний, курс рубля, облигации",
    "incident": "происшествия: кибератаки, сбои",
    "monetary": "денежно-кредитная политика: ключевая ставка ЦБ",
    "realty": "недвижимость: жильё, квартиры",
    "retail": "розничная торговля: магазины, ритейлеры",
    "sport": "спорт: соревнования, медали, матчи",
    "tech": "технологии: нейросети, смартфоны, IT",
}
TONE_NAMES: dict[str, str] = {"negative": "негативная", "neutral": "нейтральная", "positive": "позитивная"}

NEWS = Corpus(
    name="news",
    title="новости",
    table="news",
    fields=(
        Field("company", "компания", required=False),
        Field("tone", "тональность", names=TONE_NAMES),
        Field("topic", "тема", names=TOPIC_NAMES, glosses=TOPIC_GLOSSES),
    ),
    source=CORPUS_PATH,
    queries=QUERIES_PATH,
    heldout=HELDOUT_PATH,
    retrieval=RETRIEVAL_PATH,
    expansion=EXPANSION_PATH,
    text_column="body",
    text_field="text",
    ts_config="russian",
    fielded=("topic", "company"),  # «<body>. Тема: <the topic's gloss>. Компания: <company>.»
    lexicon=("company",),
    # Named before names were derived from the corpus; students' databases hold them, so they stay.
    fixed_names={"rows": "lab_corpus_rows", "vector_tables": "vector_tables"},
)
TS_CONFIG = NEWS.ts_config  # the text-search configuration of the news corpus (02_lexical)
Doc = NEWS.record  # Doc(id, text, company, tone, topic)
Doc.__module__ = __name__


def _values(name: str) -> set[Any]:
    return {doc._asdict()[name] for doc in _DOCS} - {None}


_DOCS = NEWS.documents()
TOPICS: tuple[str, ...] = tuple(sorted(_values("topic")))
COMPANIES: tuple[str, ...] = tuple(sorted(_values("company")))
TONES: tuple[str, ...] = tuple(sorted(_values("tone")))

_unnamed = (set(TOPICS) - set(TOPIC_NAMES)) | (set(TOPICS) - set(TOPIC_GLOSSES)) | (set(TONES) - set(TONE_NAMES))
if _unnamed:  # a new code in the data must get a Russian name here
    raise DataError(f"no Russian name for {sorted(_unnamed)}: add it to TOPIC_NAMES/TOPIC_GLOSSES/TONE_NAMES "
                    "in labkit/core/corpora/news.py")
