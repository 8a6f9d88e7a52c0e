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
    "TOPIC_IPTC",
    "TOPIC_RUBRICS",
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
# What each topic holds, in the words a reader uses: shown to the agent's model beside the codes (labkit.agent.tools).
# Written with the news and the seed queries in view, they repeat those queries' words («ключевая ставка ЦБ»,
# «медали»): fine for the agent, which is scored on other questions, but not for a search branch scored on the
# seed queries (11_beyond_rrf measures the overlap). The fielded branch embeds TOPIC_RUBRICS instead.
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
# Each topic's place in an outside taxonomy, IPTC Media Topics (https://iptc.org/standards/media-topics/, the news
# industry's subject vocabulary): the Media Topic it maps to, with its English label and its parent's. Chosen from
# the taxonomy's labels by what each topic is (its Russian name above), not from any labelled query.
TOPIC_IPTC: dict[str, tuple[str, str]] = {
    "commodities": ("medtop:20000386", "market and exchange > commodity market"),
    "energy": ("medtop:20000256", "economic sector > energy and resource"),
    "finance": ("medtop:20000271", "economic sector > financial and business service"),
    "incident": ("medtop:03000000", "disaster, accident and emergency incident"),
    "monetary": ("medtop:20000379", "macro economics > monetary policy"),
    "realty": ("medtop:20000241", "construction and property > real estate"),
    "retail": ("medtop:20000252", "economic sector > retail"),
    "sport": ("medtop:15000000", "sport"),
    "tech": ("medtop:20000225", "economic sector > computing and information technology"),
}
# The same labels in Russian (our translation, word for word): what the fielded search branch embeds with each news
# item (labkit.retrieval.branches.fielded), so the rubric says what the taxonomy says and nothing a query says.
TOPIC_RUBRICS: dict[str, str] = {
    "commodities": "рынки и биржи: товарно-сырьевой рынок",
    "energy": "отрасли экономики: энергетика и ресурсы",
    "finance": "отрасли экономики: финансовые и деловые услуги",
    "incident": "катастрофы, аварии и чрезвычайные происшествия",
    "monetary": "макроэкономика: денежно-кредитная политика",
    "realty": "строительство и недвижимость: недвижимость",
    "retail": "отрасли экономики: розничная торговля",
    "sport": "спорт",
    "tech": "отрасли экономики: вычислительная техника и информационные технологии",
}
TONE_NAMES: dict[str, str] = {"negative": "негативная", "neutral": "нейтральная", "positive": "позитивная"}

NEWS = Corpus(
    name="news",
    title="новости",
    table="news",
    fields=(
        Field("company", "компания", required=False),
        Field("tone", "тональность", names=TONE_NAMES),
        Field("topic", "тема", names=TOPIC_NAMES, glosses=TOPIC_RUBRICS),
    ),
    source=CORPUS_PATH,
    queries=QUERIES_PATH,
    heldout=HELDOUT_PATH,
    retrieval=RETRIEVAL_PATH,
    expansion=EXPANSION_PATH,
    text_column="body",
    text_field="text",
    ts_config="russian",
    fielded=("topic", "company"),  # «<body>. Тема: <the topic's IPTC rubric>. Компания: <company>.»
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

_unnamed = ({t for t in TOPICS for names in (TOPIC_NAMES, TOPIC_GLOSSES, TOPIC_IPTC, TOPIC_RUBRICS) if t not in names}
            | (set(TONES) - set(TONE_NAMES)))
if _unnamed:  # a new code in the data must get a Russian name here
    raise DataError(f"no Russian name for {sorted(_unnamed)}: add it to TOPIC_NAMES/TOPIC_GLOSSES/TOPIC_IPTC/"
                    "TOPIC_RUBRICS/TONE_NAMES in labkit/core/corpora/news.py")
