"""Loops split at a diagonal (``diagonal_splits=True``, codegen/diagonal.py): a tile loop whose
select compares its indices with an enclosing tile's runs as two loops, the part wholly off the
diagonal without the select; left whole where the comparison is not decided by the order alone,
where the select only feeds a dot operand, or where the enclosing tile's masked lanes would break
the order; numerics unchanged in the interpreter at odd sizes and random configs. Off unless
asked for; offered (and tried by the search) only where such a select exists."""

from __future__ import annotations

import functools
import math
import random
import re

import pytest
import torch

import tilecraft as tc
from benchmarks.gen_kernels.heldout_dots import trmm_lower
from tilecraft.runtime.kernel import BoundKernel
from tilecraft.targets.target import Target

H200 = Target.parse("cuda:90")


@tc.kernel(static_shapes=True)
def tril_row_sums(a: torch.Tensor) -> torch.Tensor:
    """Row sums of the lower triangle: a key loop up to the query tile's end (split below)."""
    m, n = a.size()
    out = torch.empty([m], dtype=torch.float32, device=a.device)
    for tm in tc.tile(m):
        acc = tc.zeros([tm], dtype=torch.float32)
        for tn in tc.tile(tm.end):
            kept = torch.where(tm.index[:, None] >= tn.index[None, :], a[tm, tn], 0.0)
            acc = acc + torch.sum(kept * 2.0, dim=1)
        out[tm] = acc
    return out


@tc.kernel(static_shapes=True)
def tril_col_sums(a: torch.Tensor) -> torch.Tensor:
    """Column sums of the lower triangle: a row loop from the column tile's begin (split past)."""
    m, n = a.size()
    out = torch.empty([n], dtype=torch.float32, device=a.device)
    for tn in tc.tile(n):
        acc = tc.zeros([tn], dtype=torch.float32)
        for tm in tc.tile(tn.begin, m):
            kept = torch.where(tm.index[:, None] >= tn.index[None, :], a[tm, tn], 0.0)
            acc = acc + torch.sum(kept * 2.0, dim=0)
        out[tn] = acc
    return out


@tc.kernel(static_shapes=True)
def alibi_row_max(a: torch.Tensor) -> torch.Tensor:
    """A relative position (a difference of indices, cast to float) against 0, as ALiBi writes
    its causal mask."""
    m, n = a.size()
    out = torch.empty([m], dtype=torch.float32, device=a.device)
    for tm in tc.tile(m):
        best = tc.full([tm], float("-inf"), dtype=torch.float32)
        for tn in tc.tile(tm.end):
            rel = (tn.index[None, :] - tm.index[:, None]).to(torch.float32)
            s = torch.where(rel <= 0.0, a[tm, tn] + 0.5 * rel, float("-inf"))
            best = torch.maximum(best, torch.amax(s, dim=1))
        out[tm] = best
    return out


@tc.kernel(static_shapes=True)
def windowed_row_sums(a: torch.Tensor) -> torch.Tensor:
    """A sliding window ``q - k < 4``: below the diagonal the order alone does not decide it."""
    m, n = a.size()
    out = torch.empty([m], dtype=torch.float32, device=a.device)
    for tm in tc.tile(m):
        acc = tc.zeros([tm], dtype=torch.float32)
        for tn in tc.tile(tm.end):
            near = (tm.index[:, None] - tn.index[None, :]) < 4
            kept = torch.where(near & (tm.index[:, None] >= tn.index[None, :]), a[tm, tn], 0.0)
            acc = acc + torch.sum(kept, dim=1)
        out[tm] = acc
    return out


def _reference(name: str, a: torch.Tensor) -> torch.Tensor:
    lower = torch.tril(torch.ones(a.shape, dtype=torch.bool))
    if name == "tril_row_sums":
        return (torch.where(lower, a, 0.0) * 2.0).sum(1)
    if name == "tril_col_sums":
        return (torch.where(lower, a, 0.0) * 2.0).sum(0)
    if name == "alibi_row_max":
        i = torch.arange(a.shape[0])[:, None]
        rel = (torch.arange(a.shape[1])[None, :] - i).float()
        return torch.where(rel <= 0.0, a + 0.5 * rel, -math.inf).amax(1)
    i, j = torch.arange(a.shape[0])[:, None], torch.arange(a.shape[1])[None, :]
    return torch.where((i - j < 4) & (i >= j), a, 0.0).sum(1)


