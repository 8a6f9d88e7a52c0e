#!/usr/bin/env bash
# One command for the hybrid-search RAG lab.
#   ./run.sh                 start the stack, then JupyterLab on 127.0.0.1 (opens notebooks/)
#   ./run.sh test [ARGS]     start the stack, then pytest (ARGS go to pytest)
#   ./run.sh up|down|status  manage the stack (python -m labkit ...)
#   ./run.sh eval|ask|bench  lab tools (python -m labkit ... --help)
#   ./run.sh --compose ...   use the Docker reference stack (compose.yaml) instead of the embedded one
set -euo pipefail
cd "$(dirname "$0")"

say() { printf '[run.sh] %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

usage() {
    sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'
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
    "$VENV_PY" -m pip install --disable-pip-version-check -q -r requirements.txt
    # labkit itself, editable: notebooks, papermill and the model server import this checkout.
    "$VENV_PY" -m pip install --disable-pip-version-check -q --no-deps -e .
    # Kernel `python3` of this venv, so JupyterLab and papermill run notebooks with these packages.
    "$VENV_PY" -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (labkit)" >/dev/null
    echo "$req_hash" > .venv/.requirements.sha256
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
    say "Install Ollama natively (https://ollama.com), pull the models and set OLLAMA_HOST=http://127.0.0.1:11434."
    say "Continuing with the embedded Postgres only."
    up_args=(--db-only)
fi

compose_up() {
    command -v docker >/dev/null 2>&1 \
        || die "docker is not installed: install Docker with the compose plugin, or run ./run.sh without --compose (embedded stack)"
    docker compose version >/dev/null 2>&1 || die "the docker compose plugin is missing (docker compose version failed)"
    say "starting compose.yaml (db, ollama) and waiting for health checks ..."
    docker compose up -d --wait --wait-timeout 300
    for model in qwen3-embedding:0.6b qwen3:1.7b deepseek-r1:1.5b; do
        say "ollama pull $model"
        docker compose exec -T ollama ollama pull "$model"
    done
}

if [[ "${LAB_STACK:-embedded}" == "compose" ]]; then
    case "$command" in
        down) exec docker compose down ;;  # volumes (data, models) are kept
        status|help|-h|--help) ;;
        *) compose_up ;;
    esac
fi

stack_up() { python -m labkit up "${up_args[@]+"${up_args[@]}"}"; }

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
        say "JupyterLab: http://127.0.0.1:$port/lab?token=$token"
        exec python -m jupyter lab --no-browser --ip=127.0.0.1 --port="$port" --ServerApp.port_retries=0 \
            --IdentityProvider.token="$token" --ServerApp.root_dir="$PWD" \
            --LabApp.default_url=/lab/tree/notebooks \
            "${root_flag[@]+"${root_flag[@]}"}"
        ;;
    test)
        stack_up
        targets=(tests)  # unless the arguments name test files or folders themselves
        for arg in "$@"; do [[ "$arg" != -* && -e "${arg%%::*}" ]] && targets=(); done
        rc=0
        python -m pytest -q "${targets[@]+"${targets[@]}"}" "$@" || rc=$?  # includes ruff and mypy (tests/test_quality.py)
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
    down|status|eval|ask|bench)
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
