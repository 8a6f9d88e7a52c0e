"""Grading a class: ``./run.sh grade DIR`` executes every student's exercise notebooks in isolation and scores them.

One module per idea: ``limits`` (time, memory, output), ``databases`` (a template with the corpus, a database and a role per
student notebook), ``runner`` (the child process: limits, papermill), ``execute`` (a notebook
in its own processes, with a watchdog), ``grader`` (students, parameters, scoring with the
cases of ``labkit.course.checks``), ``challenge`` (the hidden queries of 31_challenge, the class
leaderboard), ``results`` and ``report`` (CSV, JSON, HTML in Russian). The command itself
(``labkit.cli.grade``) finds the services and passes them in.
"""

from labkit.course.grading.challenge import (
           build_leaderboard,
           challenge_setup,
           course_overlap,
           load_hidden,
           warm_challenge,
)
from labkit.course.grading.databases import Role, RunDatabases
from labkit.course.grading.execute import Execution, Limits
from labkit.course.grading.grader import (
           REFERENCE,
           ChallengeSetup,
           ExerciseSetup,
           Grader,
           Student,
           exercise_setups,
           find_students,
           grade_class,
           kernel_environment,
           warm_template,
)
from labkit.course.grading.report import write_reports
from labkit.course.grading.results import (
           STATUS_TEXT,
           ChallengeEntry,
           ClassGrades,
           ExerciseGrade,
           Leaderboard,
           LeaderRow,
           StudentGrade,
)

__all__ = ["Role", "RunDatabases", "Execution", "Limits", "REFERENCE", "ExerciseSetup", "ChallengeSetup", "Grader",
           "Student", "exercise_setups", "find_students", "grade_class", "kernel_environment", "warm_template",
           "write_reports", "STATUS_TEXT", "ClassGrades", "ExerciseGrade", "ChallengeEntry", "StudentGrade", "LeaderRow",
           "Leaderboard", "build_leaderboard", "challenge_setup", "course_overlap", "load_hidden", "warm_challenge"]
