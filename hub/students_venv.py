"""Make the lab's .venv runnable by the students' accounts, if its Python is hidden from them (hub/install.sh).

Students' servers run as the students. A .venv made from a Python inside a private home (pyenv
under /root, say) cannot be started by them: its interpreter is behind a folder only root may
enter. Then this builds ``hub/.students-venv``: a venv of a Python everyone may run, of the same
version, that reads the lab's packages from .venv (a ``.pth`` file), with JupyterLab's files and
the server's settings linked from .venv and a ``python3`` kernel of its own. Nothing is copied or
installed twice. When .venv's Python is usable by everyone, nothing is made and the hub uses .venv.

    .venv/bin/python hub/students_venv.py      # prints the Python the hub should start servers with
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import sysconfig
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGET = REPO / "hub" / ".students-venv"
LINKED = ("share/jupyter/lab", "share/jupyter/labextensions", "share/jupyter/nbconvert", "etc/jupyter")


def usable_by_everyone(path: Path) -> bool:
    """Whether any account may run `path`: the file, and every folder on the way to it, open to others."""
    real = path.resolve()
    if not os.stat(real).st_mode & stat.S_IXOTH:
        return False
    return all(os.stat(folder).st_mode & stat.S_IXOTH for folder in real.parents)


def public_python() -> Path:
    """A Python of this one's version that everyone may run."""
    name = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for folder in ("/usr/bin", "/usr/local/bin", "/opt/python/bin"):
        candidate = Path(folder) / name
        if candidate.exists() and usable_by_everyone(candidate):
            return candidate
    raise SystemExit(f"students cannot run {sys.executable} (it lies in a private folder), and no {name} that "
                     f"everyone may run was found: install one (Debian: apt-get install {name}-venv), or make "
                     ".venv from a Python outside any private home")


def build() -> Path:
    """The students' venv (made or checked); returns its Python."""
    site = Path(sysconfig.get_paths()["purelib"])
    python = TARGET / "bin" / "python"
    stamp = TARGET / "lab-site-packages"
    if python.exists() and stamp.exists() and stamp.read_text() == str(site):
        return python
    shutil.rmtree(TARGET, ignore_errors=True)
    subprocess.run([str(public_python()), "-m", "venv", "--without-pip", str(TARGET)], check=True)
    own_site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   check=True, capture_output=True, text=True).stdout.strip())
    # addsitedir, not a plain path: .venv's own .pth files (the editable labkit among them) must run too
    (own_site / "labkit-lab-venv.pth").write_text(f"import site; site.addsitedir({str(site)!r})\n")
    for part in LINKED:
        source = Path(sys.prefix) / part
        if source.exists():
            (TARGET / part).parent.mkdir(parents=True, exist_ok=True)
            (TARGET / part).symlink_to(source, target_is_directory=True)
    subprocess.run([str(python), "-m", "ipykernel", "install", "--sys-prefix", "--name", "python3",
                    "--display-name", "Python 3 (labkit)"], check=True, capture_output=True)
    stamp.write_text(str(site))
    return python


def main() -> None:
    if usable_by_everyone(Path(sys.executable)):
        shutil.rmtree(TARGET, ignore_errors=True)
        print(sys.executable)
    else:
        print(build())


if __name__ == "__main__":
    main()
