"""The course in a real browser: Debian's chromium (/usr/bin/chromium; .ci/run installs it) driven by Playwright.

1. JupyterLab runs notebook 04 (Run All) and its ``rrf_k`` slider reorders the hybrid list it shows.
2. The static site (build/site/, written here from the session's executed notebooks) opens from
   disk: every internal link leads to a page and an anchor that exist, nothing is requested from outside
   the machine, and prev/next links walk the course in order.

Playwright's own browsers (`playwright install`) are never used: they come from a CDN out of reach here.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.error import URLError
from urllib.parse import unquote, urlsplit
from urllib.request import Request, urlopen

import nbformat
import pytest
from nbrun import Runs
from playwright.sync_api import Browser, Page, Route, sync_playwright
from playwright.sync_api import TimeoutError as PlaywrightTimeout

import labkit as lk
from labkit.course.grading.grader import parameters_cell_values
from labkit.course.site import SiteReport, build_site

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
# The machine's closed network refuses chromium's background connections: keep them from starting.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
NOTEBOOK = REPO / "notebooks" / "04_rrf.ipynb"
START_TIMEOUT = 180  # seconds for JupyterLab to answer on a busy 2-core machine
RUN_TIMEOUT_MS = 600_000  # Run All of notebook 04, as its papermill timeout

pytestmark = [
    pytest.mark.services,
    pytest.mark.system,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium: apt-get install -y chromium"),
]


@pytest.fixture()
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


# --- 1. JupyterLab ------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture()
def jupyterlab(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """JupyterLab as run.sh starts it (127.0.0.1, token in JUPYTER_TOKEN), serving a copy of notebook 04.

    Run All marks the notebook modified and autosave may write it: it writes the copy, never notebooks/.
    """
    root = tmp_path / "course"
    (root / "notebooks").mkdir(parents=True)
    shutil.copy2(NOTEBOOK, root / "notebooks" / NOTEBOOK.name)
    port, token = _free_port(), secrets.token_hex(16)
    env = {**os.environ, "JUPYTER_TOKEN": token,  # own config and runtime folders: nothing of the user's is read or written
           "JUPYTER_CONFIG_DIR": str(tmp_path / "config"), "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime")}
    command = [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
               "--ServerApp.port_retries=0", f"--ServerApp.root_dir={root}"]
    if os.geteuid() == 0:
        command.append("--allow-root")
    base = f"http://127.0.0.1:{port}"
    auth = {"Authorization": f"token {token}"}
    with open(tmp_path / "jupyterlab.log", "w", encoding="utf-8") as log:
        server = subprocess.Popen(command, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT,
                                  start_new_session=True)
        try:
            deadline = time.monotonic() + START_TIMEOUT
            while True:
                assert server.poll() is None, f"JupyterLab exited: {(tmp_path / 'jupyterlab.log').read_text()[-2000:]}"
                try:
                    with urlopen(Request(f"{base}/api/status", headers=auth), timeout=5) as answer:
                        if answer.status == 200:
                            break
                except (URLError, OSError):
                    pass
                if time.monotonic() > deadline:
                    pytest.fail(f"JupyterLab did not answer within {START_TIMEOUT} s")
                time.sleep(0.5)
            yield base, token
        finally:
            try:  # the server shuts its kernels down with it
                urlopen(Request(f"{base}/api/shutdown", method="POST", headers=auth), timeout=10).close()
                server.wait(timeout=60)
            except (URLError, OSError, subprocess.TimeoutExpired):
                os.killpg(server.pid, signal.SIGKILL)
                server.wait()


def _parameters(path: Path) -> dict[str, object]:
    """The literal values of the notebook's `parameters` cell."""
    return parameters_cell_values(nbformat.read(path, as_version=4))


