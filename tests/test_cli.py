"""The command line's one error policy, checked without any service: one line on stderr, exit code 2 or 1."""

from __future__ import annotations

import subprocess
import sys

import pytest

from labkit.cli import build_parser, main


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["nope"], "invalid choice"),
        ([], "required: COMMAND"),
        (["eval", "--k", "0"], "--k must be at least 1"),
        (["eval", "--modes", "vector,nope"], "unknown mode(s) nope"),
        (["eval", "--bogus"], "unrecognized arguments: --bogus"),
        (["ask", "   "], "the question is empty"),
        (["ask"], "required: question"),
        (["bench", "--size", "5"], "--size must lie in"),
        (["bench", "--size", "10000000000"], "--size must lie in"),
        (["bench-rerank", "--pairs", "0"], "--pairs must lie in"),
        (["bench-rerank", "--depths", "10,x"], "comma-separated whole numbers"),
        (["bench-chunks", "--modes", "vector,nope"], "--modes must name modes"),
        (["bench-chunks", "--modes", "vector", "--pick-mode", "hybrid"], "include --pick-mode"),
        (["bench-chunks", "--k", "0"], "--k must be at least 1"),
        (["up", "--what"], "unrecognized arguments"),
    ],
)
def test_bad_arguments_are_one_line_and_exit_2(argv, needle, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err, err


def test_a_bad_queries_file_is_refused_before_any_service(tmp_path, capsys):
    bad = tmp_path / "q.jsonl"
    bad.write_text('{"query": "x", "relevant": "nope"}\n', encoding="utf-8")
    assert main(["eval", "--queries", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("labkit eval: error:") and f"{bad}:1" in err and err.count("\n") == 1


def test_every_command_is_registered_with_help():
    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert set(commands) == {"up", "down", "status", "eval", "expand", "eval-agent", "ask", "bench", "bench-rerank",
                             "bench-chunks", "ship-vectors", "grade", "collect", "site"}
    for name, command in commands.items():
        assert command.prog == f"labkit {name}"
        assert command.format_help()


def test_python_m_labkit_help_runs_in_a_new_process():
    done = subprocess.run([sys.executable, "-m", "labkit", "eval", "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "--queries" in done.stdout and "--k" in done.stdout


def test_a_command_does_not_import_the_notebook_format_it_does_not_use():
    """Every `labkit` command starts with the whole parser; nbformat (a second of schema loading) waits for `grade`."""
    code = "import sys, labkit.cli; print(sorted(m for m in ('nbformat', 'jsonschema', 'papermill') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stdout + done.stderr
