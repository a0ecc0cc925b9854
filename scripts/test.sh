#!/usr/bin/env bash
# The test command: lint, format check, type check, then the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh test
.venv/bin/ruff check src tests examples bench conftest.py
.venv/bin/ruff format --check src tests examples bench conftest.py
.venv/bin/mypy
exec .venv/bin/python -m pytest "$@"
