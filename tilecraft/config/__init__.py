"""Config (user-facing) and ConfigSpec (what is tunable for a traced kernel)."""

from tilecraft.config.config import Config
from tilecraft.config.spec import ConfigSpec

__all__ = ["Config", "ConfigSpec"]
