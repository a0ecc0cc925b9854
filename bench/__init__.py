"""Benchmarks: ddpkit against raw PyTorch and Lightning, side by side (``python -m bench``).

Not part of the test suite and not installed with the package; see ``bench/RESULTS.md``.
"""
