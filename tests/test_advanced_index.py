"""Advanced indexing as PyTorch defines it, and Helion's list-of-indices atomics.

Several tensor-valued indices broadcast together (elementwise pairs), mixed with tiles, ints and
``None``, in loads, stores and atomics: each kernel runs in the interpreter and in ref mode against
eager PyTorch, and cross-compiles for cuda:90 and hip:gfx942.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

import tilecraft as helion
import tilecraft.language as hl
from tilecraft.errors import ShapeError
from tilecraft.runtime.kernel import BoundKernel
from tilecraft.targets.target import Target
from tilecraft.tools.crosscompile import CompileJob
from tilecraft.tools.worker import run_compile_jobs


@helion.kernel(config=helion.Config(block_sizes=[16]))
def target_logit(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    n, _ = logits.size()
    out = torch.empty([n], dtype=logits.dtype, device=logits.device)
    for tile in hl.tile(n):
        rows = tile.index
        out[tile] = logits[rows, labels[rows]]
    return out


@helion.kernel(config=helion.Config(block_sizes=[8, 4]))
def gather_apart(x: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
    """``x[rows, t, cols]``: a tile between the two index tensors puts their pairs first."""
    n = rows.size(0)
    _, m, _ = x.size()
    out = torch.empty([n, m], dtype=x.dtype, device=x.device)
    for tn, tm in hl.tile([n, m]):
        out[tn, tm] = x[rows[tn], tm, cols[tn]]
    return out


@helion.kernel(config=helion.Config(block_sizes=[8, 16]))
def gather_outer(x: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
    """``x[0, rows[:, None], cols[None, :]]``: an int, then an outer product of two index tiles."""
    n, m = rows.size(0), cols.size(0)
    out = torch.empty([n, m], dtype=x.dtype, device=x.device)
    for tn, tm in hl.tile([n, m]):
        out[tn, tm] = x[0, rows[tn][:, None], cols[tm][None, :]] * 2.0
    return out


@helion.kernel(config=helion.Config(block_sizes=[16]))
def scatter_pairs(values: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
    n = values.size(0)
    out = torch.zeros([64, 48], dtype=values.dtype, device=values.device)
    for tile in hl.tile(n):
        out[rows[tile], cols[tile]] = values[tile]
    return out


@helion.kernel(config=helion.Config(block_sizes=[8, 16]))
def embedding_backward(grad: torch.Tensor, ids: torch.Tensor, vocab: int) -> torch.Tensor:
    n, d = grad.size()
    out = torch.zeros([vocab, d], dtype=torch.float32, device=grad.device)
    for tn, td in hl.tile([n, d]):
        hl.atomic_add(out, [ids[tn], td], grad[tn, td].to(torch.float32))
    return out


@helion.kernel(config=helion.Config(block_sizes=[16]))
def histogram_2d(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    n = a.size(0)
    out = torch.zeros([8, 8], dtype=torch.int32, device=a.device)
    for tile in hl.tile(n):
        hl.atomic_add(out, [a[tile], b[tile]], 1, sem="relaxed")
    return out


def _ints(n: int, hi: int, seed: int) -> torch.Tensor:
    return torch.randint(0, hi, (n,), generator=torch.Generator().manual_seed(seed))


def _randn(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(sum(shape)))


def _cases() -> list[Any]:
    logits, labels = _randn(37, 50), _ints(37, 50, 1)
    x3, rows, cols = _randn(9, 13, 11), _ints(21, 9, 2), _ints(21, 11, 3)
    x0, r2, c2 = _randn(3, 9, 11), _ints(10, 9, 4), _ints(19, 11, 5)
    uniq = torch.randperm(64 * 48, generator=torch.Generator().manual_seed(6))[:40]
    vals = _randn(40)
    grad, ids = _randn(41, 24), _ints(41, 7, 7)  # ids repeat: the atomic must add each row
    a, b = _ints(300, 8, 8), _ints(300, 8, 9)

    def scatter_ref() -> torch.Tensor:
        out = torch.zeros(64, 48)
        out[uniq // 48, uniq % 48] = vals
        return out

    return [
        pytest.param(target_logit, (logits, labels), lambda: logits[torch.arange(37), labels],
                     id="two-tensor-gather"),
        pytest.param(gather_apart, (x3, rows, cols), lambda: x3[rows, :, cols], id="apart"),
        pytest.param(gather_outer, (x0, r2, c2), lambda: x0[0, r2[:, None], c2[None, :]] * 2,
                     id="outer"),
        pytest.param(scatter_pairs, (vals, uniq // 48, uniq % 48), scatter_ref, id="scatter"),
        pytest.param(embedding_backward, (grad, ids, 7),
                     lambda: torch.zeros(7, 24).index_add_(0, ids, grad), id="atomic-list"),
        pytest.param(histogram_2d, (a, b),
                     lambda: torch.zeros(8, 8, dtype=torch.int32).index_put_(
                         (a, b), torch.ones(300, dtype=torch.int32), accumulate=True),
                     id="atomic-two-tensors"),
    ]  # fmt: skip


@pytest.mark.parametrize("kernel,args,expected", _cases())
def test_interpreter_matches_eager(kernel: helion.Kernel, args: tuple, expected: Any) -> None:
    torch.testing.assert_close(kernel(*args), expected(), rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
@pytest.mark.parametrize("kernel,args,expected", _cases())
def test_gpu_matches_eager(kernel: helion.Kernel, args: tuple, expected: Any) -> None:
    on_gpu = tuple(a.cuda() if isinstance(a, torch.Tensor) else a for a in args)
    torch.testing.assert_close(kernel(*on_gpu).cpu(), expected(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kernel,args,expected", _cases())
def test_ref_mode_matches_eager(kernel: helion.Kernel, args: tuple, expected: Any) -> None:
    torch.testing.assert_close(kernel.run_ref(*args), expected(), rtol=1e-5, atol=1e-5)


def test_pairs_are_one_offset_and_one_mask() -> None:
    logits, labels = _randn(37, 50), _ints(37, 50, 1)
    code = target_logit.bind((logits, labels)).to_triton_code(helion.Config(block_sizes=[16]))
    load = next(line for line in code.splitlines() if "tl.load(logits" in line)
    assert "indices_0 * 50 + load" in load  # rows * stride + labels[rows]: one elementwise pair
    assert load.count("mask_0") == 1  # the shared row mask appears once


def test_apart_indices_go_first() -> None:
    x3, rows, cols = _randn(9, 13, 11), _ints(21, 9, 2), _ints(21, 11, 3)
    bound = gather_apart.bind((x3, rows, cols))
    assert "positions=(0, 1, 0)" in bound.ir()  # both index tensors at dim 0, the tile at dim 1
    code = bound.to_triton_code(helion.Config(block_sizes=[8, 4]))
    assert "load[:, None] * 143 + indices_1[None, :] * 11 + load_1[:, None]" in code


def test_indices_that_do_not_broadcast_name_the_tensor() -> None:
    @helion.kernel(config=helion.Config(block_sizes=[8, 16]))
    def bad(x: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
        out = torch.empty([rows.size(0)], dtype=x.dtype, device=x.device)
        for tn, tm in hl.tile([rows.size(0), cols.size(0)]):
            out[tn] = x[rows[tn], cols[tm]]
        return out

    with pytest.raises(ShapeError, match="tensor-valued indices of 'x' do not broadcast") as err:
        bad(_randn(9, 11), _ints(10, 9, 1), _ints(12, 11, 2))
    assert "test_advanced_index.py" in str(err.value)


def test_atomic_rejects_an_unknown_memory_order() -> None:
    @helion.kernel(config=helion.Config(block_sizes=[16]))
    def bad(x: torch.Tensor) -> torch.Tensor:
        out = torch.zeros([4], dtype=x.dtype, device=x.device)
        for tile in hl.tile(x.size(0)):
            hl.atomic_add(out, [0], x[tile].sum(), sem="seq_cst")
        return out

    with pytest.raises(helion.TilecraftError, match="sem='seq_cst'"):
        bad(_randn(20))


TARGETS = [Target.parse("cuda:90"), Target.parse("hip:gfx942")]


@pytest.mark.crosscompile
def test_crosscompile_for_gpus() -> None:
    jobs, names = [], []
    for param in _cases():
        kernel, args, _ = param.values
        for target in TARGETS:
            bound = BoundKernel(kernel, kernel.bind_arguments(args, {}), target=target)
            _, _, traced, generated = bound.generate(kernel.config)
            for gen, loop in zip(generated, traced.loops, strict=True):
                jobs.append(CompileJob.of(gen, loop, target))
                names.append(f"{param.id}-{target.backend}")
    reports = run_compile_jobs(jobs, 600)
    failed = [f"{n}: {r.error}" for n, r in zip(names, reports, strict=True) if not r.ok]
    assert not failed, "\n".join(failed)


@helion.kernel(static_shapes=True)
def pairs_then_every_other(x: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``x[a, b, 1::2]``: a strided slice after two paired index tensors keeps its dim."""
    out = torch.empty([a.size(0), x.size(2) // 2], dtype=x.dtype, device=x.device)
    for tn in hl.tile(a.size(0)):
        out[tn, :] = x[a[tn], b[tn], 1::2]
    return out


def test_a_strided_slice_beside_paired_indices_keeps_its_dim() -> None:
    """The slice's dim was dropped from the advanced layout: a [BLOCK] value for a
    [BLOCK, 5] store."""
    gen = torch.Generator().manual_seed(13)
    x = torch.randn(6, 7, 10, generator=gen)
    a, b = torch.randint(0, 6, (9,), generator=gen), torch.randint(0, 7, (9,), generator=gen)
    torch.testing.assert_close(pairs_then_every_other(x, a, b), x[a, b, 1::2])
