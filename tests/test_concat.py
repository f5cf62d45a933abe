"""torch.cat / torch.concat / torch.stack of tiles of any sizes along a whole static dim
(frontend/concat.py), and torch.split / torch.chunk / torch.unbind into unequal parts
(frontend/splits.py): the kernels (on the GPU, in the interpreter on a CPU) against eager PyTorch
with pieces whose sizes differ or are not powers of two (padded lanes), mixed dtypes promoted as
torch does, two configs each, the generated code's form (the power-of-two fast path stays a
join), the errors for a tile loop's dim and for forms torch refuses, and cross-compiles of the
defaults for sm_90 and gfx942."""

from __future__ import annotations

import pytest
import torch

import tilecraft as tc
from tests.cross_targets import assert_defaults_cross_compile
from tilecraft.errors import UnsupportedOpError


def _code(kernel: tc.Kernel, args: tuple[torch.Tensor, ...]) -> str:
    bound = kernel.bind(args)
    return bound.to_triton_code(bound.config_spec.default())


def _run(kernel: tc.Kernel, args: tuple[torch.Tensor, ...], blocks: list[int]) -> object:
    bound = kernel.bind(args)
    return bound.run(bound.compile_config(tc.Config(block_sizes=blocks)), *args)


@tc.kernel(static_shapes=True)
def uneven(
    x: torch.Tensor, y: torch.Tensor, k: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A slice beside a row (3 + 5), three pieces of 3, 5 and 1 of three dtypes (float32,
    float16, int64: float32 as torch promotes), and torch.concatenate of a row with itself and an
    arange (13 + 13 + 4)."""
    m, n = x.size()
    w = y.size(1)
    two = torch.empty(m, 3 + w, dtype=x.dtype, device=x.device)
    three = torch.empty(m, 3 + w + 1, dtype=torch.float32, device=x.device)
    again = torch.empty(m, 2 * n + 4, dtype=x.dtype, device=x.device)
    for tm in tc.tile(m):
        row = x[tm, :]
        two[tm, :] = torch.cat([row[:, :3], y[tm, :]], dim=-1)
        three[tm, :] = torch.cat([row[:, 2:5], y[tm, :].half(), k[tm, :]], dim=1)
        steps = torch.arange(4, device=x.device).float()[None, :].expand(tm, 4)
        again[tm, :] = torch.concatenate([row, row * 2.0, steps], axis=1)
    return two, three, again


def _uneven_ref(
    x: torch.Tensor, y: torch.Tensor, k: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    steps = torch.arange(4, device=x.device).float()[None, :].expand(x.size(0), 4)
    return (
        torch.cat([x[:, :3], y], dim=-1),
        torch.cat([x[:, 2:5], y.half(), k], dim=1),
        torch.cat([x, x * 2.0, steps], dim=1),
    )


@pytest.mark.parametrize("blocks", [[1], [4]])
def test_cat_of_uneven_pieces_matches_eager(blocks: list[int], device: str) -> None:
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(7, 13, generator=g), torch.randn(7, 5, generator=g)
    k = torch.randint(-9, 9, (7, 1), generator=g)
    x, y, k = x.to(device), y.to(device), k.to(device)
    want = _uneven_ref(x, y, k)
    assert want[1].dtype == torch.float32  # torch's promotion of float32, float16, int64
    for got, w in zip(_run(uneven, (x, y, k), blocks), want, strict=True):  # type: ignore[call-overload]
        assert torch.equal(got, w)
    for got, w in zip(uneven.run_ref(x, y, k), want, strict=True):
        assert torch.equal(got, w)
    code = _code(uneven, (x, y, k))
    assert "tl.gather" in code and "tl.where" in code


@tc.kernel(static_shapes=True)
def middle(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Along the middle dim of 3-D tiles: [tb, 3, d] and [tb, 6, d] into [tb, 9, d]."""
    nb, s, d = a.size()
    out = torch.empty(nb, s + b.size(1), d, dtype=a.dtype, device=a.device)
    for tb in tc.tile(nb):
        out[tb, :, :] = torch.concat([a[tb, :, :], b[tb, :, :] + 1.0], dim=1)
    return out


@pytest.mark.parametrize("blocks", [[1], [2]])
def test_cat_along_a_middle_dim_matches_eager(blocks: list[int], device: str) -> None:
    g = torch.Generator().manual_seed(1)
    a, b = torch.randn(5, 3, 7, generator=g), torch.randn(5, 6, 7, generator=g)
    a, b = a.to(device), b.to(device)
    assert torch.equal(_run(middle, (a, b), blocks), torch.cat([a, b + 1.0], 1))  # type: ignore[arg-type]


@tc.kernel(static_shapes=True)
def square_pieces(s: torch.Tensor) -> torch.Tensor:
    """A slice of a square [5, 5] tile beside its transpose: the transpose's dim along the cat
    dim is named like the slice's other 5, and is renamed (positional, as torch)."""
    nb, n, _ = s.size()
    out = torch.empty(nb, n, n + 3, dtype=s.dtype, device=s.device)
    for tb in tc.tile(nb):
        v = s[tb, :, :]
        out[tb, :, :] = torch.cat([v[:, :, :3], v.transpose(1, 2)], dim=2)
    return out


def test_cat_of_a_transposed_square_piece_lines_up_by_position(device: str) -> None:
    sq = torch.randn(3, 5, 5, generator=torch.Generator().manual_seed(4)).to(device)
    assert torch.equal(square_pieces(sq), torch.cat([sq[:, :, :3], sq.transpose(1, 2)], 2))


@tc.kernel(static_shapes=True)
def stacks(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Three rows stacked in the middle, five in front, and two (the join fast path) last."""
    m, n = x.size()
    three = torch.empty(m, 3, n, dtype=x.dtype, device=x.device)
    five = torch.empty(5, m, n, dtype=x.dtype, device=x.device)
    two = torch.empty(m, n, 2, dtype=x.dtype, device=x.device)
    for tm in tc.tile(m):
        v = x[tm, :]
        three[tm, :, :] = torch.stack([v, v * 2.0, -v], dim=1)
        five[:, tm, :] = torch.stack([v, v + 1.0, v + 2.0, v + 3.0, v + 4.0])
        two[tm, :, :] = torch.stack([v, -v], dim=-1)
    return three, five, two


@pytest.mark.parametrize("blocks", [[1], [4]])
def test_stack_of_any_number_of_tiles_matches_eager(blocks: list[int], device: str) -> None:
    x = torch.randn(6, 11, generator=torch.Generator().manual_seed(2)).to(device)
    three, five, two = _run(stacks, (x,), blocks)  # type: ignore[misc]
    assert torch.equal(three, torch.stack([x, x * 2.0, -x], 1))
    assert torch.equal(five, torch.stack([x + float(i) for i in range(5)]))
    assert torch.equal(two, torch.stack([x, -x], -1))
    code = _code(stacks, (x,))
    assert "tl.join" in code  # two tiles: still a join
    assert "tl.gather" not in code  # a stack's pieces are one element each: broadcasts


@tc.kernel(static_shapes=True)
def equal_halves(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty(m, 2 * n, dtype=x.dtype, device=x.device)
    for tm in tc.tile(m):
        out[tm, :] = torch.cat([x[tm, :], -x[tm, :]], dim=1)
    return out


def test_equal_power_of_two_pieces_keep_the_join(device: str) -> None:
    x = torch.randn(5, 8, generator=torch.Generator().manual_seed(3)).to(device)
    assert torch.equal(equal_halves(x), torch.cat([x, -x], 1))
    code = _code(equal_halves, (x,))
    assert "tl.join" in code and "tl.reshape" in code and "tl.gather" not in code


def _cat_kernel(body: str, static: bool = True) -> tc.Kernel:
    @tc.kernel(static_shapes=static)
    def k(x: torch.Tensor) -> torch.Tensor:
        m, n = x.size()
        out = torch.empty(2 * m, n, dtype=x.dtype, device=x.device)
        for tm in tc.tile(m):
            if body == "tile":
                out[tm, :] = torch.cat([x[tm, :], x[tm, :]], dim=0)
            elif body == "rank":
                out[tm, :] = torch.cat([x[tm, :], x[tm, 0]], dim=1)
            elif body == "number":
                out[tm, :] = torch.cat([x[tm, :], 1.0], dim=1)
            else:
                out[tm, :] = torch.cat([x[tm, :3], x[tm, :]], dim=1)
        return out

    return k


def test_cat_along_a_tile_loop_dim_says_to_store_the_pieces(device: str) -> None:
    with pytest.raises(UnsupportedOpError, match=r"torch\.cat along dim 0 .* a tile loop") as info:
        _cat_kernel("tile")(torch.randn(8, 4, device=device))
    assert "store each piece" in str(info.value) and "test_concat.py" in str(info.value)


def test_cat_of_a_run_time_size_says_to_compile_it_static(device: str) -> None:
    with pytest.raises(UnsupportedOpError, match=r"torch\.cat along dim 1 .* run time") as info:
        _cat_kernel("dynamic", static=False)(torch.randn(8, 5, device=device))
    assert "static_shapes=True" in str(info.value)


def test_cat_forms_torch_refuses_are_errors_naming_them(device: str) -> None:
    with pytest.raises(UnsupportedOpError, match=r"torch\.cat: tile 1 is 1-D"):
        _cat_kernel("rank")(torch.randn(8, 4, device=device))
    # torch's own argument check, at the user's line
    with pytest.raises(UnsupportedOpError, match=r"test_concat.py:\d+: .*expected Tensor"):
        _cat_kernel("number")(torch.randn(8, 4, device=device))


@tc.kernel(static_shapes=True)
def parts(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """torch.split of rows of 11 into [3, 5, 3], by 4 (4, 4, 3), torch.chunk into 3 (4, 4, 3)
    and torch.unbind of a middle dim of 3; each piece used (and the split put back)."""
    m, n = x.size()
    back = torch.empty(m, n, dtype=x.dtype, device=x.device)
    by4 = torch.empty(m, 4, dtype=x.dtype, device=x.device)
    thirds = torch.empty(m, 4, dtype=x.dtype, device=x.device)
    planes = torch.empty(m, n, dtype=x.dtype, device=x.device)
    for tm in tc.tile(m):
        row = x[tm, :]
        p, q, r = torch.split(row, [3, 5, 3], dim=1)
        back[tm, :] = torch.cat([r, q * 2.0, p], dim=1)
        a, b, c = row.split(4, dim=-1)
        by4[tm, :] = a - b + c.sum(dim=1, keepdim=True)
        u, v, w = torch.chunk(row, 3, dim=1)
        thirds[tm, :] = u * v + w.amax(dim=1, keepdim=True)
    for tm in tc.tile(m):
        row = x[tm, :]
        lo, mid, hi = torch.stack([row, row + 1.0, row * 3.0], dim=1).unbind(1)
        planes[tm, :] = lo - mid + hi
    return back, by4, thirds, planes


def _parts_ref(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    p, q, r = torch.split(x, [3, 5, 3], dim=1)
    a, b, c = x.split(4, dim=-1)
    u, v, w = torch.chunk(x, 3, dim=1)
    return (
        torch.cat([r, q * 2.0, p], dim=1),
        a - b + c.sum(dim=1, keepdim=True),
        u * v + w.amax(dim=1, keepdim=True),
        x - (x + 1.0) + x * 3.0,
    )


@pytest.mark.parametrize("blocks", [[1], [4]])
def test_split_chunk_and_unbind_into_unequal_parts_match_eager(
    blocks: list[int], device: str
) -> None:
    x = torch.randn(6, 11, generator=torch.Generator().manual_seed(5)).to(device)
    for got, want in zip(_run(parts, (x,), blocks * 2), _parts_ref(x), strict=True):  # type: ignore[call-overload]
        torch.testing.assert_close(got, want)
    assert "tl.gather" in _code(parts, (x,))


def test_split_forms_it_cannot_take_are_errors(device: str) -> None:
    def splitting(call: str) -> tc.Kernel:
        @tc.kernel(static_shapes=True)
        def k(x: torch.Tensor) -> torch.Tensor:
            out = torch.empty(x.size(0), 2, device=x.device)
            for t in tc.tile(x.size(0)):
                if call == "tile":
                    out[t, :] = torch.split(x[t, :], [2, 3], dim=0)[0]
                elif call == "sum":
                    out[t, :] = torch.split(x[t, :], [2, 2], dim=1)[0]
                else:
                    out[t, :] = torch.chunk(x[t, :], 0, dim=1)[0]
            return out

        return k

    x = torch.randn(5, 5, device=device)
    with pytest.raises(
        UnsupportedOpError, match=r"torch\.split along dim 0 .* a tile loop"
    ) as info:
        splitting("tile")(x)
    assert "sliced indices" in str(info.value)
    with pytest.raises(UnsupportedOpError, match=r"list of ints that sum to 5"):
        splitting("sum")(x)
    with pytest.raises(UnsupportedOpError, match=r"torch\.chunk of a tile into chunks=0"):
        splitting("chunk")(x)


@pytest.mark.crosscompile
def test_concat_cross_compiles() -> None:
    meta = {"device": "meta"}
    x, y = torch.empty(300, 100, **meta), torch.empty(300, 5, **meta)
    k = torch.empty(300, 1, dtype=torch.int64, **meta)
    assert_defaults_cross_compile(uneven, (x, y, k))
    a, b = torch.empty(64, 3, 40, **meta), torch.empty(64, 6, 40, **meta)
    assert_defaults_cross_compile(middle, (a, b))
    assert_defaults_cross_compile(stacks, (x,))
    assert_defaults_cross_compile(split_parts, (torch.empty(300, 11, **meta),))


@tc.kernel(static_shapes=True)
def split_parts(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """torch.split by 4 and torch.chunk into 3 of rows of 11, each piece reduced or used."""
    m, n = x.size()
    by4 = torch.empty(m, 4, dtype=x.dtype, device=x.device)
    thirds = torch.empty(m, 4, dtype=x.dtype, device=x.device)
    for tm in tc.tile(m):
        row = x[tm, :]
        a, b, c = row.split(4, dim=-1)
        by4[tm, :] = a - b + c.sum(dim=1, keepdim=True)
        u, v, w = torch.chunk(row, 3, dim=1)
        thirds[tm, :] = u * v + w.amax(dim=1, keepdim=True)
    return by4, thirds


@pytest.mark.crosscompile
def test_split_and_cat_beside_a_reduction_cross_compiles() -> None:
    """Gathers of gathers beside a reduction failed Triton 3.6's OptimizeThreadLocality pass on
    sm_90 (a warp-local gather layout assertion); they compose into one gather now."""
    assert_defaults_cross_compile(parts, (torch.empty(300, 11, device="meta"),))


def test_a_cat_of_slices_is_one_gather_of_the_row() -> None:
    """Each piece of a cat of slices (and of an elementwise op of one) reads the loaded row at
    composed positions: no gather reads another gather's result."""
    x = torch.empty(300, 11, device="meta")
    code = parts.bind((x,)).to_triton_code()
    gathers = [line for line in code.splitlines() if "tl.gather(" in line]
    assert gathers and all("tl.gather(row" in line for line in gathers), gathers
