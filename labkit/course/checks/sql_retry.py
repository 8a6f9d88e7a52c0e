"""Exercise 21: the SQL agent's retry policy, and what the no-progress rule saves.

``collect`` calls the student's ``next_step(attempts, max_errors)`` on fixed attempt lists (each built
so that one typical mistake shows) and, for the grader, on lists made from the run's seed; the
reference is ``labkit.agent.sql.policy.next_step``. The table ``runs`` (a row per model, question
and policy: attempts, errors, seconds, stop rule) is collected as data; its real model's figures
are the student's own measurement, so only its shape is checked there, while the stand-in that
repeats its SQL (``FakeRepeatingSqlChat``) must show exactly what the rule saves. Grading needs no
database.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from labkit.agent.sql.policy import CHECK_SOURCE, POSTGRES_SOURCE, STEPS, next_step
from labkit.course.checks.cases import Answers, Case, Exercise
from labkit.course.checks.common import (
    CallTimeout,
    CheckResult,
    call_limited,
    collected,
    failure,
    number,
    report,
    unfilled,
)

__all__ = ["EXERCISE", "RetryContext", "check_sql_retry", "MAX_ERRORS", "REAL", "FAKE", "WITH_RULE", "WITHOUT_RULE",
           "RUN_COLUMNS", "hidden_cases"]

MAX_ERRORS = 3  # the notebook's default bound
REAL, FAKE = "модель стенда", "упрямая модель (подделка)"  # the `model` column's values
WITH_RULE, WITHOUT_RULE = "с правилом", "без правила"  # the `policy` column's values
RUN_COLUMNS = ("model", "question", "policy", "attempts", "errors", "seconds", "ok", "stop_rule", "answer")
Attempts = list[dict[str, Any]]
PolicyCase = tuple[Attempts, int]  # the attempts so far, max_errors


def _failed(sql: str, error: str = 'ERROR:  relation "sales" does not exist', source: str = POSTGRES_SOURCE,
            writes: bool = False) -> dict[str, Any]:
    return {"sql": sql, "ok": False, "error": error, "source": source, "rows": None, "writes": writes}


_MISSING = 'ERROR:  column "total" does not exist'
_DELETE = _failed("DELETE FROM orders", "разрешены только запросы на чтение (SELECT или WITH ... SELECT), а запрос "
                  "начинается с DELETE", CHECK_SOURCE, writes=True)
_DENIED = _failed("SELECT * FROM public.kb_documents", "ERROR:  permission denied for table kb_documents")
_READ_ONLY = _failed("SELECT nextval('shop.orders_id_seq')",
                     "ERROR:  cannot execute nextval() in a read-only transaction")
_TWO = _failed("SELECT 1; SELECT 2", "в ответе несколько SQL-команд: разрешена ровно одна, запрос SELECT", CHECK_SOURCE)

# Each fixed case lets one typical mistake show (the comment names it).
_FIXED: list[tuple[PolicyCase, str]] = [
    (([_failed("SELECT total FROM sales")], 3), "одна ошибка при запасе попыток: повторить"),
    (([_DELETE], 3), "запрос на запись, отвергнутый проверкой, не повторяют: refuse"),
    (([_failed("SELECT count(*) FROM orders"), _DENIED], 3),
     "PostgreSQL ответил permission denied: роль этого не может, повтор не поможет — refuse"),
    (([_READ_ONLY], 3), "«read-only transaction» — тоже запрет роли: refuse"),
    (([_TWO], 3), "проверка отвергла запрос, но не запись (writes = False): это ошибка модели, её можно исправить — retry"),
    (([_failed("SELECT a FROM t1"), _failed("SELECT b FROM t2")], 2),
     "ошибок уже max_errors: сдаться (сравнивайте число неудач с max_errors через >=)"),
    (([_failed("SELECT a FROM t1", _MISSING)], 1), "при max_errors = 1 первая же ошибка — последняя: give_up"),
    (([_failed("SELECT total FROM sales"), _failed("select  TOTAL\n  from Sales")], 5),
     "два последних запроса одинаковы с точностью до пробелов и регистра: прогресса нет — give_up"),
    (([_failed("SELECT a FROM t"), _failed("SELECT b FROM t"), _failed("SELECT a FROM t")], 5),
     "сравнивайте только два последних неудачных запроса, а не все прежние: здесь модель сменила запрос — retry"),
    (([_failed("SELECT 1 FROM t1"), _failed("SELECT 1 FROM t2"), _DELETE], 3),
     "запрет важнее лимита: последняя неудача — запись, значит refuse, хотя ошибок уже max_errors"),
]
_HIDDEN = 24
_SQL_POOL = ("SELECT total FROM sales", "SELECT count(*) FROM order_items WHERE status = 'new'",
             "SELECT name, price FROM products ORDER BY price DESC LIMIT 5", "SELECT sum(qty) FROM returns",
             "SELECT p.name FROM products p JOIN order_items i ON i.product = p.id")
_ERRORS = ('ERROR:  relation "sales" does not exist', _MISSING, "ERROR:  syntax error at or near \"FROM\"",
           "ERROR:  canceling statement due to statement timeout")


@dataclass(frozen=True)
class RetryContext:
    """The notebook's bound and number of real questions, and the hidden cases' seed (grader only)."""

    max_errors: int = MAX_ERRORS
    questions: int = 2
    seed: int | None = None


def _variant(rng: random.Random, sql: str) -> str:
    """The same SQL as the model might write it again: other whitespace, other case."""
    words = sql.split(" ")
    spaced = "".join(word + rng.choice([" ", "  ", "\n  ", "\t"]) for word in words).rstrip()
    return spaced.upper() if rng.random() < 0.5 else spaced.lower()


def hidden_cases(seed: int) -> list[PolicyCase]:
    """Random runs: a few failures of the pool's SQL (repeats re-spelt), sometimes a forbidden one last."""
    rng = random.Random(seed)
    cases = []
    for _ in range(_HIDDEN):
        max_errors = rng.randint(1, 5)
        attempts: Attempts = []
        for _step in range(rng.randint(1, max_errors)):
            if attempts and rng.random() < 0.35:
                sql = _variant(rng, " ".join(attempts[-1]["sql"].split()))
            else:
                sql = rng.choice(_SQL_POOL)
            if rng.random() < 0.15:
                attempts.append(_failed(sql, rng.choice(_ERRORS[1:]), CHECK_SOURCE))
            else:
                attempts.append(_failed(sql, rng.choice(_ERRORS)))
        roll = rng.random()
        if roll < 0.15:
            attempts[-1] = dict(_DELETE)
        elif roll < 0.25:
            attempts[-1] = dict(rng.choice([_DENIED, _READ_ONLY]))
        cases.append((attempts, max_errors))
    return cases


