"""One thread per element of a recurrence's exchanged state (ir/recurrence.py:
exchanged_states; config/occupancy.py: recurrence_warps): which loops carry such a state, the
warps the default gives them on cuda:90 and hip:gfx942, and what leaves the warps
alone (a gather of values no step carries, a grid over a wave)."""

from __future__ import annotations

import torch

import tilecraft as tc
from benchmarks.default_change import case_calls
from benchmarks.gen_kernels import REWRITTEN
from tests.test_tile_gather import shift_recurrence, shifted_and_reversed
from tilecraft.config.spec import ConfigSpec
from tilecraft.ir.recurrence import exchanged_states
from tilecraft.runtime.kernel import BoundKernel
from tilecraft.targets.target import Target

H200 = Target.parse("cuda:90")
MI300 = Target("hip", "gfx942", 64)


def _spec(kernel: tc.Kernel, *args: object, target: Target = H200) -> ConfigSpec:
    return BoundKernel(kernel, kernel.bind_arguments(args, {}), target=target).config_spec


def test_a_shifted_carried_state_is_exchanged_and_gets_a_thread_per_element() -> None:
    """64 rows, one a program (under a wave of 132 SMs); a 241-state vector (256 lanes) shifted
    by torch.gather each step: 8 warps of 32 on the H200, 4 wavefronts of 64 on the MI300."""
    x = torch.empty(64, 241, device="meta")
    spec = _spec(shift_recurrence, x, 100)
    states = [s for loop in spec.loops for s in exchanged_states(loop)]
    assert len(states) == 1 and states[0].op.name == "CARRY", states
    assert spec.default().num_warps == 8
    assert _spec(shift_recurrence, x, 100, target=MI300).default().num_warps == 4


def test_gathers_of_values_no_step_carries_leave_the_warps() -> None:
    """A row shifted and permuted once (no loop carries it) is not a recurrence."""
    spec = _spec(shifted_and_reversed, torch.empty(64, 1000), torch.arange(1000))
    assert spec.exchanged_states == []


def test_a_grid_over_a_wave_keeps_its_warps() -> None:
    """4096 rows: SMs already run several programs each; the default's warps stay at 4."""
    spec = _spec(shift_recurrence, torch.empty(4096, 241, device="meta"), 100)
    assert spec.exchanged_states  # the state is exchanged, but the grid fills the device
    assert spec.default().num_warps == 4


def test_ctc_forward_rewritten_with_gathers_defaults_to_8_warps() -> None:
    """The rewritten CTC cases (a 256-state alpha, 64 samples) take 8 warps on cuda:90 at
    their GPU shape (their numerics: tests/test_generalize.py; on the GPU, the 8-warp default
    of shift_recurrence: tests/test_tile_gather.py)."""
    for name in ("ctc_loss_forward_gather", "ctc_loss_forward_pads"):
        case = REWRITTEN[name]
        kernel, args = case_calls(case, case.gpu_shapes[0], "meta")[0]
        assert _spec(kernel, *args).default().num_warps == 8, name