KERNELS = {k.__name__: k for k in (tril_row_sums, tril_col_sums, alibi_row_max, windowed_row_sums)}


def _code(kernel: tc.Kernel, *args: torch.Tensor, config: tc.Config | None = None) -> str:
    """The generated device code at ``config`` (default: the default), split at diagonals."""
    bound = BoundKernel(kernel, kernel.bind_arguments(args, {}), target=H200)
    config = config or bound.config_spec.default()
    _, _, _, kernels = bound.generate(_on(bound, config))
    return kernels[0].device_source


def _on(bound: BoundKernel, config: tc.Config) -> tc.Config:
    """``config`` split at diagonals where the kernel offers it (a warning otherwise)."""
    return config.replace(diagonal_splits=True) if bound.config_spec.diagonal_selects else config


def _loops(code: str) -> list[str]:
    """The text of each ``for`` loop's body (up to the next loop or the end)."""
    parts = re.split(r"\n\s*for offset_\w+ in tl\.range", code)
    return parts[1:]


def _selects(loop: str) -> bool:
    """Whether the loop body selects ``kept`` from the comparison (not a bounds mask)."""
    return re.search(r"kept\w* = tl\.where", loop) is not None


def _meta(*shape: int) -> torch.Tensor:
    return torch.empty(*shape, dtype=torch.float32, device="meta")


def test_a_causal_key_loop_splits_below_the_query_tile() -> None:
    code = _code(tril_row_sums, _meta(4096, 4096))
    first, second = _loops(code)
    assert re.search(r"for offset_\w+ in tl\.range\(0, diagonal_\w+,", code)
    assert re.search(r"diagonal_\w+ = tl\.minimum\(offset_\w+ // _BLOCK_\w+ \* _BLOCK_", code)
    assert not _selects(first) and _selects(second)


def test_a_loop_from_the_tile_begin_splits_past_the_tile() -> None:
    unsplit = tc.Config(block_sizes=[64, 64], num_warps=4)  # (a split reduction stays whole)
    code = _code(tril_col_sums, _meta(4096, 4096), config=unsplit)
    first, second = _loops(code)
    assert re.search(r"for offset_\w+ in tl\.range\(offset_\w+, diagonal_\w+,", code)
    assert _selects(first) and not _selects(second)
    # [tn.begin, m) with m a multiple of both blocks: whole blocks, no mask
    assert "mask_" not in code
    # the column tile's last block is cut (masked lanes past m): the order is unknown there
    assert len(_loops(_code(tril_col_sums, _meta(4096, 4000), config=unsplit))) == 1


def test_a_relative_position_against_zero_splits() -> None:
    first, second = _loops(_code(alibi_row_max, _meta(2048, 2048)))
    assert not re.search(r"\bs\w* = tl\.where", first) and re.search(r"\bs\w* = tl\.where", second)


def test_loops_the_order_does_not_decide_stay_whole() -> None:
    # (near & causal: not one comparison of two tiles, so the knob is not even offered)
    assert len(_loops(_code(windowed_row_sums, _meta(4096, 4096)))) == 1
    bf16 = torch.empty(4096, 4096, dtype=torch.bfloat16, device="meta")
    code = _code(trmm_lower, bf16, bf16)  # tril(a) @ b: the select only feeds a dot operand
    assert len(_loops(code)) == 1 and "tl.where" in code


def test_the_knob_is_off_unless_asked_offered_where_a_select_orders_tiles() -> None:
    from tilecraft.config import flags

    spec = BoundKernel(
        tril_row_sums, tril_row_sums.bind_arguments((_meta(4096, 4096),), {}), target=H200
    ).config_spec
    default = spec.default()
    assert spec.normalize(default).diagonal_splits is False
    assert "diagonal_" not in _plain_code(tril_row_sums, _meta(4096, 4096))
    assert any(c.diagonal_splits is True for c in flags.flipped(spec, default))
    bf16 = torch.empty(64, 64, dtype=torch.bfloat16, device="meta")
    plain = BoundKernel(
        trmm_lower, trmm_lower.bind_arguments((bf16, bf16), {}), target=H200
    ).config_spec
    assert plain.diagonal_selects  # trmm's select orders tiles (codegen leaves it whole)
    rows = torch.empty(64, 64, device="meta")
    none = BoundKernel(
        KERNELS_WITHOUT["pointwise"],
        KERNELS_WITHOUT["pointwise"].bind_arguments((rows,), {}),
        target=H200,
    ).config_spec
    assert not none.diagonal_selects
    with pytest.warns(UserWarning, match="diagonal_splits=True: no select compares"):
        fixed = none.normalize(none.default().replace(diagonal_splits=True))
    assert fixed.diagonal_splits is None


