"""What the README says about the running stack, checked against the stack itself."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"

pytestmark = pytest.mark.services


def _stack_paragraph() -> str:
    """The README paragraph that describes the embedded stack's services (after the stack table)."""
    text = README.read_text(encoding="utf-8")
    start = text.index("Both speak the same protocols")
    return " ".join(text[start: text.index("\n\n", start)].split())


def test_readme_says_how_postgres_authenticates_and_the_server_agrees(conn):
    said = _stack_paragraph()
    assert "trust" not in said and "no password" not in said
    assert "scram-sha-256" in said
    methods = {row[0] for row in conn.execute(
        "SELECT DISTINCT auth_method FROM pg_hba_file_rules WHERE error IS NULL").fetchall()}
    assert methods == {"scram-sha-256"}, f"pg_hba.conf allows {sorted(methods)}"


def test_readme_says_the_password_is_in_the_url_that_status_prints(settings):
    said = _stack_paragraph()
    assert "`./run.sh status`" in said and "`DATABASE_URL`" in said
    done = subprocess.run([sys.executable, "-m", "labkit", "status"], capture_output=True, text=True, timeout=120)
    url = next(line for line in done.stdout.splitlines() if line.startswith("DATABASE_URL="))
    assert re.fullmatch(r"DATABASE_URL=postgresql://postgres:[^@\s]+@127\.0\.0\.1:\d+/\w+", url), url