# The document numbers of the «гибрид» column of the table the widget output shows ("1: Цена золота…" -> "1").
_HYBRID_SHOWN = """() => {
  const table = document.querySelector(".widget-output table");
  if (!table) return null;
  const header = [...table.querySelectorAll("thead tr:first-child th")].map(th => th.textContent.trim());
  const column = header.indexOf("гибрид");
  if (column < 0) return null;
  return [...table.querySelectorAll("tbody tr")].map(tr => tr.children[column].textContent.trim().split(":")[0]);
}"""
_ALL_RAN = """() => {
  const prompts = [...document.querySelectorAll(".jp-NotebookPanel .jp-CodeCell .jp-InputPrompt")];
  return prompts.length > 0 && prompts.every(p => /\\[\\d+\\]/.test(p.textContent));
}"""


def _menu(page: Page, menu: str, item: str) -> None:
    page.locator(".lm-MenuBar-itemLabel").get_by_text(menu, exact=True).click()
    page.locator(".lm-Menu-itemLabel").get_by_text(item, exact=True).click()


def test_jupyterlab_runs_notebook_04_and_the_rrf_k_slider_reorders_the_hybrid(browser, jupyterlab, lab, tmp_path):
    base, token = jupyterlab
    original = hashlib.sha256(NOTEBOOK.read_bytes()).hexdigest()
    params = _parameters(NOTEBOOK)
    query, top_k, rrf_k = str(params["QUERY"]), int(params["TOP_K"]), int(params["RRF_K"])

    def hybrid(k: int) -> list[str]:  # what the explorer's «гибрид» column should show for rrf_k = k
        return [str(doc_id) for doc_id in lk.ids(lk.search_hybrid(lab, query, top_k, rrf_k=k))]

    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        page.goto(f"{base}/lab/tree/notebooks/{NOTEBOOK.name}?token={token}")
        page.wait_for_selector(".jp-NotebookPanel .jp-CodeCell", timeout=START_TIMEOUT * 1000)
        # Run All before the kernel is connected would run nothing: wait for «Python 3 (labkit) | Простаивает» (idle).
        page.locator(".jp-StatusBar-TextItem", has_text=re.compile(r"\|\s*Простаивает")).wait_for(timeout=START_TIMEOUT * 1000)
        _menu(page, "Выполнить", "Запустить все ячейки")  # the interface is Russian (jupyterlab_overrides.json)
        try:
            page.wait_for_function(_ALL_RAN, timeout=RUN_TIMEOUT_MS)
        except PlaywrightTimeout:
            page.screenshot(path=tmp_path / "jupyterlab.png")
            shown = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']").all_inner_texts()
            pytest.fail(f"Run All did not finish (screenshot: {tmp_path / 'jupyterlab.png'}); error outputs: {shown}")

        slider = page.locator(".widget-slider", has=page.locator(".widget-label", has_text="rrf_k"))
        handle, readout = slider.locator(".noUi-handle"), slider.locator(".widget-readout")
        assert readout.inner_text().strip() == str(rrf_k)
        before = page.evaluate(_HYBRID_SHOWN)
        assert before == hybrid(rrf_k), f"the explorer shows {before}, labkit ranks {hybrid(rrf_k)}"

        low, high = (int(float(handle.get_attribute(name) or "nan")) for name in ("aria-valuemin", "aria-valuemax"))
        target = next((k for k in range(low, high + 1) if hybrid(k) != before), None)
        assert target is not None, f"no rrf_k in [{low}, {high}] changes the hybrid top {top_k} of «{query}»"

        handle.focus()  # keyboard, as a student without a mouse would: Home, then right to the target
        handle.press("Home")
        for _ in range(target - low):
            handle.press("ArrowRight")
        expected = hybrid(target)
        try:
            page.wait_for_function(f"expected => JSON.stringify(({_HYBRID_SHOWN})()) === JSON.stringify(expected)",
                                   arg=expected, timeout=120_000)
        except PlaywrightTimeout:
            pytest.fail(f"after moving rrf_k to {readout.inner_text()} the explorer shows {page.evaluate(_HYBRID_SHOWN)}, "
                        f"labkit ranks {expected} for rrf_k = {target}")
        after = page.evaluate(_HYBRID_SHOWN)
        assert readout.inner_text().strip() == str(target)
        assert after == expected and after != before
    finally:
        page.close()
    assert hashlib.sha256(NOTEBOOK.read_bytes()).hexdigest() == original, "Run All changed notebooks/04_rrf.ipynb"


