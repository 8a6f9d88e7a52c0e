"""The course as a static site that opens without a network: ``./run.sh site`` (README, «The course as a site»).

Pages are the executed copies the notebook tests write (``build/executed/<folder>/<name>.ipynb``),
rendered by nbconvert's ``lab`` template in course order, with Russian navigation. A notebook
without a fresh executed copy is rendered from its source and says so on the page. Nothing is
fetched when a page opens: formulas become MathML at build time, Mermaid diagrams are drawn by a
bundled script (``site_assets/``), widgets (they need a kernel) become a note, and the template's
require.js, MathJax and widget-manager scripts, all from CDNs, are left out.
"""

from __future__ import annotations

import html
import posixpath
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import nbformat
from jinja2 import DictLoader, pass_context
from latex2mathml import exceptions as tex_errors
from latex2mathml.converter import convert as tex_to_mathml
from nbconvert import HTMLExporter
from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath

from labkit.course.coursemap import notebook_title

__all__ = ["Page", "SiteReport", "SECTIONS", "course_pages", "is_fresh", "build_site"]

SECTIONS = ("notebooks", "solutions")  # folders of the repository, in course order
ASSETS = Path(__file__).with_name("site_assets")
MARKER = ".labkit-site"  # in the site's folder: a folder without it is never deleted by a rebuild
KINDS = {"overview": "обзор", "lesson": "урок", "exercise": "упражнение", "solution": "решение"}
COURSE_TITLE = "Гибридный поиск и агент в PostgreSQL"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_NOTE = ('<p class="labkit-note">Здесь в JupyterLab интерактивный виджет. На статической странице он не '
               "работает: откройте ноутбук в JupyterLab и выполните ячейки.</p>")
UNEXECUTED_NOTE = ('<p class="labkit-note">Эта страница собрана из ноутбука без выполнения: результатов ячеек '
                   "здесь нет. Выполните ноутбук в JupyterLab или соберите сайт заново: <code>./run.sh site</code>.</p>")

_TEMPLATE_NAME = "labkit_site.html.j2"
_TEMPLATE = """{%- extends 'index.html.j2' -%}
{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}
{%- block jupyter_widgets -%}{%- endblock jupyter_widgets -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}
{%- if resources.labkit.mermaid %}
<script src="{{ resources.labkit.root }}assets/mermaid.min.js"></script>
<script>
document.addEventListener("DOMContentLoaded", () => {
  mermaid.initialize({ startOnLoad: false, securityLevel: "strict" });
  mermaid.run({ querySelector: ".jp-Mermaid > pre.mermaid" });
});
</script>
{%- endif %}
{%- endblock html_head_js_mermaidjs -%}
{%- block html_head_css -%}
<link rel="stylesheet" href="{{ resources.labkit.root }}assets/site.css">
{%- endblock html_head_css -%}
{%- block body_header -%}
{{ super() }}
{{ resources.labkit.top }}
{%- endblock body_header -%}
{% block body_footer %}
{{ resources.labkit.bottom }}
{{ super() }}
{% endblock body_footer %}
"""

_CSS = """
body.labkit-index { font: 16px/1.5 system-ui, sans-serif; max-width: 52rem; margin: 2rem auto; padding: 0 1rem; }
.labkit-nav { display: flex; flex-wrap: wrap; gap: .5rem 1.5rem; padding: .6rem 1rem; margin: 0 0 1rem;
  font: 14px/1.4 system-ui, sans-serif; background: #f3f5f8; border-bottom: 1px solid #d8dde5; }
.labkit-nav a { text-decoration: none; }
.labkit-nav a[rel="next"] { margin-left: auto; }
.labkit-note { padding: .5rem .8rem; background: #fff8e1; border-left: 4px solid #f0b400; }
.labkit-course { list-style: none; padding-left: 0; }
.labkit-course li { margin: .35rem 0; }
.labkit-kind { font-size: 85%; color: #5f6b7a; margin-left: .4rem; }
.labkit-tex { white-space: nowrap; }
math[display="block"] { margin: 1rem 0; }
footer.labkit-footer { margin-top: 2rem; font-size: 85%; color: #5f6b7a; }
"""


@dataclass(frozen=True)
class Page:
    """One notebook of the course and the page made from it."""

    source: Path  # the committed notebook
    path: str  # the page, relative to the site's root: "notebooks/04_rrf.html"
    title: str
    kind: str  # a key of KINDS
    executed: Path | None  # the fresh executed copy it is rendered from; None: rendered from the source


