"""Codegen: (device loop IR, Config, launch options) -> Triton source."""

from tilecraft.codegen.kernel import GeneratedKernel, generate

__all__ = ["GeneratedKernel", "generate"]
