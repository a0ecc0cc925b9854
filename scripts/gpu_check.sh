#!/usr/bin/env bash
# The prepared GPU check, for a lent GPU machine (one short run): sets up the venv there, then
# runs the GPU tests (single-GPU fit in every precision, a 1-GPU nccl DDP fit) and prints the
# device. Usage on the device tool: bash scripts/gpu_check.sh 2>&1 | tee $OUT/gpu.log
set -euo pipefail
cd "$(dirname "$0")/.."
nvidia-smi --query-gpu=name,memory.total --format=csv || true
scripts/setup.sh
.venv/bin/python -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.device_count())"
exec .venv/bin/python -m pytest tests/gpu -v -p no:cacheprovider "$@"
