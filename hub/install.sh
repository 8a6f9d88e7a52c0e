#!/usr/bin/env bash
# Class mode (hub/README.md): JupyterHub into the lab's .venv, its proxy into hub/node_modules.
# Installs only what is missing or changed; `./run.sh test` calls it so that tests/test_hub.py has both.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '[hub/install.sh] %s\n' "$*" >&2; }

# The lab's .venv first (run.sh makes it and installs requirements.txt; `help` starts nothing).
[[ -x .venv/bin/python ]] || ./run.sh help >/dev/null

stamp=.venv/.hub-requirements.sha256
want="$(sha256sum hub/requirements.txt | cut -d' ' -f1)"
if [[ "$(cat "$stamp" 2>/dev/null || true)" != "$want" ]]; then
    say "installing hub/requirements.txt (JupyterHub) into .venv ..."
    .venv/bin/python -m pip install --disable-pip-version-check -q -r hub/requirements.txt
    echo "$want" > "$stamp"
fi

# configurable-http-proxy is JupyterHub's proxy, an npm package (Node.js 20 or newer).
proxy=hub/node_modules/.bin/configurable-http-proxy
if [[ ! -x "$proxy" || hub/package-lock.json -nt "$proxy" ]]; then
    command -v npm >/dev/null 2>&1 || { say "error: npm not found: install Node.js 20+ (it brings npm)"; exit 1; }
    say "installing configurable-http-proxy (hub/package-lock.json) into hub/node_modules ..."
    npm ci --prefix hub --no-audit --no-fund --loglevel=error
    touch "$proxy"
fi

# Students run the lab's packages as themselves: a venv they may start, if .venv's Python is hidden from them.
.venv/bin/python hub/students_venv.py >/dev/null
