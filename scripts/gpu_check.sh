#!/usr/bin/env bash
# The prepared GPU check, for a lent GPU machine (one short run, able to fail):
#
#   1. exits 3 at once, with one line, when torch sees no CUDA device;
#   2. runs the GPU tests (tests/gpu: a single-GPU fit in every precision, the nccl DDP fits)
#      and fails when any of them failed or was skipped (a run of skips is no pass); a test that
#      needs more GPUs than the machine has is deselected, and one line says so;
#   3. runs a short bench on the GPU (python -m bench --gpu --quick) and prints its figures.
#
# Usage on the device tool:  bash scripts/gpu_check.sh 2>&1 | tee $OUT/gpu.log
# The interpreter is $PYTHON when set (one with a CUDA build of torch), else .venv/bin/python
# (made by scripts/setup.sh test when missing). Absolute times count only on a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${PYTHON:-}" ]; then
  PY="$PYTHON"
else
  [ -x .venv/bin/python ] || scripts/setup.sh test
  PY=.venv/bin/python
fi
gpus="$("$PY" - <<'PY'
import sys

import torch

count = torch.cuda.device_count() if torch.cuda.is_available() else 0
if count == 0:
    print(
        f"gpu_check: no CUDA device is visible (torch {torch.__version__}, CUDA build "
        f"{torch.version.cuda or 'none'}): nothing was checked. Fix: run it on a GPU machine "
        f"with a CUDA build of torch (PYTHON=<its python> bash scripts/gpu_check.sh).",
        file=sys.stderr,
    )
    sys.exit(3)
print(count)
PY
)"
# The bench's output goes to $OUT (the device tool brings it back); without one, to a temporary
# folder made only now (after the CUDA check, which may exit) and removed when the script ends.
if [ -n "${OUT:-}" ]; then
  OUT_DIR="$OUT"
else
  OUT_DIR="$(mktemp -d)"
  trap 'rm -rf "$OUT_DIR"' EXIT
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>/dev/null || true
"$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'gpus', torch.cuda.device_count(), torch.cuda.get_device_name(0))"

deselect=()
if [ "$gpus" -lt 2 ]; then
  echo "gpu_check: $gpus GPU visible: the 2-GPU test is left out (deselected, not skipped)."
  deselect=(--deselect tests/gpu/test_gpu.py::test_two_gpu_examples)
fi
# tests/gpu/conftest.py: with GPU_CHECK_NO_SKIPS=1 a skipped test fails the run. In one process
# (-n 0: the suite's xdist workers would share the GPUs and split the skip count).
GPU_CHECK_NO_SKIPS=1 "$PY" -m pytest tests/gpu -n 0 -v -rs -p no:cacheprovider "${deselect[@]}" "$@"

"$PY" -m bench --gpu --quick --no-plot --out "$OUT_DIR/bench"
sed -n '/^## Against the targets/,/^## Every run/p' "$OUT_DIR/bench/RESULTS.md"
sed -n '/^## Every run/,/^## Ratios/p' "$OUT_DIR/bench/RESULTS.md"
echo "gpu_check: passed."
