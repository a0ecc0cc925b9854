"""The callback tests.

torch imports ``torch._dynamo`` lazily on the first optimizer step or DDP wrap, and that import
exports ``TORCHINDUCTOR_CACHE_DIR`` (torch's own process-wide setting). Imported here, at
collection, the root conftest's environment guard does not blame the first test that trains.
"""

import torch._dynamo  # noqa: F401
