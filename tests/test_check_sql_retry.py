"""Exercise 21's checker: the reference passes every case, each typical mistake gets its own hint."""

from __future__ import annotations

import pandas as pd
import pytest

from labkit.agent.sql.policy import next_step, next_step_without_progress_rule
from labkit.course.checks.cases import run_cases
from labkit.course.checks.sql_retry import EXERCISE, FAKE, REAL, WITH_RULE, WITHOUT_RULE, RetryContext, hidden_cases


def raw_compare(attempts, max_errors):  # the same SQL compared without normalising
    failed = [a for a in attempts if not a["ok"]]
    if failed[-1].get("writes") or "permission denied" in failed[-1]["error"] or "read-only" in failed[-1]["error"]:
        return "refuse"
    if len(failed) >= max_errors or (len(failed) >= 2 and failed[-1]["sql"] == failed[-2]["sql"]):
        return "give_up"
    return "retry"


def bound_first(attempts, max_errors):  # the bound checked before the refusal
    if len([a for a in attempts if not a["ok"]]) >= max_errors:
        return "give_up"
    return next_step(attempts, max_errors)


def refuses_every_check(attempts, max_errors):  # any refusal by the check taken for a write
    if attempts[-1]["source"] == "Проверка запроса":
        return "refuse"
    return next_step(attempts, max_errors)


def runs_frame(max_errors=3, questions=("Сколько заказов?", "Сколько товаров?"), fake_with=2, seconds=1.5):
    rows = []
    for question in questions:
        for policy in (WITH_RULE, WITHOUT_RULE):
            rows.append({"model": REAL, "question": question, "policy": policy, "attempts": 1, "errors": 0,
                         "seconds": seconds, "ok": True, "stop_rule": "", "answer": "42"})
    rows.append({"model": FAKE, "question": questions[0], "policy": WITH_RULE, "attempts": fake_with,
                 "errors": fake_with, "seconds": 0.1, "ok": False,
                 "stop_rule": "no_progress" if fake_with == 2 else "max_errors", "answer": "Не удалось"})
    rows.append({"model": FAKE, "question": questions[0], "policy": WITHOUT_RULE, "attempts": max_errors,
                 "errors": max_errors, "seconds": 0.2, "ok": False, "stop_rule": "max_errors",
                 "answer": "Не удалось"})
    return pd.DataFrame(rows)


CONTEXT = RetryContext(3, 2, seed=11)


def verdicts(policy, runs, context=CONTEXT):
    answers = EXERCISE.collect({"next_step": policy, "runs": runs}, context.seed)
    return {case.name: case.problems for case in run_cases(EXERCISE.cases, answers, context, hidden=True)}


def test_the_reference_earns_every_point():
    assert EXERCISE.max_points == 10
    assert all(not problems for problems in verdicts(next_step, runs_frame()).values())


def test_hidden_cases_reach_every_verdict_and_follow_the_seed():
    cases = hidden_cases(11)
    assert {next_step(*case) for case in cases} == {"retry", "give_up", "refuse"}
    assert any(next_step(*case) != next_step_without_progress_rule(*case) for case in cases)
    assert hidden_cases(11) == cases != hidden_cases(12)


@pytest.mark.parametrize(("policy", "needle"), [
    (raw_compare, "с точностью до пробелов и регистра"),
    (bound_first, "запрет важнее лимита"),
    (refuses_every_check, "не запись (writes = False)"),
    (next_step_without_progress_rule, "прогресса нет"),
])
def test_each_typical_mistake_gets_its_hint(policy, needle):
    problems = verdicts(policy, runs_frame())
    fixed = problems["next_step на готовых примерах: запрет, лимит, нет прогресса и их порядок"]
    assert any(needle in problem for problem in fixed), fixed


def test_the_starter_hears_what_to_finish():
    problems = verdicts(lambda attempts, max_errors: None, None)
    assert all(problems.values())
    assert any("TODO" in p for ps in problems.values() for p in ps)


def test_a_policy_that_crashes_is_reported_not_raised():
    problems = verdicts(lambda attempts, max_errors: attempts[5], runs_frame())
    assert any("упала: IndexError" in p for ps in problems.values() for p in ps)


def test_runs_without_the_rules_effect_or_a_question_lose_their_points():
    problems = verdicts(next_step, runs_frame(fake_with=3))  # the student's policy was not plugged in
    assert problems["runs: упрямая модель останавливается правилом «нет прогресса» раньше лимита"]
    problems = verdicts(next_step, runs_frame(questions=("Сколько заказов?",)))
    assert any("вопросов 1, а нужно 2" in p for p in problems["таблица runs: каждый вопрос с правилом и без, попытки, ошибки и секунды"])
    problems = verdicts(next_step, runs_frame(seconds=0))
    assert any("seconds = 0" in p for ps in problems.values() for p in ps)
    problems = verdicts(next_step, runs_frame().drop(columns=["stop_rule"]))
    assert any("нет столбцов stop_rule" in p for ps in problems.values() for p in ps)


def test_a_bound_of_two_leaves_the_rule_nothing_to_save():
    context, saving = RetryContext(2, 2, seed=None), "runs: упрямая модель останавливается правилом «нет прогресса» раньше лимита"
    frame = runs_frame(max_errors=2, fake_with=2)
    assert verdicts(next_step, frame, context)[saving], "at a bound of 2 the bound, not the rule, stops the fake"
    frame.loc[frame["model"] == FAKE, "stop_rule"] = "max_errors"
    assert not verdicts(next_step, frame, context)[saving]


def test_hidden_hints_name_the_rule_that_was_missed():
    problems = verdicts(raw_compare, runs_frame())["next_step на случайных прогонах"]
    assert problems and all("прогресса нет" in p for p in problems), problems
    problems = verdicts(lambda attempts, max_errors: next_step(attempts, max_errors + 1), runs_frame())
    assert any("неудач уже max_errors" in p for p in problems["next_step на случайных прогонах"])
