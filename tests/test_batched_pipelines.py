"""Hopper pipelines for batched (3-D) dots (tilecraft.config.pipelines): a user's bmm over
``tc.tile([batch, m, n], block_size=[1, None, None])`` gets tensor-descriptor loads of both
operands (2-D descriptors over ``[batch * rows, cols]`` where no block crosses a batch, 3-D
``[1, BM, BK]`` blocks reshaped in the kernel where one would), stages, and a persistent,
L2-grouped walk over (m, n) tiles with the batch slowest; AMD gets none of it. Numerics in the
interpreter against eager torch (and on the GPU where there is one); the cross-compiles are in
tests/test_crosscompile.py (``-k bmm``).
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import pytest
import torch

import tilecraft as tc
from tilecraft.config.pipelines import batch_outer_orders, pipeline_configs
from tilecraft.runtime.kernel import BoundKernel
from tilecraft.targets.target import Target

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.gen_kernels import CASES  # noqa: E402
from benchmarks.gen_kernels.dots import bmm_3d  # noqa: E402
from examples.matmul import matmul  # noqa: E402

SM90 = Target.parse("cuda:90")
TMA = "tensor_descriptor"
HAS_CUDA = torch.cuda.is_available()


@tc.kernel(static_shapes=True)
def baddbmm_3d(c: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``beta * c + alpha * a @ b`` per batch, the sum over K in a loop of tl.dot."""
    batch, m, k = a.size()
    n = b.size(2)
    out = torch.empty([batch, m, n], dtype=c.dtype, device=a.device)
    for tb, tm, tn in tc.tile([batch, m, n], block_size=[1, None, None]):
        acc = tc.zeros([tm, tn], dtype=torch.float32)
        for tk in tc.tile(k):
            acc = torch.addmm(acc, a[tb, tm, tk], b[tb, tk, tn])
        out[tb, tm, tn] = (0.5 * c[tb, tm, tn].float() + 2.0 * acc).to(out.dtype)
    return out


def _inputs(
    batch: int, m: int, k: int, n: int, device: str = "cpu"
) -> tuple[torch.Tensor, torch.Tensor]:
    """The generalization benchmark's bmm inputs (bf16, ``b`` scaled by 1/sqrt(k))."""
    a, b = CASES["bmm_3d"].make_inputs((batch, m, k, n), device, batch * m + k * n)
    return a, b


def _bound(target: Target, batch: int, m: int, k: int, n: int) -> BoundKernel:
    a = torch.empty(batch, m, k, dtype=torch.bfloat16)
    b = torch.empty(batch, k, n, dtype=torch.bfloat16)
    return BoundKernel(bmm_3d, bmm_3d.bind_arguments((a, b), {}), target=target)


def test_bmm_default_on_sm90_is_a_batch_outer_tma_pipeline() -> None:
    """16 x 1024^3: both operands through 2-D descriptors over the flattened batch rows, a
    persistent warp-specialized loop, (m, n) grouped and the batch walked slowest; the output
    through pointers, as a descriptor store's staging buffer would take the fourth stage."""
    bound = _bound(SM90, 16, 1024, 1024, 1024)
    spec = bound.config_spec
    config = spec.default()
    assert config.indexing == (TMA, TMA, "pointer") and any(config.range_warp_specializes)
    assert config.pid_type == "persistent_interleaved" and config.l2_groupings == (8,)
    assert [list(o) for o in config.loop_orders] == [[1, 2, 0]]
    assert config.num_stages == 4
    # the same pipeline with a descriptor store fits one stage less, and ranks right after it
    ranked = pipeline_configs(spec)
    assert ranked[1] == config.replace(indexing=[TMA, TMA, TMA], num_stages=3)
    plan = spec.resolve(config)
    assert not plan.repairs and all(a.merged_dims == 1 for a in plan.accesses[:2])
    assert [a.indexing for a in plan.accesses] == [TMA, TMA, "pointer"]
    assert plan.resources.shared_bytes <= SM90.limits.max_shared_bytes
    code = bound.to_triton_code(config)
    assert "a_desc = tl.make_tensor_descriptor(a, [16384, 1024], [1024, 1]" in code
    assert "b_desc = tl.make_tensor_descriptor(b, [16384, 1024], [1024, 1]" in code
    assert "a_desc.load([offset_0 * 1024 + offset_1, offset_3])" in code
    assert "b_desc.load([offset_0 * 1024 + offset_3, offset_2])" in code
    assert "for virtual_pid in tl.range(tl.program_id(0), total_tiles, num_programs" in code
    assert "inner_pid = virtual_pid % ((8) * (4))" in code  # the m x n tiles of one batch
    assert "pid_0 = virtual_pid // (8 * 4)" in code  # the batch, slowest
    assert "tl.load(" not in code and ".reshape(" not in code and "tl.store(out + " in code