@dataclass(frozen=True)
class SiteReport:
    """What `build_site` wrote."""

    out: Path
    pages: list[Page]
    broken_links: list[str]  # "notebooks/04_rrf.html: 99_nope.ipynb": relative links to nothing in the course

    @property
    def unexecuted(self) -> list[Page]:
        """Pages rendered from a source notebook, without outputs."""
        return [page for page in self.pages if page.executed is None]


def is_fresh(source: Path, executed: Path) -> bool:
    """Whether `executed` is a complete, error-free papermill run of `source` made after its last change."""
    if not executed.is_file() or executed.stat().st_mtime < source.stat().st_mtime:
        return False
    try:
        nb = nbformat.read(executed, as_version=4)
    except (OSError, ValueError):  # half-written or not a notebook
        return False
    run = nb.metadata.get("papermill", {})
    if run.get("exception") or not run.get("end_time"):  # failed, or killed before it finished
        return False
    return not any(output.get("output_type") == "error" for cell in nb.cells for output in cell.get("outputs", []))


def course_pages(root: Path, executed_dir: Path) -> list[Page]:
    """The notebooks of `root` in course order (``notebooks/`` then ``solutions/``), with their fresh executed copies."""
    solved = {path.name for path in (root / "solutions").glob("*.ipynb")}
    pages: list[Page] = []
    for section in SECTIONS:
        for source in sorted((root / section).glob("*.ipynb")):
            title = notebook_title(nbformat.read(source, as_version=4).cells) or source.stem
            if section == "solutions":
                kind, title = "solution", f"Решение: {title}"
            else:
                kind = "overview" if not pages else "exercise" if source.name in solved else "lesson"
            copy = executed_dir / section / source.name
            pages.append(Page(source.resolve(), f"{section}/{source.stem}.html", title, kind,
                              copy if is_fresh(source, copy) else None))
    return pages


# --- Markdown: formulas as MathML --------------------------------------------------------------
_TEX_ERRORS: tuple[type[Exception], ...] = (
    ValueError, IndexError, KeyError,
    *(value for value in vars(tex_errors).values() if isinstance(value, type) and issubclass(value, Exception)),
)  # fmt: skip


def mathml(tex: str, display: str = "inline") -> str:
    """A LaTeX formula as MathML, which browsers draw without a script; the escaped source if it does not parse."""
    try:
        return tex_to_mathml(tex, display=display)
    except _TEX_ERRORS:
        return f'<code class="labkit-tex">{html.escape(tex)}</code>'


class _Renderer(IPythonRenderer):
    """nbconvert's Markdown renderer with formulas turned into MathML instead of left for MathJax."""

    def inline_math(self, body: str) -> str:
        return mathml(body)

    def block_math(self, body: str) -> str:
        return mathml(body, "block")

    def latex_environment(self, name: str, body: str) -> str:
        return mathml(f"\\begin{{{name}}}{body}\\end{{{name}}}", "block")


class _Exporter(HTMLExporter):
    """The ``lab`` HTML exporter with `_Renderer` for Markdown cells and Markdown outputs."""

    @pass_context
    def markdown2html(self, context: Any, source: str) -> str:
        cell = context.get("cell", {})
        renderer = _Renderer(
            escape=False, attachments=cell.get("attachments", {}), embed_images=self.embed_images,
            path=context.get("resources", {}).get("metadata", {}).get("path", ""),
            anchor_link_text=self.anchor_link_text, exclude_anchor_links=self.exclude_anchor_links,
            **self.lexer_options,
        )  # fmt: skip
        return MarkdownWithMath(renderer=renderer).render(source)


def _exporter() -> HTMLExporter:
    return _Exporter(template_name="lab", template_file=_TEMPLATE_NAME,
                     extra_loaders=[DictLoader({_TEMPLATE_NAME: _TEMPLATE})], embed_images=True, language_code="ru")


# --- links ---------------------------------------------------------------------------------------
_HREF = re.compile(r'(<a\b[^>]*?\bhref=")([^"]*)(")', re.IGNORECASE)
_NOT_RELATIVE = re.compile(r"^(?:[a-z][a-z0-9+.-]*:|//|#)", re.IGNORECASE)  # a scheme, another host, this page


def _relative(from_page: str, to: str) -> str:
    return posixpath.relpath(to, posixpath.dirname(from_page) or ".")


