"""What a search branch needs beyond SQL: a capability of this process, or data a separate step stores (11_beyond_rrf).

* ``Need``: a capability not every machine has, checked in this process (``check()`` says why it
  is missing, None when it is there), e.g. the in-process e5 the latent terms need.
* ``CorpusNeed``: what a branch needs of the corpus it searches (a field only the knowledge base has,
  chunks of long documents); ``check(corpus)`` says why the corpus lacks it (16_kb_codes).
* ``Stored``: data a branch reads that only a separate step writes into the lab's database;
  ``missing(lab)`` says what is absent and the command that makes it (``Missing``, in English for
  the eval command and in Russian for a lesson), None when it is there.

``labkit.retrieval.branches.registry`` gives each branch its needs; a pipeline needs what its branches need.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from labkit.core.context import Lab
    from labkit.core.corpus import Corpus

__all__ = ["Need", "Missing", "Stored", "CorpusNeed", "first_problem", "first_missing", "first_misfit"]


@dataclass(frozen=True)
class Need:
    """A capability a branch needs: `check()` says why this process lacks it (None: it has it); `ru` says what it is.

    `label` names it in a table, in Russian (default: `ru`).
    """

    check: Callable[[], str | None]
    ru: str
    label: str = ""

    def __post_init__(self) -> None:
        if not self.label:
            object.__setattr__(self, "label", self.ru)


class Missing(NamedTuple):
    """Data a branch needs and the lab lacks, with the command that makes it: `en` for the eval command, `ru` for a lesson."""

    en: str
    ru: str


@dataclass(frozen=True)
class Stored:
    """Data a branch reads that a separate step stores in the lab's database: `missing(lab)` is None when it is there.

    `label` names the data in a table, in Russian.
    """

    missing: Callable[[Lab], Missing | None]
    label: str


def first_problem(needs: tuple[Need, ...]) -> str | None:
    """Why the first unmet need of `needs` is unmet; None when this process has them all."""
    return next((problem for need in needs if (problem := need.check()) is not None), None)


def first_missing(stored: tuple[Stored, ...], lab: Lab) -> Missing | None:
    """What the lab lacks of `stored` first; None when its database holds it all."""
    return next((missing for need in stored if (missing := need.missing(lab)) is not None), None)


@dataclass(frozen=True)
class CorpusNeed:
    """What a branch needs of the corpus it searches: `check(corpus)` says why it lacks it (None: it has it)."""

    check: Callable[[Corpus], str | None]
    ru: str


def first_misfit(needs: tuple[CorpusNeed, ...], corpus: Corpus) -> str | None:
    """Why `corpus` lacks the first of `needs` it lacks; None when it has them all."""
    return next((problem for need in needs if (problem := need.check(corpus)) is not None), None)
