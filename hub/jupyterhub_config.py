"""JupyterHub for a class on one machine: the machine's accounts log in, each student's server has its own database.

Run as root from the repository, after `hub/install.sh` (hub/README.md):

    .venv/bin/jupyterhub -f hub/jupyterhub_config.py

Students are local accounts in the group LABKIT_HUB_GROUP (default `students`) and log in with
their system password (PAMAuthenticator). Each gets a Jupyter server of their own, started as
that account by LocalProcessSpawner, with the course notebooks and solutions in their home, brought up to
date at every start without touching what they changed (labkit.services.coursecopy).
Before a server starts, `labkit.services.classroom` makes the student's Postgres role and database on
the lab's one Postgres and puts that DATABASE_URL into the server's environment, beside the one
model server everybody shares (OLLAMA_HOST): the superuser password stays in the hub.

Why LocalProcessSpawner and not SystemdSpawner: it needs nothing but JupyterHub and works
wherever the lab runs, containers and CI included (they have no systemd to talk to). What it
lacks is per-student limits: one student's runaway kernel can take the machine's memory. On a
server with systemd, `pip install jupyterhub-systemdspawner` and uncomment the lines at the end
for a memory and CPU cap per student (cgroups); nothing else here changes.

Settings from the environment (all optional):
  LABKIT_HUB_URL     where the hub listens (default http://127.0.0.1:8000; put a TLS proxy in front)
  LABKIT_HUB_GROUP   the Unix group of students (default students)
  LABKIT_HUB_ADMINS  comma-separated admin accounts (the instructor)
  LABKIT_HUB_STATE   the hub's own files (default: the lab home's hub/ folder, closed to students)
and the lab's own (LABKIT_HOME, DATABASE_URL, OLLAMA_HOST, ...), as for `./run.sh`.
"""

import asyncio
import os
import sys
from pathlib import Path

import labkit
from labkit.services import classroom
from labkit.services.home import ensure_private_dir

c = get_config()  # noqa: F821 - JupyterHub provides get_config() to the file it loads

REPO = Path(__file__).resolve().parents[1]
# The hub runs from the lab's .venv; students' servers too, through hub/.students-venv when .venv's own
# Python is in a folder students may not enter (hub/students_venv.py, made by hub/install.sh).
STUDENT_PYTHON = REPO / "hub" / ".students-venv" / "bin" / "python"
if not STUDENT_PYTHON.exists():
    STUDENT_PYTHON = Path(sys.executable)

# --- the lab's services: started when down; the hub holds the superuser's URL --------------------
LAB = labkit.ensure_stack()
STATE = ensure_private_dir(Path(os.environ.get("LABKIT_HUB_STATE") or LAB.home / "hub"), what="hub state folder")

# --- who logs in: the machine's accounts, students by group -----------------------------------------
c.JupyterHub.authenticator_class = "pam"
c.PAMAuthenticator.allowed_groups = {os.environ.get("LABKIT_HUB_GROUP", "students")}
c.Authenticator.admin_users = {name.strip() for name in os.environ.get("LABKIT_HUB_ADMINS", "").split(",") if name.strip()}

# --- where the hub listens and keeps its state -------------------------------------------------------
c.JupyterHub.bind_url = os.environ.get("LABKIT_HUB_URL", "http://127.0.0.1:8000")
c.JupyterHub.db_url = f"sqlite:///{STATE / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(STATE / "jupyterhub_cookie_secret")
c.ConfigurableHTTPProxy.command = [str(REPO / "hub" / "node_modules" / ".bin" / "configurable-http-proxy")]
c.ConfigurableHTTPProxy.pid_file = str(STATE / "proxy.pid")

# --- the students' servers ------------------------------------------------------------------------
c.JupyterHub.spawner_class = "localprocess"
c.Spawner.cmd = [str(STUDENT_PYTHON), "-m", "jupyterhub.singleuser"]
c.Spawner.default_url = "/lab/tree/notebooks/00_intro.ipynb"
c.Spawner.start_timeout = 120  # two cores shared by a class: a server can take a while to come up
c.Spawner.http_timeout = 120


async def labkit_pre_spawn_hook(spawner):
    """The student's own database and the shared model server into the environment; the course into their home."""
    user = spawner.user.name
    environment = await asyncio.to_thread(classroom.spawn_environment, user, LAB)
    # A new dict: the configured one may be shared by every spawner, and must never carry one student's URL.
    spawner.environment = {**spawner.environment, **environment}
    await asyncio.to_thread(classroom.sync_course, user, [REPO / "notebooks", REPO / "solutions"], STUDENT_PYTHON)


c.Spawner.pre_spawn_hook = labkit_pre_spawn_hook

# --- with systemd: a memory and CPU cap per student (pip install jupyterhub-systemdspawner) ---------
# c.JupyterHub.spawner_class = "systemdspawner.SystemdSpawner"
# c.SystemdSpawner.mem_limit = "1G"       # a kernel with the corpus loaded uses a few hundred MB
# c.SystemdSpawner.cpu_limit = 1.0        # the model server needs the rest of two cores
# c.SystemdSpawner.dynamic_users = False  # students are real accounts (PAM)
# c.SystemdSpawner.isolate_tmp = True
