"""The logger tests. Some compare with Lightning's own loggers: importing Lightning exports
``PYTORCH_NVML_BASED_CUDA_CHECK`` (its process-wide setting), so it is imported here, at
collection, where the root conftest's environment guard does not blame the first test that
does (when the `lightning` extra is installed)."""

import contextlib

with contextlib.suppress(ImportError):
    import pytorch_lightning  # noqa: F401
