"""The lab's own errors: one base class whose message says what to do (taught in 01_corpus).

A ``LabError`` is a user-facing failure (a service down, a malformed data file), not a
bug. The command line prints it as one line; Jupyter shows only its message, not a
traceback (IPython calls ``_render_traceback_`` when an exception defines it).
"""

from __future__ import annotations

__all__ = ["LabError"]


class LabError(RuntimeError):
    """A failure the user can fix; the message says how."""

    def _render_traceback_(self) -> list[str]:
        """What Jupyter prints instead of a traceback: the class name and the message."""
        return [f"{type(self).__name__}: {self}"]
