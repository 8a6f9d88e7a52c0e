"""The SQL agent's retry policy (``labkit.agent.sql.policy``): each rule, its order, and the rule a stop names."""

from __future__ import annotations

import pytest

from labkit.agent.sql.policy import (
    CHECK_SOURCE,
    POSTGRES_SOURCE,
    next_step,
    next_step_without_progress_rule,
    no_progress,
    normalise_sql,
    stop_rule,
)


def failed(sql: str, error: str = 'ERROR:  relation "sales" does not exist', source: str = POSTGRES_SOURCE,
           writes: bool = False) -> dict:
    return {"sql": sql, "ok": False, "error": error, "source": source, "rows": None, "writes": writes}


def ran(sql: str = "SELECT 1") -> dict:
    return {"sql": sql, "ok": True, "error": "", "source": "", "rows": [[1]], "writes": False}


DELETE = failed("DELETE FROM orders", "запрос начинается с DELETE", CHECK_SOURCE, writes=True)
DENIED = failed("SELECT * FROM public.news", "ERROR:  permission denied for table news")
READ_ONLY = failed("SELECT nextval('s')", "ERROR:  cannot execute nextval() in a read-only transaction")


def test_normalising_ignores_whitespace_case_and_a_trailing_semicolon():
    assert normalise_sql("SELECT  count(*)\n FROM Orders;") == normalise_sql("select count(*) from orders")
    assert normalise_sql("SELECT 1") != normalise_sql("SELECT 2")


@pytest.mark.parametrize("attempts", [[DELETE], [DENIED], [READ_ONLY], [failed("SELECT 1"), DELETE]])
def test_a_write_or_what_the_role_may_not_do_is_refused_at_once(attempts):
    assert next_step(attempts, 3) == "refuse" == next_step_without_progress_rule(attempts, 3)
    assert stop_rule("refuse", attempts, 3) == "forbidden"


def test_a_check_refusal_that_is_no_write_is_retried():
    attempts = [failed("SELECT 1; SELECT 2", "в ответе несколько SQL-команд", CHECK_SOURCE)]
    assert next_step(attempts, 3) == "retry"


def test_the_words_count_only_from_postgres():  # a model's SQL text mentioning them is no refusal
    attempts = [failed("SELECT 'permission denied'", "нет такого столбца permission denied", CHECK_SOURCE)]
    assert next_step(attempts, 3) == "retry"


def test_failures_up_to_max_errors_give_up():
    attempts = [failed("SELECT a FROM t1"), failed("SELECT a FROM t2")]
    assert next_step(attempts, 3) == "retry" and next_step(attempts, 2) == "give_up"
    assert stop_rule("give_up", attempts, 2) == "max_errors"


def test_successful_attempts_do_not_count_as_failures():
    attempts = [ran(), failed("SELECT a FROM t1"), ran(), failed("SELECT a FROM t2")]
    assert next_step(attempts, 3) == "retry"


def test_the_same_sql_twice_is_no_progress_and_gives_up_early():
    attempts = [failed("SELECT total FROM sales"), failed("select total\n  from SALES;")]
    assert no_progress(attempts) and next_step(attempts, 5) == "give_up"
    assert next_step_without_progress_rule(attempts, 5) == "retry"
    assert stop_rule("give_up", attempts, 5) == "no_progress"


def test_only_the_last_two_failures_are_compared():
    attempts = [failed("SELECT a FROM t"), failed("SELECT b FROM t"), failed("SELECT a FROM t")]
    assert not no_progress(attempts) and next_step(attempts, 5) == "retry"


def test_refusal_goes_before_the_bound_and_the_bound_before_no_progress():
    assert next_step([failed("SELECT 1"), failed("SELECT 2"), DELETE], 2) == "refuse"
    repeated = [failed("SELECT 1"), failed("SELECT 1")]
    assert stop_rule("give_up", repeated, 2) == "max_errors"


def test_a_stop_no_rule_explains_is_the_policys_own():
    assert stop_rule("give_up", [failed("SELECT 1")], 3) == "policy"
