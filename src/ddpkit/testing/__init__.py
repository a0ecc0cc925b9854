"""Test helpers for ddpkit's users: fakes and the pytest plugin (opt-in).

Load the plugin with ``-p ddpkit.testing.pytest_plugin`` or
``pytest_plugins = ["ddpkit.testing.pytest_plugin"]``.
"""

from ddpkit.testing.fakes import make_probe

__all__ = ["make_probe"]
