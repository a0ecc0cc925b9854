#!/usr/bin/env bash
# The main job: a real 2-process DDP training run on CPU, on data the example makes; it ends with
# a picture of what the model learned. Arguments go to examples/train.py (--help lists them).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh main
exec .venv/bin/python examples/train.py "$@"
