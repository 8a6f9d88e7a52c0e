"""Vectors shipped with the course: the embedded stack's e5 vectors of the knowledge base's texts (15_kb_chunking).

Embedding the knowledge base takes minutes on two cores: its whole documents, its chunks with and
without their heading, the chunks with a line of context. The embedded model server computed them
once (``./run.sh ship-vectors``); ``labkit/data/kb/vectors.npz`` keeps each passage text's vector by
the SHA-256 of the text, with the embedding model's name and the digest of its weights.

``cached_embeddings`` takes a missing passage from the file only when the lab's model server lists the
lab's embedding model under that name with that digest (``/api/tags``, as Ollama lists a model). So
another embedding model, another server or other weights never get these vectors; they embed every
text themselves. What comes from the file is written to the embedding cache like a computed vector
and counted apart (``EmbeddingStats.shipped``, ``LoadReport.shipped_texts``). The vectors are the
model server's output on the machine that shipped them, byte for byte: the same texts get the same
vectors, and so the same rankings, on any machine. A fresh embedding is the same model's vector up to
the CPU's arithmetic, not the same bytes: on an AMD EPYC with AVX2 only, cosine 0.99997 with the
shipped vector and at most 0.0013 apart in a coordinate, enough to flip a near-tie.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Mapping, Sequence, Set
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from labkit.core.corpora.kb import KB_VECTORS
from labkit.core.corpus import DataError

if TYPE_CHECKING:
    from labkit.core.context import Lab

__all__ = ["SHIPPED_FILES", "ShippedVectors", "text_key", "read_shipped", "write_shipped", "kept_vectors",
           "served_digest", "shipped_for"]

SHIPPED_FILES: tuple[Path, ...] = (KB_VECTORS,)


def text_key(text: str) -> bytes:
    """The key of a text: SHA-256 of its UTF-8 bytes (the embedding cache's ``text_hash``)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


class ShippedVectors(NamedTuple):
    """One file of shipped vectors: whose they are, and the passage vector of each text key."""

    model: str
    digest: str  # of the weights, as the model server lists it
    vectors: Mapping[bytes, np.ndarray]


def read_shipped(path: Path) -> ShippedVectors:
    """The vectors of `path`, checked (``DataError`` naming the file when it is not one of ours)."""
    try:
        with np.load(path, allow_pickle=False) as data:
            model, digest = str(data["model"]), str(data["digest"])
            keys, vectors = data["keys"], data["vectors"]
    except (OSError, KeyError, ValueError) as err:
        raise DataError(f"{path}: not a file of shipped vectors ({err})") from err
    if (keys.dtype != np.uint8 or keys.shape[1:] != (32,) or vectors.dtype != np.float32 or vectors.ndim != 2
            or len(keys) != len(vectors)):
        raise DataError(f"{path}: expected keys of 32 bytes (uint8) and as many float32 vectors, "
                        f"got keys {keys.dtype} {keys.shape} and vectors {vectors.dtype} {vectors.shape}")
    if not model or len(digest) != 64:
        raise DataError(f"{path}: the model name and the 64-hex digest of its weights are required")
    return ShippedVectors(model, digest, {key.tobytes(): vector for key, vector in zip(keys, vectors)})


def write_shipped(path: Path, model: str, digest: str, texts: Sequence[str],
                  vectors: Sequence[np.ndarray] | Sequence[Sequence[float]],
                  kept: Mapping[bytes, np.ndarray] | None = None) -> int:
    """Write the vectors of `texts`, and the `kept` ones (by text key, from ``kept_vectors``), to `path` in a stable
    order (by key); return how many texts it holds."""
    fresh = {text_key(text): np.asarray(vector, dtype=np.float32) for text, vector in zip(texts, vectors)}
    pairs = sorted({**(kept or {}), **fresh}.items())
    keys = np.frombuffer(b"".join(key for key, _ in pairs), dtype=np.uint8).reshape(-1, 32)  # bytes: "S32" drops trailing NULs
    np.savez_compressed(path, model=np.array(model), digest=np.array(digest), keys=keys,
                        vectors=np.vstack([vector for _, vector in pairs]))
    return len(pairs)


def kept_vectors(shipped: ShippedVectors | None, model: str, digest: str, keys: Set[bytes]) -> dict[bytes, np.ndarray]:
    """The vectors `shipped` (a file read by ``read_shipped``, or None) holds for the text `keys`, when `model` with
    the weights `digest` made them; else {}.

    How ``./run.sh ship-vectors`` keeps a shipped vector byte for byte: re-embedding the same text moves its
    vector (the batch it shares, the CPU), and that can flip near-ties that tests and shipped scores rely on.
    """
    if shipped is None or (shipped.model, shipped.digest) != (model, digest):
        return {}
    return {key: vector for key, vector in shipped.vectors.items() if key in keys}


@functools.cache
def _file(path: Path) -> ShippedVectors | None:
    return read_shipped(path) if path.is_file() else None


def served_digest(lab: Lab) -> str | None:
    """The digest the lab's model server lists for the lab's embedding model ("" when it lists none; None: no answer)."""
    try:
        listed = lab.models.list().models
    except Exception:  # noqa: BLE001 (no answer: nothing is taken from the files; embedding then says what is wrong)
        return None
    return next((str(m.digest or "") for m in listed if m.model == lab.embed_model), "")


def shipped_for(lab: Lab) -> dict[bytes, np.ndarray]:
    """Every shipped vector made by the lab's embedding model with the weights its server lists; {} for any other.

    The server is asked once per lab (kept in ``Lab.shipped``), again while it does not answer.
    """
    if lab.shipped is not None:
        return lab.shipped
    digest = served_digest(lab)
    found: dict[bytes, np.ndarray] = {}
    for path in SHIPPED_FILES:
        shipped = _file(path)
        if digest and shipped is not None and (shipped.model, shipped.digest) == (lab.embed_model, digest):
            found.update(shipped.vectors)
    if digest is not None:
        lab.shipped = found
    return found