def _fix_links(text: str, from_page: str, bases: list[Path], root: Path, pages: dict[Path, Page],
               broken: list[str]) -> str:
    """Point relative links to notebooks (resolved against `bases`) at their pages; list the ones that lead nowhere."""
    site_paths = {page.path for page in pages.values()} | {"index.html"}

    def resolve(href: str) -> str | None:
        target, _, fragment = href.partition("#")
        if posixpath.normpath(posixpath.join(posixpath.dirname(from_page), target)) in site_paths:
            return href  # already a page of the site (navigation)
        for base in bases:
            path = (base / unquote(target)).resolve()
            if path in pages:
                return _relative(from_page, pages[path].path) + (f"#{fragment}" if fragment else "")
            if path.is_dir() and path.parent == root and path.name in SECTIONS:  # «../solutions/»
                return _relative(from_page, f"index.html#{path.name}")
        return None

    def fix(match: re.Match[str]) -> str:
        href = html.unescape(match.group(2))
        if not href or _NOT_RELATIVE.match(href):
            return match.group(0)
        resolved = resolve(href)
        if resolved is None:
            broken.append(f"{from_page}: {href}")
            return match.group(0)
        return match.group(1) + html.escape(resolved) + match.group(3)

    return _HREF.sub(fix, text)


def _link_bases(page: Page, root: Path) -> list[Path]:
    # A solution is its exercise completed: links written for notebooks/ still lead where they did there.
    return [page.source.parent, root / "notebooks"] if page.kind == "solution" else [page.source.parent]


# --- pages ---------------------------------------------------------------------------------------
def _a(from_page: str, to: Page, text: str, rel: str = "") -> str:
    rel_attr = f' rel="{rel}"' if rel else ""
    return f'<a href="{html.escape(_relative(from_page, to.path))}"{rel_attr}>{html.escape(text)}</a>'


def _nav(page: Page, before: Page | None, after: Page | None, twin: Page | None) -> str:
    links = [f'<a href="{_relative(page.path, "index.html")}">Оглавление курса</a>']
    if before:
        links.append(_a(page.path, before, f"← Назад: {before.title}", "prev"))
    if twin:
        links.append(_a(page.path, twin, "Решение этого задания" if page.kind == "exercise" else "Само задание"))
    if after:
        links.append(_a(page.path, after, f"Далее: {after.title} →", "next"))
    return f'<nav class="labkit-nav" aria-label="Навигация по курсу">{"".join(links)}</nav>'


def _prepare(nb: nbformat.NotebookNode, title: str) -> bool:
    """Make an executed notebook static: widgets become a note, papermill's parameters cell says what it is.

    Returns whether the notebook has Mermaid diagrams.
    """
    nb.metadata.pop("widgets", None)  # the widget state only serves the CDN widget manager
    nb.metadata["title"] = title
    for cell in nb.cells:
        if "injected-parameters" in cell.get("metadata", {}).get("tags", []):  # papermill's cell, in English
            cell.source = cell.source.replace("# Parameters", "# Параметры этого прогона (их задал запуск papermill)", 1)
        for output in cell.get("outputs", []):
            if WIDGET_VIEW in output.get("data", {}):
                output["data"] = {"text/html": WIDGET_NOTE}
    return any(_has_mermaid(cell) for cell in nb.cells)


def _has_mermaid(cell: nbformat.NotebookNode) -> bool:
    """A diagram in a markdown cell, or in a markdown output (06_agent draws its graph that way)."""
    if cell.cell_type == "markdown":
        return "```mermaid" in cell.source
    shown = (output.get("data", {}).get("text/markdown", "") for output in cell.get("outputs", []))
    return any("```mermaid" in ("".join(text) if isinstance(text, list) else text) for text in shown)


def _render_page(exporter: HTMLExporter, page: Page, neighbours: tuple[Page | None, Page | None],
                 twin: Page | None, root: Path, pages: dict[Path, Page], broken: list[str]) -> str:
    nb = nbformat.read(page.executed or page.source, as_version=4)
    mermaid = _prepare(nb, page.title)
    nav = _nav(page, *neighbours, twin)
    top = nav + ("" if page.executed else UNEXECUTED_NOTE)
    resources = {"metadata": {"name": page.source.stem, "path": str(page.source.parent)},
                 "labkit": {"root": _relative(page.path, "index.html")[: -len("index.html")], "mermaid": mermaid,
                            "top": top, "bottom": nav}}
    body, _ = exporter.from_notebook_node(nb, resources=resources)
    return _fix_links(body, page.path, _link_bases(page, root), root, pages, broken)


def _overview(page: Page, root: Path, pages: dict[Path, Page], broken: list[str]) -> str:
    """The first paragraph of the overview notebook's title cell, as HTML for the index."""
    first = nbformat.read(page.source, as_version=4).cells[0].source.split("\n\n")
    text = next((part for part in first if part.strip() and not part.startswith("#")), "")
    rendered = MarkdownWithMath(renderer=_Renderer(escape=False)).render(text)
    return _fix_links(rendered, "index.html", [page.source.parent], root, pages, broken)