# --- collecting (in the student's kernel) ------------------------------------------------------------

def _call(func: Any, case: PolicyCase) -> str:
    attempts, max_errors = case
    try:
        got = call_limited(func, [dict(a) for a in attempts], max_errors)
    except (Exception, CallTimeout) as exc:  # noqa: BLE001 (the student's code may fail in any way)
        return f"упала: {failure(exc)}"
    if got is None:
        return "<None>"
    return got if isinstance(got, str) else f"<{type(got).__name__}>"


def _collect_policy(func: Any, seed: int | None) -> dict[str, Any]:
    if unfilled(func):
        return {"state": "unfilled"}
    if not callable(func):
        return {"state": "type", "type": type(func).__name__}
    return {"state": "function", "fixed": [_call(func, case) for case, _why in _FIXED],
            "hidden": None if seed is None else [_call(func, case) for case in hidden_cases(seed)]}


def _cell(value: Any) -> Any:
    if isinstance(value, str) or value is None or isinstance(value, bool):
        return value if not isinstance(value, str) else value[:200]
    if hasattr(value, "item") and getattr(value, "shape", None) == () and isinstance(value.item(), bool):
        return bool(value.item())
    return number(value)


def _collect_runs(runs: Any) -> dict[str, Any]:
    import pandas as pd

    if unfilled(runs):
        return {"state": "unfilled"}
    if not isinstance(runs, pd.DataFrame):
        return {"state": "type", "type": type(runs).__name__}
    frame = runs.reset_index() if set(RUN_COLUMNS) - set(runs.columns) else runs
    missing = [column for column in RUN_COLUMNS if column not in frame.columns]
    if missing:
        return {"state": "columns", "missing": missing}
    rows = [{column: _cell(row[column]) for column in RUN_COLUMNS} for _, row in frame.head(200).iterrows()]
    return {"state": "frame", "rows": rows}


