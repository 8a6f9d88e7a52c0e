"""labkit: the code the notebooks of the hybrid-search RAG lab call.

Each module holds one idea and names the notebook that teaches it.
"""

from .settings import Settings, get_settings, lab_home

__all__ = [
    "Settings",
    "get_settings",
    "lab_home",
]
