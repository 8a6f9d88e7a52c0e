"""A student's copy of the course, kept up to date without touching their work (class mode, hub/README.md).

``sync_folder(source, target)`` brings one course folder (``notebooks/``, ``solutions/``) into a
student's home. It remembers, in ``target/.labkit-delivered.json``, the SHA-256 of every file as it
was delivered, and on each later start of the student's server:

* a file the student does not have yet is copied;
* a file the student never changed, whose course version changed, is replaced by the new version;
* a file the student changed is kept as it is, and a changed course version is put beside it as
  ``<name>.обновление.ipynb`` (once per course version), so nothing a student wrote is ever lost.

Copies made before this manifest existed are treated as the student's own. The hub runs this module
as the student (``python -m labkit.services.coursecopy SOURCE TARGET``), so a link or a file a
student puts in the way can only lead where that student may write anyway.

``collect_exercises`` goes the other way for grading: each student's exercise notebooks are copied
into ``DIR/<student>/`` (the layout ``./run.sh grade DIR`` reads), regular files only, links refused.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["MANIFEST", "UPDATE_SUFFIX", "SyncReport", "sync_folder", "read_regular_file", "collect_exercises"]

MANIFEST = ".labkit-delivered.json"
UPDATE_SUFFIX = ".обновление"  # «07_task.обновление.ipynb»: the new course version beside the student's own


@dataclass
class SyncReport:
    """What one sync did, by file name."""

    copied: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    offered: list[str] = field(default_factory=list)  # new course version put beside the student's changed file
    kept: list[str] = field(default_factory=list)  # the student's changed file, no new course version


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _manifest(target: Path) -> dict[str, str]:
    try:
        data = json.loads((target / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def _copy(source: Path, target: Path) -> None:
    """Copy by writing a new file beside and renaming it over: never through a link planted at `target`."""
    partial = target.with_name(f".{target.name}.partial")
    partial.unlink(missing_ok=True)
    shutil.copyfile(source, partial)
    os.replace(partial, target)


def sync_folder(source: Path, target: Path) -> SyncReport:
    """Bring `target` (a student's copy) up to date with the course folder `source`; see the module docstring."""
    report = SyncReport()
    target.mkdir(parents=True, exist_ok=True)
    delivered = _manifest(target)
    for path in sorted(source.glob("*.ipynb")):
        name, new = path.name, _sha256(path)
        mine = target / name
        if mine.is_symlink() or (mine.exists() and not mine.is_file()):
            report.kept.append(name)  # not a plain file of theirs: left alone
        elif not mine.exists():
            _copy(path, mine)
            report.copied.append(name)
            delivered[name] = new
        elif (current := _sha256(mine)) == delivered.get(name, new):  # as delivered (an old identical copy too)
            if current != new:
                _copy(path, mine)
                report.updated.append(name)
            delivered[name] = new
        elif new == delivered.get(name):
            report.kept.append(name)  # their edits, and the course has nothing newer
        else:  # their edits (or an old copy we cannot tell from theirs) and a course version they have not seen
            beside = mine.with_name(f"{mine.stem}{UPDATE_SUFFIX}{mine.suffix}")
            there = None if beside.is_symlink() or not beside.is_file() else _sha256(beside)
            if beside.is_symlink() or there not in (None, new, delivered.get(beside.name)):
                report.kept.append(name)  # they made that file their own too
            elif there != new:
                _copy(path, beside)
                delivered[beside.name] = new
                report.offered.append(name)
            else:
                report.kept.append(name)
    partial = target / f".{MANIFEST}.partial"
    partial.write_text(json.dumps(delivered, ensure_ascii=False, indent=1, sort_keys=True), encoding="utf-8")
    os.replace(partial, target / MANIFEST)
    return report


def read_regular_file(path: Path) -> bytes | None:
    """The bytes of `path` if it is a regular file reached without following a link at its last step, else None."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return None
        return handle.read()


def collect_exercises(homes: dict[str, Path], names: list[str], out: Path) -> dict[str, list[str]]:
    """Copy each student's exercise notebooks ``<home>/notebooks/<name>`` into ``out/<student>/<name>``.

    `homes` maps a student's name to their home folder. Links and anything but a regular file are
    skipped (a student cannot make the instructor copy another file). Returns, per student, the
    notebooks collected; a student with none gets no folder.
    """
    collected: dict[str, list[str]] = {}
    for student, home in sorted(homes.items()):
        found = {name: data for name in names if (data := read_regular_file(home / "notebooks" / name)) is not None}
        if found:
            (out / student).mkdir(parents=True, exist_ok=True)
            for name, data in found.items():
                (out / student / name).write_bytes(data)
        collected[student] = sorted(found)
    return collected


if __name__ == "__main__":  # the hub runs this as the student
    done = sync_folder(Path(sys.argv[1]), Path(sys.argv[2]))
    print(json.dumps(done.__dict__, ensure_ascii=False))
