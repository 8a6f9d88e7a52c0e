"""Class mode: a student's copy of the course is updated without losing their work; exercises are collected."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from labkit.services.coursecopy import MANIFEST, collect_exercises, read_regular_file, sync_folder


def _course(root: Path, **files: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (root / f"{name}.ipynb").write_text(text, encoding="utf-8")
    return root


def test_a_new_student_gets_every_notebook_and_a_manifest(tmp_path):
    course = _course(tmp_path / "course", a="A1", b="B1")
    report = sync_folder(course, tmp_path / "home" / "notebooks")
    assert report.copied == ["a.ipynb", "b.ipynb"]
    assert (tmp_path / "home" / "notebooks" / "a.ipynb").read_text(encoding="utf-8") == "A1"
    assert set(json.loads((tmp_path / "home" / "notebooks" / MANIFEST).read_text())) == {"a.ipynb", "b.ipynb"}
    assert sync_folder(course, tmp_path / "home" / "notebooks") == type(report)(kept=[])  # nothing to do again


def test_an_untouched_notebook_follows_the_course_and_an_edited_one_is_kept_with_the_update_beside(tmp_path):
    course = _course(tmp_path / "course", a="A1", b="B1")
    mine = tmp_path / "home" / "notebooks"
    sync_folder(course, mine)
    (mine / "b.ipynb").write_text("B1 + my answer", encoding="utf-8")
    _course(course, a="A2", b="B2", c="C1")
    report = sync_folder(course, mine)
    assert report.updated == ["a.ipynb"] and report.copied == ["c.ipynb"] and report.offered == ["b.ipynb"]
    assert (mine / "a.ipynb").read_text(encoding="utf-8") == "A2"
    assert (mine / "b.ipynb").read_text(encoding="utf-8") == "B1 + my answer"
    assert (mine / "b.обновление.ipynb").read_text(encoding="utf-8") == "B2"
    again = sync_folder(course, mine)
    assert not again.updated and not again.offered and not again.copied
    (mine / "b.обновление.ipynb").write_text("B2 + my notes", encoding="utf-8")  # they work in the update too
    _course(course, b="B3")
    assert sync_folder(course, mine).offered == [] and (mine / "b.обновление.ipynb").read_text(encoding="utf-8") == "B2 + my notes"


def test_a_copy_made_before_the_manifest_is_the_students_own(tmp_path):
    course = _course(tmp_path / "course", a="A2", b="B1")
    mine = _course(tmp_path / "home" / "notebooks", a="A1 (edited or old: cannot tell)", b="B1")
    report = sync_folder(course, mine)
    assert report.offered == ["a.ipynb"] and (mine / "a.ipynb").read_text(encoding="utf-8").startswith("A1")
    assert json.loads((mine / MANIFEST).read_text())["b.ipynb"]  # identical: known as delivered from now on


def test_links_in_a_students_folder_are_never_followed(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("root only", encoding="utf-8")
    course = _course(tmp_path / "course", a="A1")
    mine = tmp_path / "home" / "notebooks"
    mine.mkdir(parents=True)
    os.symlink(secret, mine / "a.ipynb")
    assert sync_folder(course, mine).kept == ["a.ipynb"] and secret.read_text(encoding="utf-8") == "root only"
    assert read_regular_file(mine / "a.ipynb") is None and read_regular_file(secret) == b"root only"


def test_collect_builds_the_layout_that_grade_reads(tmp_path):
    homes = {}
    for student, files in {"anna": {"07_task": "a7", "09_task": "a9"}, "boris": {"07_task": "b7"}, "vera": {}}.items():
        homes[student] = tmp_path / student
        _course(homes[student] / "notebooks", **files)
    os.symlink(tmp_path / "anna" / "notebooks" / "07_task.ipynb", homes["boris"] / "notebooks" / "09_task.ipynb")
    out = tmp_path / "submissions"
    collected = collect_exercises(homes, ["07_task.ipynb", "09_task.ipynb"], out)
    assert collected == {"anna": ["07_task.ipynb", "09_task.ipynb"], "boris": ["07_task.ipynb"], "vera": []}
    assert (out / "boris" / "07_task.ipynb").read_text(encoding="utf-8") == "b7" and not (out / "vera").exists()
    assert not (out / "boris" / "09_task.ipynb").exists(), "a link to another student's work is not collected"


@pytest.mark.system  # makes Unix accounts: root only, not for the quick tier
def test_the_collect_command_gathers_a_real_groups_notebooks(tmp_path):
    """`./run.sh collect` on real Unix accounts (CI runs as root; the test makes and removes them)."""
    assert os.geteuid() == 0 and shutil.which("useradd"), "making accounts needs root and useradd (CI has both)"
    group, users = "lkcollect", {"lkcollect_a": "07_task_weighted_rrf.ipynb", "lkcollect_b": None}
    subprocess.run(["groupadd", group], check=True, capture_output=True)
    try:
        for name, notebook in users.items():
            home = tmp_path / name
            subprocess.run(["useradd", "--no-create-home", "--home-dir", str(home), "--groups", group, name],
                           check=True, capture_output=True)
            if notebook:
                _course(home / "notebooks", **{notebook.removesuffix(".ipynb"): "mine", "31_challenge": "my pipeline"})
        done = subprocess.run([sys.executable, "-m", "labkit", "collect", str(tmp_path / "out"), "--group", group],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert (tmp_path / "out" / "lkcollect_a" / "07_task_weighted_rrf.ipynb").read_text(encoding="utf-8") == "mine"
        assert (tmp_path / "out" / "lkcollect_a" / "31_challenge.ipynb").read_text(encoding="utf-8") == "my pipeline"
        assert not (tmp_path / "out" / "lkcollect_b").exists()
        assert "lkcollect_b: нет тетрадей упражнений" in done.stdout and "1 студент из 2" in done.stdout
    finally:
        for name in users:
            subprocess.run(["userdel", name], capture_output=True)
        subprocess.run(["groupdel", group], capture_output=True)