def test_ragged_rows_keep_the_batch_dim_in_3d_blocks() -> None:
    """m = 1000: a block of rows could cross into the next batch, so ``a`` and ``out`` keep
    ``[1, BM, .]`` blocks (TMA's bounds check is per batch) reshaped to 2-D; ``b`` (k = 1024
    divides by its row blocks) stays merged."""
    bound = _bound(SM90, 16, 1000, 1024, 1024)
    config = bound.config_spec.default()
    plan = bound.config_spec.resolve(config)
    assert config.pid_type == "persistent_interleaved" and config.indexing == (TMA, TMA, TMA)
    assert [a.merged_dims for a in plan.accesses] == [0, 1, 0]
    code = bound.to_triton_code(config)
    assert "tl.make_tensor_descriptor(a, [16, 1000, 1024], [1024000, 1024, 1]" in code
    assert "a_desc.load([offset_0, offset_1, offset_3]).reshape([_BLOCK_1, _BLOCK_3])" in code
    assert "out_desc.store([offset_0, offset_1, offset_2], (v).reshape([1, _BLOCK_1" in code


def test_plain_matmul_and_attention_orders_are_unchanged() -> None:
    """Only grids whose two dot output dims are not already first get an order: a 2-D matmul
    keeps its own, as does attention's (batch*head, m) grid,
    whose output's other dim is not a grid dim."""
    a = torch.empty(512, 512, dtype=torch.bfloat16)
    spec = BoundKernel(matmul, matmul.bind_arguments((a, a), {}), target=SM90).config_spec
    assert batch_outer_orders(spec) == [] and spec.default().loop_orders == ((0, 1),)
    from examples.attention import attention

    q = torch.empty(8, 1024, 64, dtype=torch.bfloat16)
    bound = BoundKernel(attention, attention.bind_arguments((q, q, q, False), {}), target=SM90)
    assert batch_outer_orders(bound.config_spec) == []


@pytest.mark.parametrize("target", ["hip:gfx942", "cuda:80", "interpret"])
def test_bmm_default_without_tma_is_the_plain_one(target: str) -> None:
    spec = _bound(Target.parse(target), 16, 1024, 1024, 1024).config_spec
    assert pipeline_configs(spec) == []
    config = spec.default()
    assert config == spec.plain_default() and config.loop_orders == ((0, 1, 2),)
    assert set(config.indexing) == {"pointer"} and config.pid_type == "flat"


def test_unaligned_batch_stride_falls_back_to_pointers_with_a_reason() -> None:
    """k = 100 bf16: ``a``'s rows are 200 B (TMA needs 16-byte strides): no pipeline default,
    and an explicit per-access descriptor request for ``a`` is repaired with a warning."""
    spec = _bound(SM90, 4, 256, 100, 256).config_spec
    assert pipeline_configs(spec) == [] and spec.default() == spec.plain_default()
    config = tc.Config(block_sizes=[64, 64, 32], indexing=[TMA, TMA, TMA])
    with pytest.warns(UserWarning, match=r"indexing\[0\]='tensor_descriptor' is not available"):
        plan = spec.resolve(config)
    assert [a.indexing for a in plan.accesses] == ["pointer", TMA, TMA]


