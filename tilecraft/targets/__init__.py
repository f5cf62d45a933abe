"""Targets: which backend/arch code is generated for, and what its Triton accepts."""

from tilecraft.targets.target import Capabilities, Target, detect, filter_launch_options

__all__ = ["Capabilities", "Target", "detect", "filter_launch_options"]
