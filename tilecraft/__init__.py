"""tilecraft: PyTorch ops inside tile loops, compiled to Triton, with an autotuner that always works.

``import tilecraft as tc``; the DSL names (``tile``, ``grid``, ``zeros``, ``dot``...) are re-exported
here from :mod:`tilecraft.language`.
"""

from tilecraft import exc, language
from tilecraft.autotune import select_config, tune_for_kernel
from tilecraft.config import Config, ConfigSpec
from tilecraft.config.dims import cdiv
from tilecraft.config.plan import next_pow2 as next_power_of_2
from tilecraft.errors import TilecraftError
from tilecraft.language import *  # noqa: F403
from tilecraft.language import __all__ as _language_names
from tilecraft.runtime.hooks import install_config_selector, install_tuner
from tilecraft.runtime.kernel import BoundKernel, Kernel, kernel

jit = kernel  # Helion's alias of @kernel

# the runtime asks for a config through this hook: it never imports the autotuner itself
install_config_selector(select_config)
install_tuner(tune_for_kernel)

__version__ = "0.1.0"
__all__ = [
    "BoundKernel",
    "Config",
    "ConfigSpec",
    "Kernel",
    "TilecraftError",
    "cdiv",
    "exc",
    "jit",
    "kernel",
    "language",
    "next_power_of_2",
    *_language_names,
]
