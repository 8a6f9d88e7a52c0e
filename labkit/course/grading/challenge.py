"""The challenge in a grading run (``./run.sh grade DIR --hidden FILE``): hidden queries, scoring, the class leaderboard.

The hidden file is the instructor's, kept outside the repository, in the format of
``labkit/data/retrieval.jsonl`` (README, «The challenge»): one JSON object a line with ``query``
and ``relevant`` (ids of the corpus' documents); other fields are ignored. It is read and
checked before any service is touched. Its queries are searched only on the grader's own
database (``challenge_setup``): the template every student's database is copied from never
sees them, so no student's kernel can read them from its embedding cache.

``build_leaderboard`` ranks the students' scored pipelines together with the course's plain
hybrid as a reference row (``labkit.evaluation.leaderboard``), marks who reached the certificate
threshold, and says in Russian what the number of hidden queries can and cannot tell
(``labkit.evaluation.significance.queries_needed``, the method of 13_significance).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from labkit.core.context import Lab
from labkit.core.corpora import load_corpus, load_queries
from labkit.core.corpora.news import HELDOUT_PATH, RETRIEVAL_PATH
from labkit.core.corpus import DataError, LabelledQuery
from labkit.core.text import count
from labkit.course.checks.challenge import BASELINE, NOTEBOOK, TOP_K, baseline_pipeline, certificate_line
from labkit.course.grading.grader import REFERENCE, ChallengeSetup, starter_parameters
from labkit.course.grading.results import Leaderboard, LeaderRow, StudentGrade
from labkit.evaluation.leaderboard import Scores, leaderboard, score_pipeline
from labkit.evaluation.significance import queries_needed
from labkit.retrieval.branches.registry import BRANCHES
from labkit.retrieval.branches.vector import embeddable
from labkit.retrieval.pipeline import Pipeline
from labkit.retrieval.questions import ensure_expansion
from labkit.retrieval.rewriters.spelling import Spelling
from labkit.store.embedcache import cached_query_embedding

__all__ = ["REFERENCE_LABEL", "ALPHA", "POWER", "load_hidden", "course_overlap", "warm_challenge", "challenge_setup",
           "build_leaderboard"]

REFERENCE_LABEL = "простой гибрид курса (точка отсчёта)"
ALPHA = 0.05  # the paired test's threshold in the leaderboard's sentences
POWER = 0.8  # the share of hidden sets on which a real gap should be found (queries_needed)


def load_hidden(path: str | Path, known_ids: Iterable[int] | None = None) -> list[LabelledQuery]:
    """The instructor's hidden queries, checked: the format of retrieval.jsonl, ids of the corpus, no query twice.

    A problem is a DataError naming file:line (the command reports it in one line, before anything runs).
    """
    queries = load_queries(path)
    known = set(known_ids) if known_ids is not None else {doc.id for doc in load_corpus()}
    seen: dict[str, int] = {}
    for number, query in enumerate(queries, start=1):
        unknown = sorted(set(query.relevant) - known)
        if unknown:
            raise DataError(f"{path}: query {number} ({query.query!r}) lists ids that are not in the corpus: {unknown}")
        if query.query in seen:
            raise DataError(f"{path}: query {number} repeats query {seen[query.query]} ({query.query!r})")
        seen[query.query] = number
    return queries


def course_overlap(hidden: Sequence[LabelledQuery]) -> list[str]:
    """The hidden queries that are also among the course's labelled queries (students have seen those)."""
    shipped = {q.query.casefold().strip() for path in (None, HELDOUT_PATH, RETRIEVAL_PATH) for q in load_queries(path)}
    return [q.query for q in hidden if q.query.casefold().strip() in shipped]


def warm_challenge(lab: Lab) -> list[str]:
    """Fill what the challenge notebook searches in `lab`'s database: its labelled queries' embeddings, every branch's table.

    Run on the template, so no student's copy and not the grader embeds them again: the queries of
    retrieval.jsonl (the notebook's tune and report splits) as typed and as ``Spelling`` corrects them,
    the shipped expansion, and each branch's derived table (fielded and expanded vectors, latent terms
    where they run and the corpus has their fields). A student's kernel then asks the shared model server for nothing but their own
    new queries. Returns the branches warmed.
    """
    queries = load_queries(RETRIEVAL_PATH)
    spelling = Spelling()
    texts = {q.query for q in queries} | {spelling(lab, q.query) for q in queries}
    for text in sorted({embeddable(text) for text in texts}):
        cached_query_embedding(lab, text)
    ensure_expansion(lab, generate=False)
    warmed = []
    for name, branch in BRANCHES.items():
        if branch.problem() is None and branch.misfit(lab.corpus) is None:
            branch(lab, queries[0].query, 1)
            warmed.append(name)
    return warmed


