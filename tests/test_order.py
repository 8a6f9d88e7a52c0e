"""The run's order (tests/conftest.py): tiers in turn, the tests that ask what a lesson asks after the course's
notebooks, the waits for the foreign stack's runs after the rest of the system tier, the tests that kill a shared
service last. Checked on a real collection of six files."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FILES = ["tests/test_agent.py", "tests/test_chaos.py", "tests/test_foreign_stack.py", "tests/test_grade.py",
         "tests/test_notebooks.py", "tests/test_supervisor.py"]


def test_the_foreign_waits_follow_the_system_tier_and_the_service_killers_end_the_run():
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *FILES],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    ids = [line for line in done.stdout.splitlines() if "::" in line]
    unit = ids.index("tests/test_grade.py::test_notebook_checker_shows_hidden_cases_only_as_points")  # no marker
    integration = [n for n, i in enumerate(ids) if i.startswith("tests/test_agent.py::")]  # all marked services
    starter = ids.index("tests/test_foreign_stack.py::test_the_foreign_stack_differs_where_it_should")
    assert integration and unit < min(integration) and max(integration) < starter
    waits = [n for n, i in enumerate(ids) if "test_notebook_executes_on_a_foreign_stack" in i]
    assert waits and min(waits) > ids.index("tests/test_grade.py::test_solutions_get_every_point") > starter
    # the supervisor's tests that ask lesson 20's questions: after every course notebook's run, before the waits
    lesson = ids.index("tests/test_notebooks.py::test_notebook_executes[notebooks/20_supervisor.ipynb]")
    warm = [n for n, i in enumerate(ids) if i.startswith(("tests/test_supervisor.py::test_a_documents_question",
                                                          "tests/test_supervisor.py::test_the_document_agent_abstains",
                                                          "tests/test_supervisor.py::test_a_both_question"))]
    executes = [n for n, i in enumerate(ids) if i.startswith("tests/test_notebooks.py::test_notebook_executes[")]
    assert len(warm) == 3 and lesson in executes and max(executes) < min(warm) and max(warm) < min(waits)
    smalltalk = ids.index("tests/test_supervisor.py::test_smalltalk_is_answered_politely_without_a_tool")
    assert smalltalk < starter  # the rest of the file stays in the integration tier
    assert ids[-2:] == ["tests/test_chaos.py::test_model_server_killed_mid_question_then_up",
                        "tests/test_chaos.py::test_postgres_killed_mid_load_then_up"]
