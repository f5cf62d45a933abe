"""The Plan (config stage): every decision for a (kernel, config, target) is made once by
``ConfigSpec.resolve``, and codegen renders the plan as given."""

from __future__ import annotations

import dataclasses
import inspect
from collections import Counter
from typing import Any

import pytest
import torch
from kernels import matmul, rms_norm

import tilecraft as tc
from tilecraft.codegen.kernel import generate
from tilecraft.config import spec as spec_module
from tilecraft.config.plan import Plan
from tilecraft.config.spec import ConfigSpec
from tilecraft.runtime.kernel import BoundKernel
from tilecraft.targets.target import Target


def _bound(target: str, m: int = 1000, n: int = 512) -> BoundKernel:
    args = (torch.randn(m, n, dtype=torch.bfloat16), torch.randn(n, dtype=torch.bfloat16))
    return BoundKernel(rms_norm, rms_norm.bind_arguments(args, {}), target=Target.parse(target))


def test_plan_is_frozen_and_cached_per_config() -> None:
    spec = _bound("cuda:90").config_spec
    config = tc.Config(block_sizes=[8], num_warps=4)
    plan = spec.resolve(config)
    assert isinstance(plan, Plan)
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.num_warps = 8  # type: ignore[misc]
    before = spec.normalizations
    assert spec.resolve(config) is plan
    assert spec.resolve(plan.config).config == plan.config  # the resolved config: same plan
    assert spec.normalizations == before


def test_plan_holds_every_decision() -> None:
    spec = _bound("cuda:90").config_spec
    plan = spec.resolve(
        tc.Config(
            block_sizes=[8],
            num_warps=8,
            num_stages=2,
            maxnreg=128,
            pid_type="persistent_interleaved",
            num_sm_multiplier=2,
            load_eviction_policies=["first", "last"],
            range_unroll_factors=[2],
        )
    )
    assert plan.block_sizes == (8,) and plan.reduction_loops == (None,)
    assert plan.options == {"num_warps": 8, "num_stages": 2, "maxnreg": 128}
    assert plan.persistent and plan.num_sm_multiplier == 2
    assert [a.eviction for a in plan.accesses if a.op == "load"] == ["first", "last"]
    assert plan.range(0).kwargs() == ", loop_unroll_factor=2"
    # resources: 1000 rows in blocks of 8 is 125 programs; a [8, 512] tile over 256 threads
    assert plan.resources.programs == (125,)
    assert plan.resources.largest_tile == 8 * 512
    assert plan.resources.elems_per_thread == 16
    assert plan.resources.largest_tile_at.startswith("kernels.py:")


def test_plan_records_why_an_access_falls_back_to_pointers() -> None:
    bound = _bound("cuda:90")
    config = tc.Config(block_sizes=[4], indexing="tensor_descriptor")
    plan = bound.config_spec.resolve(config)
    x_load = plan.access(0)
    assert x_load.requested == "tensor_descriptor" and x_load.indexing == "pointer"
    assert "over 256" in x_load.fallback_reason  # the row is a 512-element box
    code = bound.to_triton_code(config)
    assert "# pointer indexing: a tensor-descriptor block dim is over 256" in code
    small = _bound("cuda:90", n=128).config_spec.resolve(config)
    assert small.access(0).indexing == "tensor_descriptor" and not small.access(0).fallback_reason


def test_hip_plan_never_carries_maxnreg() -> None:
    spec = _bound("hip:gfx942").config_spec
    with pytest.warns(UserWarning, match="maxnreg=64 is not supported by the hip backend"):
        plan = spec.resolve(tc.Config(block_sizes=[8], maxnreg=64))
    assert "maxnreg" not in plan.options and plan.config.maxnreg is None
    assert any("maxnreg" in r for r in plan.repairs)


def test_maxnreg_over_the_blocks_register_file_is_dropped() -> None:
    """255 registers x 512 threads exceed an SM's 65536: the launch would fail with "out of
    resource: threads" (seen on the H200 from a random config), so the cap is dropped; one the
    block fits keeps; random configs never draw one that does not fit."""
    import random

    spec = _bound("cuda:90").config_spec
    with pytest.warns(UserWarning, match="maxnreg=255 with 16 warps"):
        plan = spec.resolve(tc.Config(block_sizes=[8], num_warps=16, maxnreg=255))
    assert plan.config.maxnreg is None and "maxnreg" not in plan.options
    assert spec.resolve(tc.Config(block_sizes=[8], num_warps=16, maxnreg=128)).config.maxnreg == 128
    rng = random.Random(0)
    for _ in range(200):
        config = spec.random(rng)
        assert (config.maxnreg or 0) * (config.num_warps or 4) * 32 <= 65536, config


