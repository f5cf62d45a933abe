"""A compiled program and the host context it runs under (stage: runtime; in: a config's plan,
trace and generated kernels; out: what a call runs, and the ``tc.register_block_size`` /
``tc.register_tunable`` / ``tc.specialize`` answers its host code gets)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from tilecraft.codegen.kernel import HEADER, GeneratedKernel
from tilecraft.config.config import Config
from tilecraft.config.plan import Plan
from tilecraft.frontend.trace import TracedKernel
from tilecraft.language.tunables import BlockSize
from tilecraft.runtime.host_paths import Respecialize


class RunHost:
    """Host context of a compiled run: block sizes and tunables come from the config."""

    mode = "run"

    def __init__(self, config: Config, traced: TracedKernel, device: Any = None):
        """``device``: where host code's ``tc.arange`` / ``tc.zeros`` / ``tc.full`` make their
        tensors (the kernel's tensor arguments')."""
        self.config = config
        self.device = device
        self.slot_order = traced.host_slot_order
        self.expected = traced.specializations
        self.calls = 0
        self.specializations = 0

    def block_size(self, lo: int, hi: int | None) -> int:
        slot = self.slot_order[self.calls]
        self.calls += 1
        return BlockSize(self.config.block_sizes[slot], slot)

    def tunable(self, name: str, choices: tuple[Any, ...]) -> Any:
        return self.config.user_values.get(name, choices[0])

    def specialized(self, value: int) -> None:
        k = self.specializations
        self.specializations += 1
        if k >= len(self.expected) or self.expected[k] != value:
            raise Respecialize(value)


@dataclasses.dataclass
class CompiledProgram:
    plan: Plan
    traced: TracedKernel
    kernels: list[GeneratedKernel]
    host_fn: Callable[..., Any]
    module: Any = None

    @property
    def config(self) -> Config:
        return self.plan.config

    def compiled_stats(self) -> list[dict[str, Any]]:
        """Registers and spills of each kernel Triton compiled for this program (after a run)."""
        stats = []
        for generated in self.kernels:
            fn = getattr(self.module, generated.kernel_name, None)
            for caches in getattr(fn, "device_caches", {}).values():
                for compiled in caches[0].values():
                    compiled._init_handles()
                    stats.append(
                        {
                            "kernel": generated.kernel_name,
                            "n_regs": compiled.n_regs,
                            "n_spills": compiled.n_spills,
                        }
                    )
        return stats

    @property
    def source(self) -> str:
        return HEADER + "".join(
            "\n\n" + k.device_source + "\n\n" + k.launcher_source for k in self.kernels
        )
