"""Tensor descriptors over transposed views (stage: config + codegen).

A linear layer's weight passed as ``w.t()`` has its unit stride on dim 0. TMA needs the unit-stride
dim last, so the descriptor lists the dims in storage order and codegen permutes the loaded block
back (``tl.permute``), or permutes a stored value into storage order. Checked here: the space offers
descriptors for such views (not for views without a unit-stride dim), the generated lines, results
in the interpreter (2-D and batched 3-D operands, a transposed output) and an sm_90 cross-compile of
the default, which is a TMA pipeline like a plain matmul's. (``linear`` is the held-out matmul
as a user writes it: ``benchmarks/gen_kernels/heldout_dots.py``; ``bmm_bt`` the generalization
benchmark's 3-D bmm, given a transposed operand.)
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from test_strategies import check_order

import tilecraft as tc
from benchmarks.gen_kernels.dots import bmm_3d as bmm_bt
from benchmarks.gen_kernels.heldout_dots import matmul_any_layout as linear
from tilecraft.config.space import descriptor_order
from tilecraft.runtime.kernel import BoundKernel
from tilecraft.targets.target import Target
from tilecraft.tools.crosscompile import CompileJob
from tilecraft.tools.worker import run_compile_jobs

TMA = tc.Config(block_sizes=[32, 32, 32], indexing="tensor_descriptor", num_warps=4, num_stages=2)


@tc.kernel(static_shapes=True)
def scale_into(x: torch.Tensor, out: torch.Tensor) -> None:
    m, n = x.size()
    for tm, tn in tc.tile([m, n]):
        out[tm, tn] = (x[tm, tn].to(torch.float32) * 2.0).to(out.dtype)


def _weight_t(n: int, k: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(n, k, generator=torch.Generator().manual_seed(1)).to(dtype).t()


def _sm90_spec(x: torch.Tensor, wt: torch.Tensor) -> Any:
    target = Target.parse("cuda:90")
    return BoundKernel(linear, linear.bind_arguments((x, wt), {}), target=target).config_spec


def test_descriptor_order_puts_the_unit_stride_dim_last() -> None:
    spec = _sm90_spec(torch.randn(64, 48), _weight_t(80, 48))
    a, wt, _ = (access.attrs["tensor"] for access in spec.space.accesses)
    assert descriptor_order(a) == (0, 1) and descriptor_order(wt) == (1, 0)
    assert all("tensor_descriptor" in c for c in spec.space.indexing_choices)


def test_no_descriptor_without_a_unit_stride_dim() -> None:
    strided = torch.randn(64, 96)[:, ::2]  # strides (96, 2)
    spec = _sm90_spec(torch.randn(64, 48), strided)
    wt = spec.space.accesses[1].attrs["tensor"]
    assert descriptor_order(wt) is None
    assert "tensor_descriptor" not in spec.space.indexing_choices[1]
    assert "tensor_descriptor" in spec.space.indexing_choices[0]


def test_generated_descriptor_is_over_storage_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILECRAFT_TARGET", "cuda:90")
    x, wt = torch.randn(1024, 512, dtype=torch.bfloat16), _weight_t(768, 512, torch.bfloat16)
    cfg = tc.Config(block_sizes=[128, 128, 64], indexing="tensor_descriptor", num_warps=8)
    code = linear.bind((x, wt)).to_triton_code(cfg)
    check_order(
        code,
        [
            r"a_desc = tl.make_tensor_descriptor\(a, \[1024, 512\], \[512, 1\], \[_BLOCK_0, _BLOCK_2\]\)",
            r"b_desc = tl.make_tensor_descriptor\(b, \[768, 512\], \[512, 1\], \[_BLOCK_1, _BLOCK_2\]\)",
            r"a_desc.load\(\[offset_0, offset_2\]\)",
            r"tl.permute\(b_desc.load\(\[offset_1, offset_2\]\), \(1, 0\)\)",
            r"tl.dot\(",
        ],
    )


def test_transposed_operand_results() -> None:
    x, wt = torch.randn(70, 48), _weight_t(40, 48)
    got = linear.bind((x, wt)).run(linear.bind((x, wt)).compile_config(TMA), x, wt)
    torch.testing.assert_close(got, x @ wt, rtol=1e-4, atol=1e-4)


def test_batched_transposed_operand_results() -> None:
    a = torch.randn(3, 40, 32)
    bt = torch.randn(3, 48, 32).transpose(1, 2)  # [3, 32, 48], unit stride on dim 1
    cfg = tc.Config(block_sizes=[16, 16, 16], indexing="tensor_descriptor", num_warps=4)
    bound = bmm_bt.bind((a, bt))
    assert descriptor_order(bound.config_spec.space.accesses[1].attrs["tensor"]) == (0, 2, 1)
    code = bound.to_triton_code(cfg)
    assert "tl.permute(b_desc.load(" in code and "(0, 2, 1)" in code
    torch.testing.assert_close(bound.run(bound.compile_config(cfg), a, bt), a @ bt)


def test_store_into_a_transposed_output() -> None:
    x = torch.randn(48, 80)
    out = torch.zeros(80, 48).t()
    cfg = tc.Config(block_sizes=[16, 32], indexing="tensor_descriptor", num_warps=4)
    bound = scale_into.bind((x, out))
    assert "out_desc.store([offset_1, offset_0], tl.permute(" in bound.to_triton_code(cfg)
    bound.run(bound.compile_config(cfg), x, out)
    torch.testing.assert_close(out, x * 2)


def test_transposed_weight_default_is_a_tma_pipeline_that_compiles_for_sm90() -> None:
    x = torch.empty(4096, 4096, dtype=torch.bfloat16, device="meta")
    wt = torch.empty(4096, 4096, dtype=torch.bfloat16, device="meta").t()
    target = Target.parse("cuda:90")
    bound = BoundKernel(linear, linear.bind_arguments((x, wt), {}), target=target)
    config = bound.config_spec.default()
    assert config.indexing and all(i == "tensor_descriptor" for i in config.indexing[:2])
    _, _, traced, generated = bound.generate(config)
    assert "tl.permute(b_desc.load(" in generated[0].device_source
    jobs = [CompileJob.of(g, loop, target) for g, loop in zip(generated, traced.loops)]
    (report,) = run_compile_jobs(jobs, 300.0)
    assert report.ok and report.fits and report.spills == 0, report.error


@pytest.mark.gpu
def test_transposed_weight_on_the_gpu() -> None:
    """On sm_90+: the discovered config of ``x @ w.t()`` keeps its descriptor loads (no fallback
    after a failed or wrong candidate) and matches torch; a batched transposed operand too."""
    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(2048, 1024, device="cuda", generator=gen, dtype=torch.bfloat16)
    w = torch.randn(1536, 1024, device="cuda", generator=gen, dtype=torch.bfloat16) / 32
    torch.testing.assert_close(linear(x, w.t()), x @ w.t(), rtol=2e-2, atol=2e-2)
    config = linear.bind((x, w.t())).default_program().config
    if torch.cuda.get_device_capability() >= (9, 0):
        assert config.indexing and config.indexing[1] == "tensor_descriptor", config
    a = torch.randn(4, 512, 256, device="cuda", generator=gen, dtype=torch.bfloat16)
    bt = torch.randn(4, 384, 256, device="cuda", generator=gen, dtype=torch.bfloat16) / 16
    want = a @ bt.transpose(1, 2)
    torch.testing.assert_close(bmm_bt(a, bt.transpose(1, 2)), want, rtol=2e-2, atol=2e-2)


@tc.kernel(static_shapes=True)
def fill_rows(x: torch.Tensor) -> torch.Tensor:
    """A constant and a per-row value stored through descriptors (neither has the block's shape)."""
    out = torch.empty_like(x)
    rows = torch.empty_like(x)
    for tm in tc.tile(x.size(0)):
        out[tm, :] = 3.5
        rows[tm, :] = torch.sum(x[tm, :], dim=1, keepdim=True)
    return out, rows


def test_descriptor_stores_of_scalars_and_broadcasts_fill_the_block() -> None:
    """``out[tm, :] = 3.5`` through a tensor descriptor stored a Python float, which has no
    shape (a crash of any config with descriptor stores)."""
    x = torch.randn(33, 100)
    bound = fill_rows.bind((x,))
    config = tc.Config(block_sizes=[16], indexing="tensor_descriptor")
    out, rows = bound.run(bound.compile_config(config), x)
    torch.testing.assert_close(out, torch.full_like(x, 3.5))
    torch.testing.assert_close(rows, x.sum(dim=1, keepdim=True).expand_as(x))


@tc.kernel(static_shapes=True)
def clamp_rows(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm in tc.tile(x.size(0)):
        out[tm, :] = torch.clamp(x[tm, :], min=1)
    return out


@tc.kernel(static_shapes=True)
def row_any(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty([x.size(0)], dtype=torch.bool, device=x.device)
    for tm in tc.tile(x.size(0)):
        out[tm] = torch.max(x[tm, :], dim=-1)[0]
    return out


def test_block_stores_write_the_tensors_element_type() -> None:
    """An int8 clamp (int32 in Triton) through a block pointer is cast back to int8; a bool
    tensor is never offered a descriptor (Triton's i1 has no byte size: '16 * 0 = 0 bytes')."""
    x = torch.randint(-3, 4, (3, 5), dtype=torch.int8)
    bound = clamp_rows.bind((x,))
    config = tc.Config(block_sizes=[2], indexing=["pointer", "block_ptr"])
    torch.testing.assert_close(bound.run(bound.compile_config(config), x), x.clamp(min=1))
    flags = torch.rand(17, 33, generator=torch.Generator().manual_seed(0)) > 0.7
    bound = row_any.bind((flags,))
    config = tc.Config(block_sizes=[16], indexing=["pointer", "tensor_descriptor"])
    plan = bound.config_spec.resolve(config, warn=False)
    assert all(a.indexing != "tensor_descriptor" for a in plan.accesses), plan.accesses
    torch.testing.assert_close(bound.run(bound.compile_config(config), flags), flags.max(-1)[0])
