#!/usr/bin/env bash
# Create or update .venv with everything ddpkit needs to run and test. Idempotent and quick when
# nothing changed. The torch pin lives here and only here: torch==2.13.0 is the CPU build this
# kind of machine has on disk; a looser spec makes pip download a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
TORCH_PIN="torch==2.13.0"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.ddpkit-setup
want="$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet "$TORCH_PIN"
  .venv/bin/python -m pip install --quiet -e ".[test,lightning]"
  echo "$want" > "$stamp"
fi
