"""Kernels written in Helion's idiom run on tilecraft by changing the imports.

Each kernel below uses Helion's spelling (``hl.tile``/``hl.grid`` forms, ``hl.load``/``hl.store``
with ``extra_mask``, ``hl.atomic_*`` with index lists and ``sem=``, ``hl.zeros/full/arange``,
``hl.dot(acc=, out_dtype=)``, fragments for ``hl.register_tunable``, tile attributes and their
function forms, ``hl.device_print``, ``hl.barrier``). Every case runs compiled (the Triton
interpreter on CPU) and in ref mode against eager PyTorch; the gpu-marked test runs them all on
the GPU. ``docs/helion_compat.md`` names these tests for its "same" rows.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch

import tilecraft as helion
import tilecraft.language as hl


@helion.kernel(config=helion.Config(block_sizes=[16, 16]))
def embedding_backward(grad: torch.Tensor, ids: torch.Tensor, vocab: int) -> torch.Tensor:
    n, d = grad.size()
    out = torch.zeros([vocab, d], dtype=torch.float32, device=grad.device)
    for tile_n, tile_d in hl.tile([n, d]):
        hl.atomic_add(out, [ids[tile_n], tile_d], grad[tile_n, tile_d].to(torch.float32))
    return out


@helion.kernel(config=helion.Config(block_sizes=[8]))
def cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    n, _ = logits.size()
    losses = torch.empty([n], dtype=torch.float32, device=logits.device)
    for tile_n in hl.tile(n):
        rows = tile_n.index
        x = logits[tile_n, :].to(torch.float32)
        target = logits[rows, labels[rows]].to(torch.float32)
        top = torch.amax(x, dim=-1)
        lse = top + torch.log(torch.sum(torch.exp(x - top[:, None]), dim=-1))
        losses[tile_n] = lse - target
    return losses


@helion.kernel(config=helion.Config(block_sizes=[32]))
def segment_max_min(x: torch.Tensor, seg: torch.Tensor, nseg: int) -> torch.Tensor:
    (n,) = x.size()
    out = torch.empty([2, nseg], dtype=x.dtype, device=x.device)
    out[0].fill_(float("-inf"))
    out[1].fill_(float("inf"))
    for tile in hl.tile(n):
        hl.atomic_max(out, [0, seg[tile]], x[tile])
        hl.atomic_min(out, [1, seg[tile]], x[tile], sem="relaxed")
    return out


@helion.kernel(config=helion.Config(block_sizes=[16]))
def bitwise_atomics(bits: torch.Tensor, slot: torch.Tensor) -> torch.Tensor:
    (n,) = bits.size()
    out = torch.zeros([4, 4], dtype=torch.int32, device=bits.device)
    out[0].fill_(-1)
    for tile in hl.tile(n):
        hl.atomic_and(out, [0, slot[tile]], bits[tile], sem="acq_rel")
        hl.atomic_or(out, [1, slot[tile]], bits[tile])
        hl.atomic_xor(out, [2, slot[tile]], bits[tile], sem="release")
        hl.atomic_xchg(out, [3, tile.index % 4], 7)
    return out


@helion.kernel(config=helion.Config(block_sizes=[16, 16, 16]))
def matmul(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    m, k = x.size()
    _, n = y.size()
    out = torch.empty([m, n], dtype=torch.float16, device=x.device)
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = hl.dot(x[tile_m, tile_k], y[tile_k, tile_n], acc=acc)
        part = hl.dot(x[tile_m, :], y[:, tile_n], out_dtype=torch.float32)
        out[tile_m, tile_n] = (acc + part).to(torch.float16)
    return out


@helion.kernel(config=helion.Config(block_sizes=[16, 8]))
def masked_copy(x: torch.Tensor, limit: int) -> torch.Tensor:
    m, n = x.size()
    out = torch.full_like(x, -1.0)
    for tile_m, tile_n in hl.tile([m, n]):
        keep = (tile_m.index[:, None] + tile_n.index[None, :]) < limit
        v = hl.load(x, [tile_m, tile_n], extra_mask=keep, eviction_policy="evict_first")
        hl.store(out, [tile_m, tile_n], v * 2.0, extra_mask=tile_n.index[None, :] % 2 == 0)
    return out


def _first_of(tile: hl.Tile) -> Any:
    """A helper taking a tile, annotated with Helion's type name."""
    return hl.tile_begin(tile)