def collect(namespace: Mapping[str, Any], seed: int | None) -> dict[str, Any]:
    """The answers of exercise 21 from the notebook's variables (JSON-ready)."""
    return {"next_step": _collect_policy(namespace.get("next_step"), seed), "runs": _collect_runs(namespace.get("runs"))}


# --- the cases -----------------------------------------------------------------------------------------

def _shown(case: PolicyCase) -> str:
    attempts, max_errors = case
    sqls = ", ".join(repr(" ".join(a["sql"].split())[:30]) for a in attempts)
    return f"next_step([{sqls}], max_errors={max_errors})"


def _hint(case: PolicyCase, got: str, want: str) -> str:
    attempts, max_errors = case
    if got not in STEPS:
        return f"верните одну из строк {', '.join(repr(s) for s in STEPS)}"
    last = attempts[-1]
    if want == "refuse":
        if last.get("writes"):
            return "последняя неудача — запись, отвергнутая проверкой (writes = True): refuse, и раньше лимита"
        return "PostgreSQL сказал permission denied или read-only transaction: роль этого не может — refuse"
    if got == "refuse":
        return "refuse — только для записи (writes) или запрета роли; прочие ошибки проверки модель может исправить"
    if want == "give_up" and len(attempts) >= max_errors:
        return "неудач уже max_errors (сравнивайте их число с max_errors через >=): give_up"
    if want == "give_up":
        return "два последних неудачных запроса одинаковы без учёта пробелов, переносов и регистра: прогресса нет — give_up"
    return "лимит не исчерпан и модель сменила запрос (сравнивайте два последних неудачных): retry"


def _policy_problems(cases: Sequence[PolicyCase], got_all: Sequence[Any], whys: Sequence[str] | None) -> list[str]:
    problems: list[str] = []
    for index, (case, got) in enumerate(zip(cases, got_all)):
        if got == "<None>":
            return ["next_step возвращает None: допишите тело функции в ячейке с TODO (return \"retry\", "
                    "\"give_up\" или \"refuse\")"]
        if isinstance(got, str) and got.startswith("упала"):
            return [*problems, f"{_shown(case)} {got}"]
        want = next_step(*case)
        if got != want:
            hint = whys[index] if whys is not None else _hint(case, got, want)
            problems.append(f"{_shown(case)} вернула {got!r}, ожидалось {want!r}: {hint}")
        if len(problems) >= 4:
            break
    return problems


def _function(answers: Answers) -> tuple[Mapping[str, Any] | None, list[str]]:
    answer = answers["next_step"]
    if problem := collected("next_step", answer):
        return None, [problem]
    if answer.get("state") != "function":
        return None, ["next_step должна быть функцией next_step(attempts, max_errors)"]
    return answer, []


def _fixed_policy(answers: Answers, _context: RetryContext) -> list[str]:
    answer, problems = _function(answers)
    if answer is None:
        return problems
    return _policy_problems([case for case, _ in _FIXED], answer["fixed"], [why for _, why in _FIXED])


def _hidden_policy(answers: Answers, context: RetryContext) -> list[str]:
    answer, problems = _function(answers)
    if answer is None:
        return problems
    if context.seed is None or answer.get("hidden") is None:
        return ["скрытые примеры не запускались"]
    return _policy_problems(hidden_cases(context.seed), answer["hidden"], None)


def _runs_rows(answers: Answers) -> tuple[list[dict[str, Any]], list[str]]:
    answer = answers["runs"]
    if problem := collected("runs", answer):
        return [], [problem]
    if answer.get("state") == "columns":
        return [], [f"в runs нет столбцов {', '.join(answer['missing'])}: нужны {', '.join(RUN_COLUMNS)}"]
    if answer.get("state") != "frame":
        return [], [f"runs должна быть DataFrame со столбцами {', '.join(RUN_COLUMNS)}"]
    return list(answer["rows"]), []