# --- 2. the static site -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def site(executed_notebooks: Runs) -> SiteReport:
    """build/site/ from the session's executed notebooks (every one run first, if no test ran it yet)."""
    return build_site(REPO, REPO / "build" / "site", executed_notebooks.complete())


def _is_local(url: str) -> bool:
    parts = urlsplit(url)
    return parts.scheme in {"file", "data", "blob", "about"} or parts.hostname in {"127.0.0.1", "localhost", "::1"}


def test_site_opens_from_disk_every_internal_link_works_and_nothing_comes_from_outside(browser, site):
    assert not site.broken_links, f"links the builder could not resolve: {site.broken_links}"
    context = browser.new_context()
    outside: list[str] = []

    def guard(route: Route) -> None:  # every request passes here; anything not on this machine is refused
        if _is_local(route.request.url):
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    context.route("**/*", guard)
    page = context.new_page()
    script_errors: list[str] = []
    page.on("pageerror", lambda error: script_errors.append(str(error)))
    root = site.out.resolve().as_uri() + "/"
    ids: dict[str, set[str]] = {}
    anchors: list[tuple[str, str, str]] = []  # (page, target page, fragment)
    broken: list[str] = []
    queue = ["index.html"]
    try:
        while queue:
            path = queue.pop()
            if path in ids:
                continue
            page.goto(root + path)
            diagrams = page.locator(".jp-Mermaid").count()
            if diagrams:  # drawn by the bundled mermaid.min.js, or the page is not readable offline
                page.wait_for_function(f"() => document.querySelectorAll('.jp-Mermaid svg').length >= {diagrams}",
                                       timeout=60_000)
            ids[path] = set(page.eval_on_selector_all("[id], a[name]", "els => els.map(e => e.id || e.name)"))
            for href in page.eval_on_selector_all("a[href]", "els => els.map(a => a.href)"):
                if not href.startswith("file:"):
                    continue  # http(s) links to papers and docs: followed only by a reader, never loaded
                if not href.startswith(root):
                    broken.append(f"{path} -> {href} (outside the site)")
                    continue
                target, _, fragment = href[len(root):].partition("#")
                if not (site.out / unquote(target)).is_file():
                    broken.append(f"{path} -> {target}")
                elif target.endswith(".html"):
                    queue.append(target)
                    if fragment:
                        anchors.append((path, target, fragment))
    finally:
        context.close()
    # As browsers do: the fragment as written, else percent-decoded (nbconvert writes heading ids encoded).
    missing = [f"{path} -> {target}#{unquote(fragment)}" for path, target, fragment in anchors
               if fragment not in ids[target] and unquote(fragment) not in ids[target]]
    pages_on_disk = {p.relative_to(site.out).as_posix() for p in site.out.rglob("*.html")}
    assert not broken, f"links to nothing: {broken}"
    assert not missing, f"links to anchors that do not exist: {missing}"
    assert not outside, f"requests that left the machine: {outside}"
    assert not script_errors, f"script errors: {script_errors}"
    assert set(ids) == pages_on_disk, f"pages no link leads to: {sorted(pages_on_disk - set(ids))}"
    assert len(pages_on_disk) == len(site.pages) + 1  # every notebook and the index