def test_broadcast_batch_is_not_a_descriptor() -> None:
    """A weight expanded over the batch (stride 0) is read through pointers: a tensor map
    with a zero stride is not one TMA is documented to take."""
    a = torch.empty(4, 256, 128, dtype=torch.bfloat16)
    w = torch.empty(1, 128, 256, dtype=torch.bfloat16).expand(4, 128, 256)
    bound = BoundKernel(bmm_3d, bmm_3d.bind_arguments((a, w), {}), target=SM90)
    choices = bound.config_spec.space.indexing_choices
    assert TMA in choices[0] and TMA not in choices[1]


def _explicit_configs() -> list[tc.Config]:
    base = tc.Config(block_sizes=[32, 32, 16], num_warps=4, num_stages=3, indexing=TMA)
    return [
        base,
        base.replace(pid_type="persistent_interleaved", l2_groupings=[2], loop_orders=[[1, 2, 0]]),
        base.replace(pid_type="persistent_blocked", l2_groupings=[2], num_sm_multiplier=1),
        base.replace(
            indexing="pointer", pid_type="flat", l2_groupings=[4], loop_orders=[[2, 1, 0]]
        ),
    ]


@pytest.mark.parametrize("shape", [(3, 64, 48, 96), (3, 40, 50, 30)])
@pytest.mark.parametrize("which", range(4))
def test_bmm_pipeline_configs_compute_bmm(shape: tuple[int, ...], which: int, device: str) -> None:
    """Merged (64 rows) and 3-D (40 rows, k = 50: ragged blocks, TMA's zero fill is the mask)
    descriptors, persistent and flat walks, against torch.bmm."""
    a, b = _inputs(*shape, device=device)
    config = _explicit_configs()[which]
    bound = bmm_3d.bind((a, b))
    out = bound.run(bound.compile_config(config), a, b)
    torch.testing.assert_close(out.float(), a.float() @ b.float(), rtol=2e-2, atol=2e-2)


def test_sm90_default_computes_bmm_and_baddbmm(device: str) -> None:
    """The configs sm_90 picks, run here (the interpreter emulates descriptors)."""
    a, b = _inputs(2, 128, 64, 256, device=device)
    config = _bound(SM90, 2, 128, 64, 256).config_spec.default()
    assert config.indexing == (TMA, TMA, TMA) and config.loop_orders == ((1, 2, 0),)
    bound = bmm_3d.bind((a, b))
    out = bound.run(bound.compile_config(config), a, b)
    torch.testing.assert_close(out.float(), a.float() @ b.float(), rtol=2e-2, atol=2e-2)
    c = torch.randn(2, 128, 256).to(device, torch.bfloat16)
    args = (c, a, b)
    spec = BoundKernel(baddbmm_3d, baddbmm_3d.bind_arguments(args, {}), target=SM90).config_spec
    config = spec.default()
    assert config.pid_type == "persistent_interleaved" and config.loop_orders == ((1, 2, 0),)
    bound = baddbmm_3d.bind(args)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = bound.run(bound.compile_config(config), *args)
    want = torch.baddbmm(c.float(), a.float(), b.float(), beta=0.5, alpha=2.0)
    torch.testing.assert_close(out.float(), want, rtol=2e-2, atol=5e-2)


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
def test_bmm_default_on_gpu() -> None:
    """The discovered default of the benchmark's shape computes torch.bmm."""
    a, b = _inputs(16, 1024, 1024, 1024, device="cuda")
    torch.testing.assert_close(bmm_3d(a, b).float(), torch.bmm(a, b).float(), rtol=2e-2, atol=2e-2)
    a, b = _inputs(16, 1000, 1000, 1000, device="cuda")
    torch.testing.assert_close(bmm_3d(a, b).float(), torch.bmm(a, b).float(), rtol=2e-2, atol=2e-2)
