"""The course's source article is cited one way (``labkit.course.sources``) and never as a file a clone lacks."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
from nbrun import NOTEBOOKS, notebook_id

from labkit.course.sources import ARTICLES, SOURCE_ARTICLE, SOURCE_NAME, SOURCE_TITLE

# Other names it went by, and a place no clone has.
OTHER_NAMES = re.compile(r"стать\w*-(?:источник|основ)\w*|общ\w+ папк\w+ курса", re.IGNORECASE)
CHECKED = NOTEBOOKS


def _markdown(path: Path) -> str:
    return "\n".join(cell.source for cell in nbformat.read(path, as_version=4).cells if cell.cell_type == "markdown")


def test_the_citation_names_the_article_and_where_to_find_what_it_retells():
    assert SOURCE_TITLE in SOURCE_ARTICLE and "https://habr.com/" in SOURCE_ARTICLE
    for title, line in ARTICLES.items():
        assert title in line and line.lower().startswith(SOURCE_NAME) and not OTHER_NAMES.search(line)


def test_other_names_are_found():
    assert OTHER_NAMES.search("Статья-источник курса") and OTHER_NAMES.search("статьи-основы")
    assert OTHER_NAMES.search("лежит в общей папке курса") and not OTHER_NAMES.search("статья-первоисточник")


@pytest.mark.parametrize("path", CHECKED, ids=notebook_id)
def test_a_notebook_cites_the_source_article_one_way(path: Path):
    text = _markdown(path)
    other = OTHER_NAMES.findall(text)
    assert not other, f"{notebook_id(path)} calls the source article otherwise: {other}; use «{SOURCE_NAME}»"
    for title, line in ARTICLES.items():
        if title in text:
            assert line in text, f"{notebook_id(path)} cites «{title}» without its line in labkit.course.sources"


def test_the_course_cites_it_at_the_start_and_at_the_end():
    for name in ("00_intro", "30_capstone"):
        assert SOURCE_ARTICLE in _markdown(Path(__file__).resolve().parents[1] / "notebooks" / f"{name}.ipynb"), name