def test_site_walks_the_course_in_order_in_russian(browser, site):
    expected = [f"{folder}/{p.stem}.html" for folder in ("notebooks", "solutions")
                for p in sorted((REPO / folder).glob("*.ipynb"))]
    page = browser.new_page()
    root = site.out.resolve().as_uri() + "/"
    try:
        page.goto(root + "index.html")
        assert page.get_attribute("html", "lang") == "ru"
        listed = page.eval_on_selector_all("#notebooks li > a:first-child, #solutions li > a",
                                           f"els => els.map(a => a.href.slice({len(root)}))")
        assert listed == expected, "the index lists the notebooks, then the solutions, in their order"
        walked: list[str] = []
        for chain in ("notebooks/", "solutions/"):  # the lessons, then the solutions: each a chain of its own
            start, path = len(walked), next(p for p in expected if p.startswith(chain))
            while path:
                page.goto(root + path)
                walked.append(path)
                shown = next(p for p in site.pages if p.path == path)
                assert page.get_attribute("html", "lang") == "ru" and page.title() == shown.title
                home = page.get_by_role("link", name="Оглавление курса").first
                assert home.get_attribute("href", timeout=5_000) in {"../index.html", "index.html"}
                previous = page.locator("nav a[rel=prev]")  # the navigation stands above and below the page
                assert (previous.count() > 0) == (len(walked) - start > 1), f"{path}: «Назад» only inside its chain"
                if previous.count():
                    assert previous.first.evaluate("a => a.href") == root + walked[-2]
                executed = shown.executed is not None
                assert (page.locator(".jp-OutputArea-output").count() > 0) == executed, path
                assert (page.get_by_text("собрана из ноутбука без выполнения").count() > 0) == (not executed), path
                following = page.locator("nav a[rel=next]")
                path = following.first.evaluate("a => a.href").removeprefix(root) if following.count() else ""
        assert walked == expected, "«Далее» walks the lessons in order, and the solutions in order"
    finally:
        page.close()


# --- 3. the first screen ------------------------------------------------------------------------
_TOASTS = ".Toastify__toast"  # JupyterLab's notifications: the news question, update checks, errors


def test_jupyterlab_opens_a_new_user_on_00_intro_in_russian_without_pop_ups(browser, settings, tmp_path):
    """``./run.sh`` as a student starts it: a user with no JupyterLab settings of their own yet."""
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(tmp_path / "config"), "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime")}
    env.pop("JUPYTER_TOKEN", None)
    log_path = tmp_path / "run.log"
    with open(log_path, "w", encoding="utf-8") as log:
        lab = subprocess.Popen([str(REPO / "run.sh")], cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
                               start_new_session=True)
    base = path = token = ""
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not token:
            assert lab.poll() is None, f"./run.sh exited: {log_path.read_text()[-2000:]}"
            found = re.search(r"JupyterLab: (http://127\.0\.0\.1:\d+)(/\S*)\?token=(\w+)", log_path.read_text())
            if found:  # the address the student is told to open
                base, path, token = found.groups()
            elif time.monotonic() > deadline:
                pytest.fail(f"./run.sh printed no JupyterLab address within {START_TIMEOUT} s")
            time.sleep(0.5)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        try:
            for _ in range(int(START_TIMEOUT / 0.5)):  # the server may take a moment to listen
                try:
                    page.goto(f"{base}{path}?token={token}")
                    break
                except Exception:  # noqa: BLE001  (connection refused while JupyterLab starts)
                    time.sleep(0.5)
            page.locator(".jp-NotebookPanel .jp-Cell").first.wait_for(timeout=START_TIMEOUT * 1000)
            active = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current .lm-TabBar-tabLabel")
            assert active.first.inner_text().strip() == "00_intro.ipynb"
            page.wait_for_timeout(8000)  # the news question used to appear a few seconds after start
            page.screenshot(path=tmp_path / "first-screen.png")
            toasts = page.locator(_TOASTS).all_inner_texts()
            assert not toasts, f"pop-ups on the first screen: {toasts} (screenshot: {tmp_path / 'first-screen.png'})"
            menus = page.locator(".lm-MenuBar-itemLabel").all_inner_texts()
            assert "Файл" in menus and "File" not in menus, f"the menu bar is not Russian: {menus}"
        finally:
            page.close()
    finally:
        if token:
            try:
                urlopen(Request(f"{base}/api/shutdown", method="POST", headers={"Authorization": f"token {token}"}),
                        timeout=10).close()
            except (URLError, OSError):
                pass
        try:
            lab.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(lab.pid, signal.SIGKILL)
            lab.wait()