@tc.kernel(static_shapes=True)
def scaled(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm, tn in tc.tile(x.size()):
        out[tm, tn] = x[tm, tn] * 2.0
    return out


KERNELS_WITHOUT = {"pointwise": scaled}


def _plain_code(kernel: tc.Kernel, *args: torch.Tensor) -> str:
    bound = BoundKernel(kernel, kernel.bind_arguments(args, {}), target=H200)
    _, _, _, kernels = bound.generate(bound.config_spec.default())
    return kernels[0].device_source


@pytest.mark.parametrize("name", sorted(KERNELS))
@pytest.mark.parametrize("shape", [(70, 70), (64, 64), (48, 80)])
def test_split_loops_match_eager(name: str, shape: tuple[int, int]) -> None:
    a = torch.randn(*shape, generator=torch.Generator().manual_seed(sum(shape)))
    bound = KERNELS[name].bind((a,))
    config = _on(bound, bound.config_spec.default())
    got = bound.run(bound.compile_config(config), a)
    torch.testing.assert_close(got, _reference(name, a))


@pytest.mark.parametrize("seed", range(4))
def test_random_configs_of_split_loops_match_eager(seed: int) -> None:
    """Blocks of the two tiles that differ (the split is not the outer offset itself), loop
    stages, persistent programs: the same numbers as eager."""
    a = torch.randn(72, 72, generator=torch.Generator().manual_seed(seed))
    for name, kernel in KERNELS.items():
        bound = kernel.bind((a,))
        config = _on(bound, bound.config_spec.random(random.Random(seed)))
        got = bound.run(bound.compile_config(config), a)
        torch.testing.assert_close(got, _reference(name, a), msg=lambda m, c=config: f"{c}: {m}")


@pytest.mark.crosscompile
def test_split_loops_compile_for_gpus() -> None:
    from tilecraft.tools.check import check_kernel

    targets = [H200, Target.parse("hip:gfx942")]
    for kernel in (tril_row_sums, tril_col_sums, alibi_row_max):
        rows = check_kernel(
            kernel, (_meta(2048, 2048),), targets, lambda b: [b.config_spec.default()]
        )
        assert rows and all(r.report is not None and r.report.ok for r in rows), kernel.__name__


@pytest.mark.gpu
def test_split_loops_match_eager_on_gpu() -> None:
    """The split kernels at GPU sizes (default configs, TMA and stages on sm_90), and causal
    attention as users write it (one masked key loop) against SDPA."""
    from benchmarks.gen_kernels import HELDOUT

    a = torch.randn(2048, 2048, device="cuda")
    for name, kernel in KERNELS.items():
        bound = kernel.bind((a,))
        config = _on(bound, bound.config_spec.default())
        got = bound.run(bound.compile_config(config), a).cpu()
        # (2048-term fp32 sums in another order than the CPU's)
        torch.testing.assert_close(got, _reference(name, a.cpu()), atol=2e-3, rtol=1e-4)
    for case in (
        "attention_4d_causal",
        "alibi_causal_attention",
        "attn_bwd_dq_causal",
        "attn_bwd_dkdv_causal",
    ):
        spec = HELDOUT[case]
        inputs = spec.make_inputs(spec.cpu_shapes[0][:-2] + (512, 64), "cuda", 0)
        got, want = spec.run(_with_splits(spec.variants()), inputs), spec.reference(*inputs)
        for g, w in zip(_tensors(got), _tensors(want), strict=True):
            torch.testing.assert_close(g.float(), w.float(), atol=spec.atol, rtol=0, msg=case)


def _with_splits(kernels: dict[str, tc.Kernel]) -> dict[str, object]:
    """Each kernel run at its default config with ``diagonal_splits=True``."""

    def launch(kernel: tc.Kernel, *args: object) -> object:
        bound = kernel.bind(args)
        config = _on(bound, bound.config_spec.default())
        return bound.run(bound.compile_config(config), *args)

    return {name: functools.partial(launch, k) for name, k in kernels.items()}


def _tensors(value: object) -> list[torch.Tensor]:
    return list(value) if isinstance(value, tuple | list) else [value]  # type: ignore[list-item]
