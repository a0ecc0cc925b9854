"""The benchmark's own tests (never timed: they check that ``python -m bench`` runs and what the
hot path must not do).

``bench`` is a top-level package of the repository, not of ``src``: the repository root goes on
``sys.path``. torch imports ``torch._dynamo`` lazily on the first optimizer, and that import exports
``TORCHINDUCTOR_CACHE_DIR``: imported here, the root conftest's environment guard does not blame
the first test that trains.
"""

import sys
from pathlib import Path

import torch._dynamo  # noqa: F401

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
