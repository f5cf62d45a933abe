"""tc.rand: bit-exact with Triton's tl.rand (eager Philox), the same numbers for every config and
in ref mode (counters are global element numbers), generated code, cross-compiles, errors."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import tilecraft as tc
from tilecraft.errors import UnsupportedOpError
from tilecraft.ir import philox
from tilecraft.targets.target import Target
from tilecraft.tools.check import check_kernel


@tc.kernel(static_shapes=True)
def dropout(x: torch.Tensor, seed: int, p: float) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        keep = tc.rand([tm, n], seed) >= p
        out[tm, :] = torch.where(keep, x[tm, :] / (1.0 - p), 0.0)
    return out


@tc.kernel(static_shapes=True)
def noise_2d(x: torch.Tensor, seed: int) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tm, tn in tc.tile([m, n]):
        out[tm, tn] = tc.rand([tm, tn], seed, 17)
    return out


def _draw_with_tl_rand(seed: int, n: int, device: str) -> torch.Tensor:
    import triton
    import triton.language as tl

    @triton.jit
    def draw(out, seed, n: tl.constexpr):  # type: ignore[no-untyped-def]  # seed: i64 when large
        o = tl.arange(0, n)
        tl.store(out + o, tl.rand(seed, o * 7919 + 3))

    out = torch.empty(n, device=device)
    draw[(1,)](out, seed, n)
    return out.cpu()


def test_eager_philox_matches_tl_rand(device: str) -> None:
    for seed in (0, 1234, 2**33 + 5):
        expected = philox.rand(seed, torch.arange(256) * 7919 + 3)
        assert torch.equal(_draw_with_tl_rand(seed, 256, device), expected), seed


@pytest.mark.gpu
def test_eager_philox_matches_tl_rand_on_gpu() -> None:
    """The reference mask of the dropout example is the GPU's mask, bit for bit."""
    for seed in (0, 1234, 2**33 + 5):
        expected = philox.rand(seed, torch.arange(4096) * 7919 + 3)
        assert torch.equal(_draw_with_tl_rand(seed, 4096, "cuda"), expected), seed
    x = torch.randn(1000, 4096, device="cuda")
    out, ref = dropout(x, 7, 0.1).cpu(), dropout.run_ref(x.cpu(), 7, 0.1)
    assert torch.equal(out == 0, ref == 0)  # the same elements dropped
    torch.testing.assert_close(out, ref)
    on_gpu = tc.rand([1000, 4096], 7, device="cuda")  # host numbers made on the GPU
    assert on_gpu.is_cuda
    assert torch.equal(on_gpu.cpu(), tc.rand([1000, 4096], 7))
    # (not ``out == 0``: randn on the GPU draws an exact 0.0 about once in 4M elements)
    torch.testing.assert_close(out.cuda(), torch.where(on_gpu >= 0.1, x / 0.9, 0.0))


def test_same_mask_for_every_config_and_ref_mode() -> None:
    x = torch.randn(37, 100)
    bound = dropout.bind((x, 99, 0.3))
    configs = [
        tc.Config(block_sizes=[4], reduction_loops=[32]),
        tc.Config(block_sizes=[16]),
        tc.Config(block_sizes=[1], reduction_loops=[64]),
    ]
    outs = [bound.run(bound.compile_config(c), x, 99, 0.3) for c in configs]
    ref = dropout.run_ref(x, 99, 0.3)
    for out in outs:
        assert torch.equal(out, ref)
    keep = tc.rand([37, 100], 99) >= 0.3  # the eager meaning, outside any kernel
    assert torch.equal(ref, torch.where(keep, x / 0.7, 0.0))
    on = tc.rand([37, 100], 99, device="meta")  # a reference makes them on its tensors' device
    assert on.device.type == "meta" and on.shape == (37, 100)
    assert 0.25 < (ref == 0).float().mean().item() < 0.35
    assert not torch.equal(dropout.run_ref(x, 100, 0.3), ref)  # another seed, another mask


def test_tile_grid_numbers_are_global() -> None:
    x = torch.zeros(13, 50)
    expected = philox.rand(5, torch.arange(13 * 50).view(13, 50) + 17)
    bound = noise_2d.bind((x, 5))
    for blocks in ([4, 16], [16, 64]):
        got = bound.run(bound.compile_config(tc.Config(block_sizes=blocks)), x, 5)
        assert torch.equal(got, expected), blocks
    assert torch.equal(noise_2d.run_ref(x, 5), expected)
    code = bound.to_triton_code(tc.Config(block_sizes=[4, 16]))
    assert "tl.rand(5, " in code and "* 50" in code, code  # row-major over the loop's extents


@pytest.mark.crosscompile
def test_rand_crosscompiles() -> None:
    targets = [Target.parse("cuda:90"), Target.parse("hip:gfx942")]
    x = torch.randn(512, 1000, dtype=torch.bfloat16)
    rows = check_kernel(dropout, (x, 7, 0.1), targets, lambda b: [b.config_spec.default()])
    assert len(rows) == 2
    for row in rows:
        assert row.report is not None and row.report.ok, (row.target, row.status, row.report)


@tc.kernel(static_shapes=True)
def uses_rand_like(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm in tc.tile(x.size(0)):
        out[tm, :] = torch.rand_like(x[tm, :])
    return out


def test_torch_random_points_to_tc_rand() -> None:
    with pytest.raises(UnsupportedOpError, match="random functions in device code") as info:
        uses_rand_like(torch.randn(4, 8))
    assert "tc.rand(shape, seed, offset)" in str(info.value) and "test_random.py" in str(info.value)


def test_host_rand_is_not_traced_by_torch_compile() -> None:
    """torch.compile runs host ``tc.rand`` eagerly (Inductor compiling the Philox rounds took
    minutes): the graphs it captures around it hold none of Philox's integer ops."""
    graphs: list[str] = []

    def record(gm: torch.fx.GraphModule, inputs: list[torch.Tensor]) -> Any:
        graphs.append(str(gm.graph))
        return gm.forward

    def noisy(x: torch.Tensor) -> torch.Tensor:
        return x * 2.0 + tc.rand(list(x.shape), 11)

    import tilecraft.language.random as random_module

    torch._dynamo.reset()
    random_module._EAGER_HOST_RAND = None  # its first use is under torch.compile
    x = torch.randn(8, 33)
    got = torch.compile(noisy, backend=record)(x)
    torch.testing.assert_close(got, noisy(x), rtol=0, atol=0)
    assert graphs and any("mul" in g for g in graphs)  # the code around it was compiled
    assert not any("xor" in g or "rshift" in g for g in graphs)