def _index(course: list[Page], root: Path, pages: dict[Path, Page], broken: list[str]) -> str:
    twins = {page.source.name: page for page in course if page.kind == "solution"}
    items = []
    for page in course:
        if page.kind == "solution":
            continue
        extra = f' · {_a("index.html", twins[page.source.name], "решение")}' if page.kind == "exercise" else ""
        items.append(f'<li>{_a("index.html", page, page.title)}<span class="labkit-kind">{KINDS[page.kind]}</span>'
                     f"{extra}</li>")
    solutions = [f'<li>{_a("index.html", page, page.title)}</li>' for page in course if page.kind == "solution"]
    overview = course[0]
    unexecuted = [page.title for page in course if page.executed is None]
    footer = ("Все страницы собраны из выполненных ноутбуков." if not unexecuted else
              "Без выполнения (без результатов ячеек) собраны: " + html.escape("; ".join(unexecuted)) + ".")
    return f"""<!DOCTYPE html>
<html lang="ru">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(COURSE_TITLE)} — оглавление курса</title>
<link rel="stylesheet" href="assets/site.css">
</head>
<body class="labkit-index">
<main>
<h1>{html.escape(COURSE_TITLE)}</h1>
<section id="overview">
<h2>Обзор</h2>
{_overview(overview, root, pages, broken)}
<p>Начните с {_a("index.html", overview, overview.title)}. Уроки идут по порядку; упражнения помечены, к каждому есть
решение. Это статическая копия ноутбуков с результатами одного прогона: чтобы менять код и запускать ячейки,
откройте курс в JupyterLab (<code>./run.sh</code>).</p>
</section>
<section id="notebooks">
<h2>Уроки и упражнения</h2>
<ul class="labkit-course">
{chr(10).join(items)}
</ul>
</section>
<section id="solutions">
<h2>Решения упражнений</h2>
<ul class="labkit-course">
{chr(10).join(solutions)}
</ul>
</section>
<footer class="labkit-footer">{footer}</footer>
</main>
</body>
</html>
"""


def _replace_folder(new: Path, out: Path) -> None:
    if out.exists():
        if any(out.iterdir()) and not (out / MARKER).exists():
            raise FileExistsError(f"{out} exists and is not a site built by labkit: choose another folder")
        shutil.rmtree(out)
    new.rename(out)


def build_site(root: Path, out: Path, executed_dir: Path,
               progress: Callable[[Page], None] | None = None) -> SiteReport:
    """Render the course of `root` into `out` (``index.html`` and one page per notebook), from `executed_dir`'s copies."""
    root = root.resolve()
    course = course_pages(root, executed_dir)
    if not course:
        raise FileNotFoundError(f"no notebooks in {root / 'notebooks'}")
    pages = {page.source: page for page in course}
    twins = {(page.kind, page.source.name): page for page in course}
    work = out.with_name(out.name + ".partial")  # built beside, then swapped in: a failed build keeps the old site
    shutil.rmtree(work, ignore_errors=True)
    (work / "assets").mkdir(parents=True)
    (work / MARKER).write_text("built by `python -m labkit site`\n", encoding="utf-8")
    (work / "assets" / "site.css").write_text(_CSS, encoding="utf-8")
    for asset in ("mermaid.min.js", "mermaid.LICENSE"):
        shutil.copyfile(ASSETS / asset, work / "assets" / asset)
    exporter = _exporter()
    broken: list[str] = []
    # «Назад»/«Далее» walk the lessons, and the solutions among themselves: the last lesson leads nowhere else.
    chains = [[p for p in course if p.kind != "solution"], [p for p in course if p.kind == "solution"]]
    neighbours_of = {page.path: (chain[n - 1] if n else None, chain[n + 1] if n + 1 < len(chain) else None)
                     for chain in chains for n, page in enumerate(chain)}
    for page in course:
        if progress:
            progress(page)
        neighbours = neighbours_of[page.path]
        twin_kind = {"exercise": "solution", "solution": "exercise"}.get(page.kind, "")
        twin = twins.get((twin_kind, page.source.name))
        target = work / page.path
        target.parent.mkdir(exist_ok=True)
        target.write_text(_render_page(exporter, page, neighbours, twin, root, pages, broken), encoding="utf-8")
    (work / "index.html").write_text(_index(course, root, pages, broken), encoding="utf-8")
    _replace_folder(work, out)
    return SiteReport(out, course, broken)
