#!/usr/bin/env bash
# The test command: lint, format check, type check, then the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ "${1:-}" == "--quick" ]]; then
    # The quick tier, for the edit loop (a few minutes on 2 cores): lint, then the unit folders
    # and one real-process test per launcher, environment and fault class (tests/quick_tier.py).
    # It assumes `scripts/setup.sh test` ran once; CI and the README run the whole suite.
    shift
    .venv/bin/ruff check src tests examples bench conftest.py
    export DDPKIT_QUICK=1 DDPKIT_FULL_SUITE=0 DDPKIT_ALL_PROJECTS=0
    exec .venv/bin/python -m pytest "$@"
fi
scripts/setup.sh test
.venv/bin/ruff check src tests examples bench conftest.py
.venv/bin/ruff format --check src tests examples bench conftest.py
.venv/bin/mypy
# The whole suite: the runs a plain `pytest` leaves out to keep an edit loop short (a second
# configuration of a path another test runs, every real project under each flag set) run here,
# so CI sees them. Set either to 0 to leave them out.
export DDPKIT_FULL_SUITE="${DDPKIT_FULL_SUITE:-1}" DDPKIT_ALL_PROJECTS="${DDPKIT_ALL_PROJECTS:-1}"
exec .venv/bin/python -m pytest "$@"