def challenge_setup(reference_lab: Lab, hidden: Sequence[LabelledQuery], reference: Path = REFERENCE) -> ChallengeSetup:
    """The challenge as the grader runs it: the starter's parameters, and scoring on the hidden queries in `reference_lab`."""
    parameters, timeout = starter_parameters(NOTEBOOK, reference)

    def score(pipeline: Pipeline) -> Scores:
        return score_pipeline(reference_lab, pipeline, hidden, TOP_K)

    return ChallengeSetup(parameters, timeout, score)


def _gaps(rows: Sequence[LeaderRow]) -> str:
    """Which neighbouring places the paired test tells apart, in Russian."""
    real = [f"{row.place}-е место от {below.place}-го (p = {row.p_next:.3f})" for row, below in zip(rows, rows[1:])
            if row.p_next is not None and row.p_next < ALPHA and row.place != below.place]
    if not real:
        return (f"Ни один отрыв между соседними строками не проходит парный тест (p < {ALPHA}): порядок в таблице — "
                "ещё не доказанная разница.")
    return f"Отрыв проходит парный тест (p < {ALPHA}): " + "; ".join(real) + ". Остальные соседние строки в пределах шума."


def _needed(top: Scores, base: Scores, queries: int) -> tuple[str, dict[str, Any] | None]:
    """How many hidden queries a gap like the leader's over the reference row needs, in Russian, and as data."""
    needed = queries_needed(top.recall, base.recall, ALPHA, POWER)
    differ = (f"Лучший конвейер класса и простой гибрид курса разошлись на "
              f"{count(needed.discordant, 'запросе', 'запросах', 'запросах')} из {needed.observed}")
    data = {**needed._asdict(), "alpha": ALPHA, "target_power": POWER}
    if needed.queries is None:
        if needed.discordant == 0:
            return f"{differ}: по этим запросам их не различить.", data
        return (f"{differ}; чтобы парный тест различал такую разницу в {POWER:.0%} случаев, не хватило бы и "
                "тысяч запросов: для рейтинга она неотличима от шума.", data)
    verdict = ("этого хватает, чтобы такая разница была больше, чем шум." if queries >= needed.queries else
               f"у вас {count(queries, 'скрытый запрос', 'скрытых запроса', 'скрытых запросов')}: рейтинг во многом "
               "шум, держите в уме интервалы.")
    return (f"{differ}. Парный тест различает разницу лишь при {count(needed.min_discordant, 'расходящемся запросе', 'расходящихся запросах', 'расходящихся запросах')} "
            f"и больше; бутстреп по этим парам (метод урока 13) даёт, что в {POWER:.0%} случаев её находит набор от "
            f"{count(needed.queries, 'скрытого запроса', 'скрытых запросов', 'скрытых запросов')}; {verdict}", data)


def build_leaderboard(students: Sequence[StudentGrade], baseline: Scores, *, source: str, threshold: float,
                      overlap: int = 0) -> Leaderboard:
    """The class leaderboard: every scored pipeline and the plain hybrid's reference row, places, intervals, certificates."""
    entries = {f"student:{s.slug}": (s, s.challenge) for s in students if s.challenge is not None and s.challenge.scored}
    scored = {key: student for key, (student, _) in entries.items()}
    scores = {key: Scores(tuple(entry.recall), tuple(entry.mrr)) for key, (_, entry) in entries.items()}
    scores[BASELINE] = baseline
    standings = leaderboard(scores)
    queries = len(baseline.recall)
    rows, certificates = [], {}
    for standing in standings:
        student = scored.get(standing.name)
        shown = (student.challenge.shown or "") if student and student.challenge else str(baseline_pipeline())
        certified = student is not None and standing.recall >= threshold - 1e-12
        rows.append(LeaderRow(student.name if student else REFERENCE_LABEL, student.slug if student else None, shown,
                              standing.place, standing.recall, standing.low, standing.high, standing.mrr,
                              standing.p_next, certified))
        if student is not None and certified:
            certificates[student.name] = certificate_line(student.name, standing, shown, threshold, queries)
    unranked = [(s.name, s.challenge.problem or "") for s in students
                if s.challenge is not None and not s.challenge.scored]
    noise = [f"Скрытых запросов: {queries}; место — по среднему Recall@{TOP_K}, при равенстве по MRR; "
             f"рядом — 95 % интервал бутстрепа.", _gaps(rows)]
    leader = next((row for row in rows if row.slug is not None), None)
    needed = None
    if leader is not None:
        sentence, needed = _needed(scores[f"student:{leader.slug}"], baseline, queries)
        noise.append(sentence)
    if overlap:
        noise.append(f"{count(overlap, 'скрытый запрос совпадает', 'скрытых запроса совпадают', 'скрытых запросов совпадают')} "
                     "с размеченными запросами курса: студенты их видели, на них можно было подогнать конвейер.")
    return Leaderboard(source, queries, TOP_K, threshold, rows, unranked, certificates, noise, needed, overlap)