def test_codegen_renders_the_plan_as_given() -> None:
    """Codegen takes no decision of its own: an edited plan shows up verbatim in the code."""
    bound = _bound("cuda:90")
    plan = bound.config_spec.resolve(tc.Config(block_sizes=[8], num_warps=4))
    edited = dataclasses.replace(plan, block_sizes=(16,), launch_options=(("num_warps", 2),))
    kernel = generate(bound.traced.loops[0], edited, "rms_norm")
    assert "num_warps=2" in kernel.launcher_source
    assert kernel.constexprs["_BLOCK_0"] == 16
    assert "config" not in inspect.signature(generate).parameters


def test_a_config_is_normalized_once_per_specialization(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any, device: str
) -> None:
    """A first call (discovery: candidates, static checks, compile, run, accuracy check) and
    later calls normalize each distinct config once."""
    monkeypatch.setenv("TILECRAFT_CACHE_DIR", str(tmp_path))
    counts: Counter[str] = Counter()
    original = spec_module.normalize_config

    def counting(spec: ConfigSpec, config: tc.Config) -> Any:
        counts[config.key()] += 1
        return original(spec, config)

    monkeypatch.setattr(spec_module, "normalize_config", counting)
    rms_norm.reset()
    x, w = torch.randn(33, 64, device=device), torch.randn(64, device=device)
    for _ in range(3):
        out = rms_norm(x, w)
    torch.testing.assert_close(out, rms_norm.run_ref(x, w))
    assert counts and max(counts.values()) == 1, counts
    rms_norm.reset()


@pytest.mark.parametrize(
    ("torch_precision", "option", "target", "expected"),
    [
        ("highest", None, "cuda:90", "ieee"),
        ("high", None, "cuda:90", "tf32"),
        ("medium", None, "cuda:90", "tf32"),
        ("highest", "tf32x3", "cuda:90", "tf32x3"),
        ("high", "ieee", "cuda:90", "ieee"),
        ("high", None, "hip:gfx942", "tf32"),
        ("highest", "tf32x3", "hip:gfx942", "ieee"),  # never less precise than asked
        ("high", None, "hip:gfx90a", "ieee"),
        ("high", None, "interpret", "ieee"),
    ],
)
def test_fp32_dots_follow_torch_matmul_precision(
    torch_precision: str, option: str | None, target: str, expected: str
) -> None:
    kernel = tc.kernel(matmul.fn, dot_precision=option)
    a, b = torch.randn(64, 32), torch.randn(32, 48)
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(torch_precision)
    try:
        bound = BoundKernel(kernel, kernel.bind_arguments((a, b), {}), target=Target.parse(target))
        code = bound.to_triton_code(tc.Config(block_sizes=[16, 16, 16]))
    finally:
        torch.set_float32_matmul_precision(previous)
    assert f"input_precision='{expected}'" in code
    assert code.count("input_precision=") == 1


def test_dot_precision_option_is_checked() -> None:
    with pytest.raises(tc.TilecraftError, match="dot_precision='bf16'"):
        tc.kernel(matmul.fn, dot_precision="bf16")


def test_the_model_predicts_the_seed_shaped_kernel_spills() -> None:
    """The resource model counts values live at once: [n] fp32 row accumulators carried across
    a nested row loop at n = 40920 do not fit any thread count (ptxas spills them: see
    benchmarks/results/resource_model.md) with the whole row in registers, while a plain row tile
    of a small n fits."""
    from examples.layer_norm import layer_norm_bwd as bwd

    m, n = 4608, 40920  # nothing runs: binding traces on meta tensors
    dy, x = torch.empty(m, n, dtype=torch.bfloat16), torch.empty(m, n, dtype=torch.bfloat16)
    mean, rstd, w = torch.empty(m), torch.empty(m), torch.empty(n, dtype=torch.bfloat16)
    args = (dy, x, mean, rstd, w, True)
    bound = BoundKernel(bwd, bwd.bind_arguments(args, {}), target=Target.parse("cuda:90"))
    spec = bound.config_spec
    whole = spec.resolve(spec.default().replace(reduction_loops=[None], num_warps=32))
    assert whole.resources.spills and whole.resources.registers > 255
    # so the default chunks the row, keeping the accumulators in their output rows
    plan = spec.resolve(spec.default())
    assert plan.carried_homes and not plan.resources.spills
    small = _bound("cuda:90", m=64, n=512).config_spec
    fits = small.resolve(small.default()).resources
    assert not fits.spills and 24 < fits.registers <= fits.register_limit
