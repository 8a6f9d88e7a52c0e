"""The lab home: a private folder that only the user running the lab can enter (README, «On a shared machine»).

Everything the stack keeps (the database cluster, its password, logs, joined model files,
the state file) lives in the lab home, so the home is checked before anything is written
to it: it must be a real directory (never a symlink), owned by the user running the lab,
and closed to everyone else. A missing home is created ``0700``. A home that fails a check
is refused with a message that says what to do; nothing in it is chowned or chmodded
except the home itself, which is ours.

When the lab runs as root, Postgres runs as the system user ``pgserver`` and must reach its
data folder inside the home: the home is then ``0710`` with that user's group, which lets
the database server traverse it and nobody else. No folder outside the home is touched.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from labkit.core.errors import LabError

__all__ = ["HomeError", "PRIVATE", "SERVER_USER", "server_ids", "ensure_home", "ensure_private_dir", "write_secret", "read_secret"]

PRIVATE = 0o700
SERVER_USER = "pgserver"  # the OS user the embedded Postgres runs as when the lab runs as root


class HomeError(LabError):
    """The lab home (or a folder in it) is unsafe to use; the message says why and what to do."""


def _uid() -> int:
    return os.geteuid() if hasattr(os, "geteuid") else 0


def ensure_private_dir(path: Path, mode: int = PRIVATE, group: int | None = None, what: str = "folder") -> Path:
    """Create `path` (mode `mode`) or check it: a real directory owned by us; then set `mode` (and `group`).

    Parents are created as the system would (``mkdir -p``) and never changed afterwards.
    Raises HomeError when `path` is a symlink, not a directory, or owned by another user.
    """
    path = Path(os.path.abspath(path))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        os.mkdir(path, mode)
    except FileExistsError:
        pass
    except OSError as err:
        raise HomeError(f"cannot create the lab {what} {path}: {err.strerror}. Set LABKIT_HOME to a folder you own.") \
            from err
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        raise HomeError(f"the lab {what} {path} is a symlink (to {os.readlink(path)}); refusing to follow it. "
                        "Remove the link, or set LABKIT_HOME to a folder you own.")
    if not stat.S_ISDIR(info.st_mode):
        raise HomeError(f"the lab {what} {path} exists but is not a folder. Remove it, or set LABKIT_HOME elsewhere.")
    if info.st_uid != _uid():
        raise HomeError(f"the lab {what} {path} belongs to uid {info.st_uid}, not to you (uid {_uid()}); "
                        "someone else may have created it. Remove it, or set LABKIT_HOME to a folder you own.")
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_NOFOLLOW", 0))
    try:  # through the descriptor: the folder checked above is the folder changed
        if group is not None and info.st_gid != group:
            os.fchown(fd, -1, group)
        if stat.S_IMODE(info.st_mode) != mode:
            os.fchmod(fd, mode)
    finally:
        os.close(fd)
    return path


def server_ids() -> tuple[int, int] | None:
    """(uid, gid) of SERVER_USER when we are root and it exists; None otherwise (the server runs as us)."""
    if _uid() != 0:
        return None
    import pwd

    try:
        entry = pwd.getpwnam(SERVER_USER)
    except KeyError:
        return None
    return entry.pw_uid, entry.pw_gid


def ensure_home(home: Path) -> Path:
    """The lab home, created or checked (see the module docstring); returns its absolute path.

    ``0700``; as root, once the Postgres system user exists, ``0710`` with that user's group.
    """
    ids = server_ids()
    if ids is None:
        return ensure_private_dir(home, what="home")
    return ensure_private_dir(home, mode=0o710, group=ids[1], what="home")


def write_secret(path: Path, text: str) -> None:
    """Write `text` to a new file readable by us only (``0600``); never follows or replaces a link."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)


def read_secret(path: Path) -> str | None:
    """The stripped text of a secret file we own with no access for others; None when it does not exist."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        return None
    except OSError as err:
        raise HomeError(f"cannot read {path}: {err.strerror}") from err
    with os.fdopen(fd) as handle:
        info = os.fstat(handle.fileno())
        if info.st_uid != _uid() or info.st_mode & 0o077:
            raise HomeError(f"{path} must belong to you and be readable by you only (chmod 600 {path})")
        return handle.read().strip()