def _runs_shape(answers: Answers, context: RetryContext) -> list[str]:
    rows, problems = _runs_rows(answers)
    if problems:
        return problems
    for model in (REAL, FAKE):
        questions = {row["question"] for row in rows if row["model"] == model}
        want = context.questions if model == REAL else 1
        if len(questions) < want:
            problems.append(f"в runs у «{model}» вопросов {len(questions)}, а нужно {want}: прогоните каждый вопрос "
                            "из QUESTIONS (у подделки хватит одного)")
            continue
        for question in sorted(q for q in questions if isinstance(q, str)):
            policies = sorted(str(row["policy"]) for row in rows if row["model"] == model and row["question"] == question)
            if policies != sorted([WITH_RULE, WITHOUT_RULE]):
                problems.append(f"«{model}», вопрос «{question[:40]}»: policy = {policies}, а нужна ровно одна строка "
                                f"«{WITH_RULE}» и одна «{WITHOUT_RULE}»")
    for row in rows:
        attempts, errors, seconds = (number(row[key]) for key in ("attempts", "errors", "seconds"))
        if attempts is None or errors is None or not 1 <= attempts or not 0 <= errors <= attempts:
            problems.append(f"строка «{row['model']}», «{row['policy']}»: attempts = {row['attempts']}, errors = "
                            f"{row['errors']}; это len(result.attempts) и result.error_count")
        elif seconds is None or seconds <= 0:
            problems.append(f"строка «{row['model']}», «{row['policy']}»: seconds = {row['seconds']}: возьмите "
                            "result.seconds")
        if len(problems) >= 3:
            break
    return problems[:3]


def _runs_saving(answers: Answers, context: RetryContext) -> list[str]:
    rows, problems = _runs_rows(answers)
    if problems:
        return problems
    fake = [row for row in rows if row["model"] == FAKE]
    if not fake:
        return [f"в runs нет строк «{FAKE}»: прогоните подделку lk.FakeRepeatingSqlChat с обеими политиками"]
    for row in fake:
        with_rule = row["policy"] == WITH_RULE
        want_errors = 2 if with_rule and context.max_errors > 2 else context.max_errors
        want_rule = "no_progress" if with_rule and context.max_errors > 2 else "max_errors"
        if number(row["errors"]) != want_errors or row["stop_rule"] != want_rule or row["ok"]:
            problems.append(f"«{FAKE}», «{row['policy']}»: errors = {row['errors']}, stop_rule = {row['stop_rule']!r}; "
                            f"ожидалось {want_errors} и {want_rule!r} при MAX_ERRORS = {context.max_errors}: "
                            + ("подделка повторяет один запрос, и правило «нет прогресса» останавливает её на второй "
                               "ошибке — подключите свою next_step через policy=" if with_rule else
                               f"без правила подделка доходит до лимита — возьмите policy={'lk.next_step_without_progress_rule'}"))
    return problems


CASES: tuple[Case[RetryContext], ...] = (
    Case("next_step на готовых примерах: запрет, лимит, нет прогресса и их порядок", 4, _fixed_policy),
    Case("next_step на случайных прогонах", 3, _hidden_policy, hidden=True),
    Case("таблица runs: каждый вопрос с правилом и без, попытки, ошибки и секунды", 1, _runs_shape),
    Case("runs: упрямая модель останавливается правилом «нет прогресса» раньше лимита", 2, _runs_saving),
)


def _context(_lab: Any, parameters: Mapping[str, Any], seed: int) -> RetryContext:
    """The grader's references: the notebook's bound and number of questions (no database needed)."""
    return RetryContext(int(parameters.get("MAX_ERRORS", MAX_ERRORS)), int(parameters.get("N_QUESTIONS", 2)), seed)


EXERCISE: Exercise[RetryContext] = Exercise(
    "21", "21_task_sql_retry.ipynb", "политика повторов SQL-агента (21)", CASES, collect, _context)


def check_sql_retry(next_step: Any, runs: Any, *, max_errors: int = MAX_ERRORS, questions: int = 2) -> CheckResult:
    """Check the policy (vs ``labkit.agent.sql.policy.next_step``) and the table of runs. Taught in 21_task_sql_retry.

    Prints the verdict and the points of each visible case.
    """
    return report(EXERCISE, {"next_step": next_step, "runs": runs}, RetryContext(max_errors, questions))
