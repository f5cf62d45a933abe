"""tilecraft: PyTorch ops inside tile loops, compiled to Triton, with an autotuner that always works.

``import tilecraft as tc``; the DSL names (``tile``, ``grid``, ``zeros``, ``dot``...) are re-exported
here from :mod:`tilecraft.language`.
"""

from tilecraft import language
from tilecraft.config import Config, ConfigSpec
from tilecraft.errors import TilecraftError
from tilecraft.language import *  # noqa: F403
from tilecraft.language import __all__ as _language_names
from tilecraft.runtime.kernel import BoundKernel, Kernel, kernel

__version__ = "0.1.0"
__all__ = [
    "BoundKernel",
    "Config",
    "ConfigSpec",
    "Kernel",
    "TilecraftError",
    "kernel",
    "language",
    *_language_names,
]
