#!/usr/bin/env bash
# The main job: a real 2-process DDP training run on CPU, on data the example makes.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec .venv/bin/python examples/train.py "$@"
