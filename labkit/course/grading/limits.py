"""The limits one student notebook runs under, in one place (the runner sets them, the reports name them)."""

from __future__ import annotations

__all__ = ["FILE_LIMIT", "OUTPUT_LIMIT", "CUT_NOTE", "MEMORY_LIMIT", "CELL_TIMEOUT", "DEFAULT_TIMEOUT"]

FILE_LIMIT = 256 * 2**20  # bytes of any file the runner or the kernel writes (the executed notebook, a student's files)
OUTPUT_LIMIT = 2_000_000  # characters of outputs kept per notebook; a plot is about 50 000
CUT_NOTE = f"\n[проверка: вывод ноутбука обрезан, в нём больше {OUTPUT_LIMIT} символов]\n"
MEMORY_LIMIT = 3 * 2**30  # bytes resident in the runner, the kernel and their children together
CELL_TIMEOUT = 300.0  # seconds one cell may run before it is interrupted (the model loop of 08 needs the most)
DEFAULT_TIMEOUT = 600.0  # seconds per notebook when its starter's metadata names none (as tests/nbrun.py)
