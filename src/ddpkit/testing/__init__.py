"""Test helpers for ddpkit's users: fakes and the pytest plugin (opt-in).

Load the plugin with ``-p ddpkit.testing.pytest_plugin`` or
``pytest_plugins = ["ddpkit.testing.pytest_plugin"]``; it gives ``@pytest.mark.standalone``,
``@pytest.mark.distributed`` and its ``dist`` fixture (a :class:`DistInfo`), and keeps process
groups and child processes from leaking out of a test. See docs/testing.md.
"""

from ddpkit.testing.distributed import DistInfo
from ddpkit.testing.fakes import make_probe

__all__ = ["DistInfo", "make_probe"]
