"""Views of tiles: unsqueeze/squeeze/reshape, permute/transpose, expand, torch.stack, tc.join /
tc.split. Generated code, numerics in the interpreter against eager PyTorch (two configs each),
ref mode, cross-compiles for cuda:90 and hip:gfx942, and the errors for what tiles cannot do."""

from __future__ import annotations

import pytest
import torch

import tilecraft as tc
from tilecraft.errors import ShapeError, UnsupportedOpError
from tilecraft.targets.target import Target
from tilecraft.tools.check import check_kernel


def _rand(*shape: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(sum(shape) * 7)
    return torch.randn(*shape, generator=g)


@tc.kernel(static_shapes=True)
def transposes(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    m, n = x.size()
    xt = torch.empty([n, m], dtype=x.dtype, device=x.device)
    out = torch.empty_like(x)
    for tm, tn in tc.tile([m, n]):
        a = x[tm, tn]
        xt[tn, tm] = torch.transpose(a, 0, 1)
        row = y[tm].unsqueeze(1).expand(tm, tn)
        c = a.unsqueeze(0).permute(1, 2, 0).squeeze(-1)
        out[tm, tn] = c * 2.0 + row
    return xt, out


def _transposes_ref(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return x.T.contiguous(), x * 2.0 + y[:, None]


@tc.kernel(static_shapes=True)
def swap_pairs(x: torch.Tensor) -> torch.Tensor:
    """Pairs (x[2i], x[2i+1]) become (x[2i+1], 2 x[2i]); also a stacked sum, via three views."""
    m, n = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        even, odd = x[tm, 0::2], x[tm, 1::2]
        first, second = tc.split(tc.join(odd, even * 2.0))
        out[tm, 0::2] = first
        out[tm, 1::2] = second + torch.stack([even, odd], dim=1).sum(1).reshape(tm, -1) * 0.5
    return out


def _swap_pairs_ref(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    even, odd = x[:, 0::2], x[:, 1::2]
    out[:, 0::2] = odd
    out[:, 1::2] = even * 2.0 + (even + odd) * 0.5
    return out


def test_view_codegen() -> None:
    x, y = _rand(37, 20), _rand(37)
    bound = transposes.bind((x, y))
    code = bound.to_triton_code(bound.config_spec.default())
    assert "tl.trans(" in code and "tl.permute(" in code and "(1, 2, 0)" in code, code
    assert "tl.broadcast_to(" in code, code
    code = swap_pairs.bind((_rand(9, 24),)).to_triton_code(tc.Config(block_sizes=[4]))
    assert "tl.join(" in code and "tl.split(" in code, code


@pytest.mark.parametrize("blocks", [[16, 16], [4, 8]])
def test_transposes_and_expand_numerics(blocks: list[int]) -> None:
    x, y = _rand(37, 20), _rand(37)
    bound = transposes.bind((x, y))
    got = bound.run(bound.compile_config(tc.Config(block_sizes=blocks)), x, y)
    for g, e in zip(got, _transposes_ref(x, y), strict=True):
        torch.testing.assert_close(g, e)
    for g, e in zip(transposes.run_ref(x, y), _transposes_ref(x, y), strict=True):
        torch.testing.assert_close(g, e)


@pytest.mark.parametrize("blocks", [[1], [8]])
def test_join_split_stack_numerics(blocks: list[int]) -> None:
    for shape in ((9, 24), (3, 10)):
        x = _rand(*shape)
        bound = swap_pairs.bind((x,))
        got = bound.run(bound.compile_config(tc.Config(block_sizes=blocks)), x)
        torch.testing.assert_close(got, _swap_pairs_ref(x))
        torch.testing.assert_close(swap_pairs.run_ref(x), _swap_pairs_ref(x))


@pytest.mark.crosscompile
def test_views_crosscompile() -> None:
    targets = [Target.parse("cuda:90"), Target.parse("hip:gfx942")]
    x = torch.randn(512, 1000, dtype=torch.bfloat16)
    rows = check_kernel(transposes, (x, x[:, 0].contiguous()), targets, _default)
    rows += check_kernel(swap_pairs, (x,), targets, _default)
    assert len(rows) == 4
    for row in rows:
        assert row.report is not None and row.report.ok, (row.target, row.status, row.report)


def _default(bound: tc.BoundKernel) -> list[tc.Config]:
    return [bound.config_spec.default()]


@tc.kernel(static_shapes=True)
def merges_dims(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = x.new_empty([m * n])
    for tm, tn in tc.tile([m, n]):
        out[tm] = x[tm, tn].reshape(-1)
    return out


@tc.kernel(static_shapes=True)
def cats(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = x.new_empty([m, 2 * n])
    for tm in tc.tile(m):
        out[tm, :] = torch.cat([x[tm, :], x[tm, :]], dim=1)
    return out


@tc.kernel(static_shapes=True)
def bad_split(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm in tc.tile(x.size(0)):
        a, b = tc.split(x[tm, :])
        out[tm, :] = a + b
    return out


def test_view_errors_say_what_to_write() -> None:
    x = _rand(8, 16)
    with pytest.raises(UnsupportedOpError, match=r"reshape of a tile") as info:
        merges_dims(x)
    assert "tile dims keep their place" in str(info.value) and "test_views.py" in str(info.value)
    y = _rand(8, 12)  # 12 columns pad to 16 in registers: a gather and a select, no reshape
    torch.testing.assert_close(cats(y), torch.cat([y, y], 1))
    with pytest.raises(ShapeError, match=r"tc.split needs a tile whose last dim is 2"):
        bad_split(x)


def test_join_split_eager_meaning() -> None:
    a, b = _rand(3, 4), _rand(3, 4)
    j = tc.join(a, b)
    assert j.shape == (3, 4, 2)
    p, q = tc.split(j)
    torch.testing.assert_close(p, a)
    torch.testing.assert_close(q, b)


@tc.kernel(static_shapes=True)
def regroups(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Merging [m, 4, 32] -> [m, 128] (and back), rotate-half with torch.cat, a cat along dim 0
    of a [1, n] pair, and -1 standing for a merged size."""
    m, g, c = x.size()
    n = g * c
    merged = x.new_empty([m, n])
    rot = y.new_empty([m, 2, y.size(1)])
    for tm in tc.tile(m):
        v = x[tm, :, :]
        flat = v.reshape(tm, n)
        back = flat.reshape(tm, g, c)  # a split
        merged[tm, :] = flat * 2.0 + back.reshape(tm, -1)
        w = y[tm, :]
        half = y.size(1) // 2
        first, second = y[tm, :half], y[tm, half:]
        rotated = torch.cat([-second, first], dim=-1)
        pair = torch.cat([w[:, None, :], rotated[:, None, :]], dim=1)
        rot[tm, :, :] = pair
    return merged, rot


def _regroups_ref(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    m = x.size(0)
    flat = x.reshape(m, -1)
    half = y.size(1) // 2
    rotated = torch.cat([-y[:, half:], y[:, :half]], dim=-1)
    return flat * 3.0, torch.stack([y, rotated], dim=1)


@pytest.mark.parametrize("blocks", [[1], [8]])
@pytest.mark.parametrize("groups", [4, 3])  # 3 groups: the merged 96 pads to 128 = 4 * 32
def test_merge_split_and_cat_numerics(blocks: list[int], groups: int) -> None:
    x, y = _rand(13, groups, 32), _rand(13, 64)
    bound = regroups.bind((x, y))
    config = tc.Config(block_sizes=blocks)
    assert "tl.reshape(" in bound.to_triton_code(config)
    got = bound.run(bound.compile_config(config), x, y)
    for g, e in zip(got, _regroups_ref(x, y), strict=True):
        torch.testing.assert_close(g, e)
    for g, e in zip(regroups.run_ref(x, y), _regroups_ref(x, y), strict=True):
        torch.testing.assert_close(g, e)


@pytest.mark.crosscompile
def test_regroups_crosscompile() -> None:
    targets = [Target.parse("cuda:90"), Target.parse("hip:gfx942")]
    x, y = torch.randn(512, 4, 32, dtype=torch.bfloat16), torch.randn(512, 128)
    rows = check_kernel(regroups, (x, y), targets, _default)
    assert len(rows) == 2
    for row in rows:
        assert row.report is not None and row.report.ok, (row.target, row.status, row.report)


def test_regroup_with_dynamic_sizes_says_what_to_do() -> None:
    dynamic = tc.kernel(static_shapes=False)(regroups.fn)
    with pytest.raises(UnsupportedOpError, match=r"cannot become") as info:
        dynamic(_rand(13, 4, 32), _rand(13, 64))
    assert "static_shapes=True" in str(info.value) and "test_views.py" in str(info.value)


@tc.kernel(static_shapes=True)
def stacks(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Four shifted copies of a row stacked in the middle and last, eight in front, and the
    four concatenated."""
    m, n = x.size()
    wide = torch.empty([m, 4 * n], dtype=x.dtype, device=x.device)
    mid = torch.empty([m, 4, n], dtype=x.dtype, device=x.device)
    last = torch.empty([m, n, 4], dtype=x.dtype, device=x.device)
    front = torch.empty([8, m, n], dtype=x.dtype, device=x.device)
    for tm in tc.tile(m):
        v = x[tm, :]
        parts = [v, v * 2.0, v + 1.0, -v]
        mid[tm, :, :] = torch.stack(parts, dim=1)
        last[tm, :, :] = torch.stack(parts, dim=-1)
        front[:, tm, :] = torch.stack([*parts, *(p * 3.0 for p in parts)])
        wide[tm, :] = torch.cat(parts, dim=1)
    return mid, last, front, wide


def _stacks_ref(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    parts = [x, x * 2.0, x + 1.0, -x]
    eight = torch.stack([*parts, *(p * 3.0 for p in parts)])
    return torch.stack(parts, dim=1), torch.stack(parts, dim=-1), eight, torch.cat(parts, dim=1)


@pytest.mark.parametrize("blocks", [[1], [4]])
def test_stack_and_cat_of_four_and_eight_tiles(blocks: list[int]) -> None:
    x = _rand(7, 32)
    bound = stacks.bind((x,))
    got = bound.run(bound.compile_config(tc.Config(block_sizes=blocks)), x)
    for g, e in zip(got, _stacks_ref(x), strict=True):
        torch.testing.assert_close(g, e)
    for g, e in zip(stacks.run_ref(x), _stacks_ref(x), strict=True):
        torch.testing.assert_close(g, e)


@pytest.mark.crosscompile
def test_stacks_crosscompile() -> None:
    targets = [Target.parse("cuda:90"), Target.parse("hip:gfx942")]
    rows = check_kernel(stacks, (torch.randn(512, 128),), targets, _default)
    assert len(rows) == 2 and all(r.report is not None and r.report.ok for r in rows), rows


@tc.kernel(static_shapes=True)
def stack_three(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty([m, 3, n], dtype=x.dtype, device=x.device)
    for tm in tc.tile(m):
        v = x[tm, :]
        out[tm, :, :] = torch.stack([v, v, v], dim=1)
    return out


def test_stack_of_three_tiles_matches_torch() -> None:
    """Was an error (2, 4, 8... tiles only): selects of broadcasts now (frontend/concat.py)."""
    x = _rand(4, 8)
    torch.testing.assert_close(stack_three(x), torch.stack([x, x, x], 1))


@tc.kernel(static_shapes=True)
def unpack_nibbles(p: torch.Tensor) -> torch.Tensor:
    """A [T, 32, 2] stack merged by ``reshape(-1, 64)``: -1 is the tile dim."""
    nb, half = p.size()
    out = torch.empty([nb, 2 * half], dtype=torch.int32, device=p.device)
    for tb in tc.tile(nb):
        byte = p[tb, :].to(torch.int32)
        out[tb, :] = torch.stack([byte >> 4, byte & 15], dim=-1).reshape(-1, 2 * half)
    return out


@pytest.mark.parametrize("blocks", [[1], [4]])
def test_minus_one_stands_for_the_unnamed_tile_dim(blocks: list[int]) -> None:
    p = torch.randint(0, 256, (5, 32), dtype=torch.uint8)
    want = torch.stack([(p >> 4).int(), (p & 15).int()], -1).reshape(5, 64)
    bound = unpack_nibbles.bind((p,))
    torch.testing.assert_close(
        bound.run(bound.compile_config(tc.Config(block_sizes=blocks)), p), want
    )
    torch.testing.assert_close(unpack_nibbles.run_ref(p), want)


@tc.kernel(static_shapes=True)
def reshape_by_block_size(p: torch.Tensor) -> torch.Tensor:
    nb, half = p.size()
    out = torch.empty([nb, 2 * half], dtype=torch.int32, device=p.device)
    for tb in tc.tile(nb):
        byte = p[tb, :].to(torch.int32)
        out[tb, :] = torch.stack([byte >> 4, byte & 15], dim=-1).reshape(tb.block_size, 2 * half)
    return out


def test_reshape_to_a_device_value_says_what_to_write() -> None:
    with pytest.raises(ShapeError, match="size 0 is a device value") as info:
        reshape_by_block_size(torch.randint(0, 256, (5, 32), dtype=torch.uint8))
    assert "reshape(tb, 64)" in str(info.value) and "test_views.py" in str(info.value)
    assert "TileValue" not in str(info.value)