@helion.kernel(config=helion.Config())
def tile_attributes(x: torch.Tensor) -> torch.Tensor:
    (n,) = x.size()
    out = torch.zeros([7, n], dtype=torch.int32, device=x.device)
    for tile in hl.tile(n, block_size=8):  # a fixed block: ref mode tiles the same way
        idx = hl.tile_index(tile)
        ones = hl.subscript(torch.ones_like(x[tile]), [slice(None)]).to(torch.int32)
        out[0, tile] = idx
        out[1, tile] = ones * _first_of(tile)
        out[2, tile] = ones * hl.tile_end(tile)
        out[3, tile] = ones * hl.tile_block_size(tile)
        out[4, tile] = ones * hl.tile_id(tile)
        out[5, tile] = ones * tile.count
        out[6, tile] = ones * (tile.end - tile.begin)
    return out


def tile_attributes_ref(x: torch.Tensor) -> torch.Tensor:
    n, b = x.numel(), 8
    i = torch.arange(n)
    begin = i // b * b
    rows = [i, begin, torch.clamp(begin + b, max=n), torch.full_like(i, b), i // b]
    rows += [torch.full_like(i, -(-n // b)), torch.clamp(begin + b, max=n) - begin]
    return torch.stack(rows).to(torch.int32)


@helion.kernel(config=helion.Config(block_sizes=[8]))
def creation_forms(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    left = torch.empty([m, n], dtype=torch.float32, device=x.device)
    right = torch.empty([m, 8], dtype=torch.float32, device=x.device)
    for tile_m in hl.tile(m):
        z = hl.zeros([tile_m, n], dtype=torch.float32)
        f = hl.full([tile_m, 8], 0.5, dtype=torch.float32)
        steps = hl.arange(1, 17, 2, dtype=torch.int64)  # 8 values: 1, 3, ..., 15
        left[tile_m, :] = z + x[tile_m, :]
        right[tile_m, :] = f + steps[None, :].to(torch.float32)
    return torch.cat([left, right], dim=1)


@helion.kernel(config=helion.Config(block_sizes=[4]))
def grid_and_tile_forms(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.zeros_like(x)
    for i, j in hl.grid([1, 0], [m, n]):  # begin/end lists: rows 1.. only
        out[i, j] = x[i, j]
    for tile_m, tile_n in hl.tile([0, 2], [m, n], block_size=[None, 8]):
        acc = hl.zeros([tile_m, tile_n], dtype=x.dtype)
        for k in hl.static_range(0, 3, 2):  # 0, 2
            acc = acc + x[tile_m, tile_n] * (k + 1)
        out[tile_m, tile_n] = out[tile_m, tile_n] + acc
    return out


def grid_and_tile_forms_ref(x: torch.Tensor) -> torch.Tensor:
    out = torch.zeros_like(x)
    out[1:] = x[1:]
    out[:, 2:] += x[:, 2:] * 4
    return out


@helion.kernel(config=helion.Config(block_sizes=[16], chunk=64, unroll=True))
def tunables(x: torch.Tensor) -> torch.Tensor:
    (n,) = x.size()
    block = hl.register_block_size(n)
    chunk = hl.register_tunable("chunk", hl.PowerOfTwoFragment(16, 128, 32))
    hl.register_tunable("unroll", hl.BooleanFragment())
    hl.register_tunable("copies", hl.IntegerFragment(1, 4, 2))
    hl.register_tunable("mode", hl.EnumFragment(["a", "b"]))
    out = torch.empty_like(x)
    for tile in hl.tile(n, block_size=block):
        out[tile] = x[tile] * 2.0
    for tile in hl.tile(n, block_size=chunk):
        out[tile] = out[tile] + 1.0
    return out


@helion.kernel(config=helion.Config(block_sizes=[16, 16]))
def two_phase(x: torch.Tensor) -> torch.Tensor:
    (n,) = x.size()
    partial = torch.empty_like(x)
    out = torch.empty_like(x)
    for tile in hl.tile(n):
        partial[tile] = x[tile] + 1.0
    hl.barrier()
    for tile in hl.tile(n):
        out[tile] = partial[tile] * 2.0 + partial[n - 1 - tile.index]
    return out


@helion.kernel(config=helion.Config(block_sizes=[8]))
def scaled_rows(x: torch.Tensor, k: hl.constexpr) -> torch.Tensor:
    m, n = x.size()
    n = hl.specialize(n)
    out = torch.empty_like(x)
    for tile in hl.tile(m):
        out[tile, :] = x[tile, :] * k
    return out


@helion.kernel(config=helion.Config(block_sizes=[16]))
def printing(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        v = x[tile]
        hl.device_print("tcv", v)
        out[tile] = v
    return out


@dataclasses.dataclass(frozen=True)
class Case:
    kernel: helion.Kernel
    inputs: Callable[[str], tuple[Any, ...]]
    expected: Callable[..., torch.Tensor]
    tol: float = 1e-5


def _g(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _randn(*shape: int, seed: int = 0, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*shape, generator=_g(seed)).to(dtype)


def _ints(n: int, hi: int, seed: int) -> torch.Tensor:
    return torch.randint(0, hi, (n,), generator=_g(seed))


def _on(device: str, *xs: Any) -> tuple[Any, ...]:
    return tuple(x.to(device) if isinstance(x, torch.Tensor) else x for x in xs)


def _segment_ref(x: torch.Tensor, seg: torch.Tensor, nseg: int) -> torch.Tensor:
    hi = torch.full([nseg], float("-inf")).scatter_reduce(0, seg.cpu(), x.cpu(), "amax")
    lo = torch.full([nseg], float("inf")).scatter_reduce(0, seg.cpu(), x.cpu(), "amin")
    return torch.stack([hi, lo])


def _bitwise_ref(bits: torch.Tensor, slot: torch.Tensor) -> torch.Tensor:
    out = torch.zeros(4, 4, dtype=torch.int32)
    out[0] = -1
    for b, s in zip(bits.cpu().tolist(), slot.cpu().tolist(), strict=True):
        out[0, s] &= b
        out[1, s] |= b
        out[2, s] ^= b
    out[3] = 7
    return out


def _cross_entropy_ref(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.cross_entropy(logits.float(), labels, reduction="none")


def _masked_ref(x: torch.Tensor, limit: int) -> torch.Tensor:
    i, j = torch.arange(x.size(0))[:, None], torch.arange(x.size(1))[None, :]
    loaded = torch.where(i + j < limit, x, 0.0)
    return torch.where(j % 2 == 0, loaded * 2, -1.0)


def _creation_ref(x: torch.Tensor) -> torch.Tensor:
    steps = torch.arange(1, 17, 2).float() + 0.5
    return torch.cat([x.float(), steps.expand(x.size(0), 8)], dim=1)


CASES: dict[str, Case] = {
    "embedding_backward": Case(
        embedding_backward,
        lambda d: _on(d, _randn(45, 40), _ints(45, 9, 1), 9),
        lambda g, ids, v: torch.zeros(v, g.size(1), device=g.device).index_add_(0, ids, g),
    ),
    "cross_entropy": Case(
        cross_entropy,
        lambda d: _on(d, _randn(29, 100, seed=2), _ints(29, 100, 3)),
        _cross_entropy_ref,
        1e-4,
    ),
    "segment_max": Case(
        segment_max_min, lambda d: _on(d, _randn(101, seed=4), _ints(101, 6, 5), 6), _segment_ref
    ),
    "bitwise_atomics": Case(
        bitwise_atomics,
        lambda d: _on(d, _ints(37, 1 << 12, 6).to(torch.int32), _ints(37, 4, 7)),
        _bitwise_ref,
    ),
    "matmul": Case(
        matmul,
        lambda d: _on(d, _randn(40, 48, seed=8), _randn(48, 24, seed=9)),
        lambda x, y: (2 * (x @ y)).half(),
        2e-3,
    ),
    "masked_copy": Case(masked_copy, lambda d: _on(d, _randn(21, 19, seed=10), 25), _masked_ref),
    "tile_attributes": Case(tile_attributes, lambda d: _on(d, _randn(30)), tile_attributes_ref),
    "creation_forms": Case(creation_forms, lambda d: _on(d, _randn(13, 10)), _creation_ref),
    "grid_and_tile_forms": Case(
        grid_and_tile_forms, lambda d: _on(d, _randn(9, 21, seed=11)), grid_and_tile_forms_ref
    ),
    "tunables": Case(tunables, lambda d: _on(d, _randn(150, seed=12)), lambda x: x * 2 + 1),
    "two_phase": Case(
        two_phase, lambda d: _on(d, _randn(40, seed=13)), lambda x: (x + 1) * 2 + (x + 1).flip(0)
    ),
    "scaled_rows": Case(scaled_rows, lambda d: _on(d, _randn(11, 6, seed=14), 3), lambda x, k: x * k),
}  # fmt: skip


def _check(name: str, device: str = "cpu", ref: bool = True) -> None:
    case = CASES[name]
    args = case.inputs(device)
    expected = case.expected(*case.inputs("cpu")).to(device)
    got = case.kernel(*args)
    torch.testing.assert_close(got, expected, rtol=case.tol, atol=case.tol)
    if ref:
        ref_out = case.kernel.run_ref(*case.inputs(device))
        torch.testing.assert_close(ref_out, expected, rtol=case.tol, atol=case.tol)


def test_embedding_backward() -> None:
    _check("embedding_backward")


def test_cross_entropy() -> None:
    _check("cross_entropy")


def test_segment_max() -> None:
    _check("segment_max")


def test_bitwise_atomics() -> None:
    _check("bitwise_atomics")


def test_matmul_out_dtype() -> None:
    _check("matmul")
    code = matmul.bind(CASES["matmul"].inputs("cpu")).to_triton_code(matmul.config)
    assert code.count("tl.dot(") == 2


def test_masked_load_store() -> None:
    _check("masked_copy")
    code = masked_copy.bind(CASES["masked_copy"].inputs("cpu")).to_triton_code(masked_copy.config)
    assert "eviction_policy='evict_first'" in code


def test_tile_attributes() -> None:
    _check("tile_attributes")


def test_creation_forms() -> None:
    _check("creation_forms")


def test_grid_and_tile_forms() -> None:
    _check("grid_and_tile_forms")


def test_grid_step_is_an_error_naming_it() -> None:
    with pytest.raises(helion.TilecraftError, match="step"):
        hl.grid(10, step=2)


def test_register_block_size_and_tunable() -> None:
    _check("tunables")
    code = tunables.bind(CASES["tunables"].inputs("cpu")).to_triton_code(tunables.config)
    assert "tl.arange(0, 64)" in code  # the config's chunk, not the fragment's default 32
    assert hl.PowerOfTwoFragment(16, 128, 32).choices() == (32, 16, 64, 128)
    assert hl.IntegerFragment(1, 4).choices() == (1, 2, 3, 4)
    assert hl.EnumFragment(["a", "b"]).choices() == ("a", "b")


def test_barrier_between_loops() -> None:
    _check("two_phase")


def test_constexpr_and_specialize() -> None:
    _check("scaled_rows")


def test_device_print(capfd: pytest.CaptureFixture[str]) -> None:
    x = torch.arange(4, dtype=torch.float32)
    torch.testing.assert_close(printing(x), x)
    code = printing.bind((x,)).to_triton_code(printing.config)
    assert "tl.device_print('tcv'" in code
    assert "tcv" in capfd.readouterr().out


def test_host_helpers() -> None:
    assert helion.cdiv(10, 4) == 3 and helion.cdiv(8, 4) == 2
    assert [helion.next_power_of_2(v) for v in (1, 3, 16, 17)] == [1, 4, 16, 32]
    assert helion.jit is helion.kernel


def test_helion_config_fields() -> None:
    """A config written with Helion's field names runs (the fields tilecraft implements)."""
    config = helion.Config(
        block_sizes=[16, 16],
        num_warps=2,
        num_stages=1,
        pid_type="flat",
        indexing="pointer",
        load_eviction_policies=["", "last"],
    )
    args = CASES["embedding_backward"].inputs("cpu")
    bound = embedding_backward.bind(args)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing here needs a repair
        code = bound.to_triton_code(config)
    assert "num_warps=2" in code and "eviction_policy='evict_last'" in code


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(CASES))
def test_ported_kernels_on_gpu(name: str) -> None:
    _check(name, device="cuda", ref=False)
