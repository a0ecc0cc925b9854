"""``pl_examples/__init__.py`` for the project tests: the helpers Lightning 1.x's examples import
from their package (1.x's own file read ``pytorch_lightning.utilities._module_available``, which
Lightning 2.x removed; the examples' code is not changed for it)."""

import importlib.util
import os

_EXAMPLES_ROOT = os.path.dirname(__file__)
_PACKAGE_ROOT = os.path.dirname(_EXAMPLES_ROOT)
_DATASETS_PATH = os.path.join(_PACKAGE_ROOT, "Datasets")
_TORCHVISION_AVAILABLE = importlib.util.find_spec("torchvision") is not None
_DALI_AVAILABLE = False
LIGHTNING_LOGO = "⚡"


def nice_print(msg, last=False):
    print(msg)


def cli_lightning_logo():
    nice_print(LIGHTNING_LOGO)
