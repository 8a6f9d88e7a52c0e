"""``site``: the course as static HTML in build/site/, readable offline (README, «The course as a site»).

    ./run.sh site [--no-execute]

Pages come from the executed copies the notebook tests write (build/executed/); a notebook without
a fresh copy is executed first, by the same test (tests/test_notebooks.py::test_notebook_executes),
so `./run.sh test` followed by `./run.sh site` executes nothing twice.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from typing import Any

__all__ = ["register", "run", "find_root", "execute_command"]

CHECKOUT = Path(__file__).resolve().parents[2]  # the repository labkit is installed from (editable)
RUNNER = "tests/test_notebooks.py::test_notebook_executes"


def register(sub: Any) -> None:
    """Add the ``site`` command to the sub-parsers `sub`."""
    parser = sub.add_parser("site", help="build the course as a static HTML site in build/site/",
                            description="Render the executed notebooks as a static site (build/site/index.html) "
                                        "that opens without a network.")
    parser.add_argument("--no-execute", action="store_true",
                        help="do not execute notebooks that have no fresh executed copy: render their sources "
                             "(the page says it has no outputs)")
    parser.set_defaults(run=run)


def find_root(cwd: Path) -> Path:
    """The lab's folder: the current one if it holds notebooks/, else the checkout labkit is installed from."""
    for root in (cwd, CHECKOUT):
        if (root / "notebooks").is_dir():
            return root
    raise FileNotFoundError(f"no notebooks/ folder in {cwd}: run this in the lab's folder")


def execute_command(sources: list[Path]) -> list[str]:
    """The pytest command that executes `sources` with papermill into build/executed/, as the notebook tests do."""
    ids = [f"{RUNNER}[{source.parent.name}/{source.name}]" for source in sources]
    return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *ids]


def run(args: argparse.Namespace) -> int:
    """Execute what is stale (unless --no-execute), render the site and say where it is."""
    from labkit.course import site  # nbconvert loads in a second: only this command pays for it

    root = find_root(Path.cwd())
    executed, out = root / "build" / "executed", root / "build" / "site"
    stale = [page.source for page in site.course_pages(root, executed) if page.executed is None]
    failed = 0
    if stale and not args.no_execute:
        if not (root / RUNNER.split("::")[0]).is_file():
            raise FileNotFoundError(f"{root / RUNNER.split('::')[0]} is missing: use --no-execute")
        print(f"executing {len(stale)} notebook(s) without a fresh executed copy (papermill, as the notebook "
              "tests do) ...", file=sys.stderr)
        failed = subprocess.run(execute_command(stale), cwd=root, check=False).returncode
    print(f"rendering the site into {out} ...", file=sys.stderr)
    report = site.build_site(root, out, executed)
    print(f"{out / 'index.html'}: {len(report.pages)} pages, {len(report.unexecuted)} without outputs")
    for page in report.unexecuted:
        print(f"  without outputs: {page.path}", file=sys.stderr)
    for link in report.broken_links:
        print(f"  link to nothing: {link}", file=sys.stderr)
    if failed or report.broken_links or (report.unexecuted and not args.no_execute):
        print(f"labkit site: error: {len(report.unexecuted)} page(s) without outputs (a notebook failed), "
              f"{len(report.broken_links)} broken link(s)", file=sys.stderr)
        return 1
    return 0
