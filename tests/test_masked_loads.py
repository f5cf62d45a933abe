"""A load whose value only a ``where``'s kept branch uses reads only the kept elements
(ir/masked_loads.py): masked where the condition keeps or drops whole rows, left alone where it
varies along the unit stride, where the value has another use or where moving the load would
cross a store; numerics unchanged in the interpreter."""

from __future__ import annotations

import pytest
import torch

import tilecraft as tc
from tilecraft.ir.nodes import Node, Op


@tc.kernel(static_shapes=True)
def padded_mean(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """x [B, S, D]: the mean of each sequence's first lengths[b] rows (the load comes first)."""
    bsz, s, d = x.size()
    out = torch.empty([bsz, d], dtype=torch.float32, device=x.device)
    for tb, td in tc.tile([bsz, d]):
        n = lengths[tb]
        acc = tc.zeros([tb, td], dtype=torch.float32)
        for ts in tc.tile(s):
            xt = x[tb, ts, td].to(torch.float32) * 2.0
            valid = ts.index[None, :] < n[:, None]
            acc = acc + torch.sum(torch.where(valid[:, :, None], xt, 0.0), dim=1)
        out[tb, td] = acc / (2.0 * n[:, None].to(torch.float32))
    return out


@tc.kernel(static_shapes=True)
def touched_rows(x: torch.Tensor, on: torch.Tensor) -> torch.Tensor:
    """Rows where ``on`` is set, zeros elsewhere; the condition has lower rank than the load."""
    m, n = x.size()
    out = torch.empty_like(x)
    for tm, tn in tc.tile([m, n]):
        keep = (on[tm] != 0)[:, None]
        out[tm, tn] = torch.where(keep, x[tm, tn] + 1.0, 0.0)
    return out


@tc.kernel(static_shapes=True)
def lower_triangle(x: torch.Tensor) -> torch.Tensor:
    """A condition that varies along the columns (the unit stride): not a mask of the load."""
    m, n = x.size()
    out = torch.empty_like(x)
    for tm, tn in tc.tile([m, n]):
        out[tm, tn] = torch.where(tm.index[:, None] >= tn.index[None, :], x[tm, tn], 0.0)
    return out


@tc.kernel(static_shapes=True)
def kept_and_used(x: torch.Tensor, on: torch.Tensor) -> torch.Tensor:
    """The loaded value also feeds the dropped branch: every element is needed."""
    m, n = x.size()
    out = torch.empty_like(x)
    for tm, tn in tc.tile([m, n]):
        xt = x[tm, tn]
        out[tm, tn] = torch.where(on[tm][:, None] != 0, xt * 2.0, xt)
    return out


@tc.kernel(static_shapes=True)
def store_between(x: torch.Tensor, on: torch.Tensor) -> torch.Tensor:
    """x is loaded, then written, then the condition computed: the load cannot move past the
    store, so it stays unmasked (and reads the value before the store)."""
    m, n = x.size()
    out = torch.empty_like(x)
    for tm, tn in tc.tile([m, n]):
        xt = x[tm, tn] * 3.0
        x[tm, tn] = xt
        keep = on[tm][:, None] != 0
        out[tm, tn] = torch.where(keep, xt, 0.0)
    return out


def _loads(kernel: tc.Kernel, *args: torch.Tensor) -> dict[str, Node]:
    loops = kernel.bind(args).traced.loops
    return {n.attrs["tensor"].name: n for loop in loops for n in loop.walk() if n.op is Op.LOAD}


def _pool_inputs(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(4, 24, 40, generator=g)
    lengths = torch.tensor([24, 1, 9, 17])
    for b, n in enumerate(lengths.tolist()):
        x[b, n:] = float("nan")  # padding that must never reach the result
    return x, lengths


def test_padded_rows_are_masked_out_of_the_load() -> None:
    x, lengths = _pool_inputs()
    load = _loads(padded_mean, x, lengths)["x"]
    assert "extra_mask" in load.attrs
    mask = load.inputs[load.attrs["extra_mask"]]
    assert mask.dtype == torch.bool and mask.shape[-1] == 1  # whole rows kept or dropped
    code = padded_mean.bind((x, lengths)).to_triton_code(tc.Config(block_sizes=[2, 16, 8]))
    load_line = next(line for line in code.splitlines() if "tl.load(x +" in line)
    where_line = next(line for line in code.splitlines() if "tl.where(" in line)
    cond = where_line.split("tl.where(")[1].split(",")[0]
    assert load_line.endswith(f"& {cond}, other=0)")  # the where's condition masks the load


@pytest.mark.parametrize(
    "config",
    [
        None,
        tc.Config(block_sizes=[2, 16, 8]),
        tc.Config(block_sizes=[1, 8, 8], split_reductions=[2], deferred_sums=True),
    ],
)
def test_padded_mean_matches_eager_with_nan_padding(config: tc.Config | None) -> None:
    x, lengths = _pool_inputs()
    want = torch.stack([x[b, :n].float().mean(0) for b, n in enumerate(lengths.tolist())])
    kernel = (
        padded_mean
        if config is None
        else tc.kernel(static_shapes=True, config=config)(padded_mean.fn)
    )
    got = kernel(x, lengths)
    assert not got.isnan().any()
    torch.testing.assert_close(got, want)


def test_lower_rank_condition_is_raised_to_the_load() -> None:
    x = torch.randn(24, 40)
    on = (torch.arange(24) % 3 == 0).to(torch.int8)
    load = _loads(touched_rows, x, on)["x"]
    mask = load.inputs[load.attrs["extra_mask"]]
    assert mask.ndim == 2 and mask.shape[1] == 1
    torch.testing.assert_close(touched_rows(x, on), torch.where(on[:, None] != 0, x + 1.0, 0.0))


def test_condition_along_the_unit_stride_leaves_the_load_alone() -> None:
    x = torch.randn(24, 40)
    assert "extra_mask" not in _loads(lower_triangle, x)["x"].attrs
    torch.testing.assert_close(lower_triangle(x), torch.tril(x))


def test_value_used_outside_the_kept_branch_is_loaded_whole() -> None:
    x, on = torch.randn(24, 40), (torch.arange(24) % 2).to(torch.int8)
    assert "extra_mask" not in _loads(kept_and_used, x, on)["x"].attrs
    torch.testing.assert_close(kept_and_used(x, on), torch.where(on[:, None] != 0, x * 2, x))


def test_load_does_not_move_past_a_store() -> None:
    x, on = torch.randn(24, 40), (torch.arange(24) % 2).to(torch.int8)
    assert "extra_mask" not in _loads(store_between, x.clone(), on)["x"].attrs
    got_x = x.clone()
    got = store_between(got_x, on)
    torch.testing.assert_close(got, torch.where(on[:, None] != 0, x * 3.0, 0.0))
    torch.testing.assert_close(got_x, x * 3.0)


@tc.kernel(static_shapes=True)
def row_masked_matmul(a: torch.Tensor, b: torch.Tensor, on: torch.Tensor) -> torch.Tensor:
    """A dot operand masked by rows: its load stays a plain (descriptor-eligible) one."""
    m, k = a.size()
    n = b.size(1)
    out = torch.empty([m, n], dtype=torch.float32, device=a.device)
    for tm, tn in tc.tile([m, n]):
        acc = tc.zeros([tm, tn], dtype=torch.float32)
        for tk in tc.tile(k):
            at = torch.where((on[tm] != 0)[:, None], a[tm, tk], 0.0)
            acc = tc.dot(at, b[tk, tn], acc=acc)
        out[tm, tn] = acc
    return out


def test_a_dot_operand_keeps_its_plain_load() -> None:
    a, b = torch.randn(32, 48), torch.randn(48, 16)
    on = (torch.arange(32) % 2).to(torch.int8)
    assert "extra_mask" not in _loads(row_masked_matmul, a, b, on)["a"].attrs
    want = torch.where(on[:, None] != 0, a, 0.0) @ b
    torch.testing.assert_close(row_masked_matmul(a, b, on), want, rtol=1e-4, atol=1e-4)


@tc.kernel(static_shapes=True)
def zero_padding(x: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
    """Zeros where a row is padding, else twice the row: the load is the second branch."""
    m, n = x.size()
    out = torch.empty_like(x)
    for tm, tn in tc.tile([m, n]):
        out[tm, tn] = torch.where(pad[tm][:, None] != 0, 0.0, x[tm, tn] * 2.0)
    return out


def test_second_branch_load_takes_the_negated_condition() -> None:
    x = torch.randn(24, 40)
    pad = (torch.arange(24) % 3 == 1).to(torch.int8)
    x[pad != 0] = float("nan")  # padding rows: never read
    load = _loads(zero_padding, x, pad)["x"]
    mask = load.inputs[load.attrs["extra_mask"]]
    assert mask.op is Op.UNARY and mask.attrs["fn"] == "logical_not"
    got = zero_padding(x, pad)
    assert not got.isnan().any()
    torch.testing.assert_close(got, torch.where(pad[:, None] != 0, 0.0, x * 2.0))


@pytest.mark.crosscompile
def test_masked_loads_compile_for_gpus() -> None:
    from tilecraft.targets.target import Target
    from tilecraft.tools.check import check_kernel

    targets = [Target.parse("cuda:90"), Target.parse("hip:gfx942")]
    x = torch.empty(4096, 1024, dtype=torch.bfloat16, device="meta")
    pad = torch.empty(4096, dtype=torch.int8, device="meta")
    pooled = torch.empty(8, 512, 256, dtype=torch.bfloat16, device="meta")
    lengths = torch.empty(8, dtype=torch.int64, device="meta")
    for kernel, args in ((zero_padding, (x, pad)), (padded_mean, (pooled, lengths))):
        rows = check_kernel(kernel, args, targets, lambda b: [b.config_spec.default()])
        for row in rows:
            assert row.report is not None and row.report.ok, (
                kernel.__name__,
                row.target,
                row.status,
            )


@pytest.mark.parametrize("seed", range(6))
def test_random_configs_of_masked_loads_match_eager(seed: int) -> None:
    """Masked loads under the space's other strategies (persistent programs, splits, deferred
    sums, loop stages, indexing falling back to pointers): the same numbers as eager."""
    import random

    x, lengths = _pool_inputs(seed)
    want = torch.stack([x[b, :n].float().mean(0) for b, n in enumerate(lengths.tolist())])
    xs, pad = torch.randn(24, 40), (torch.arange(24) % 3 == 1).to(torch.int8)
    for kernel, args, expected in (
        (padded_mean, (x, lengths), want),
        (zero_padding, (xs, pad), torch.where(pad[:, None] != 0, 0.0, xs * 2.0)),
    ):
        bound = kernel.bind(args)
        config = bound.config_spec.random(random.Random(seed))
        got = bound.run(bound.compile_config(config), *args)
        assert not got.isnan().any(), config
        torch.testing.assert_close(got, expected, msg=lambda m, c=config: f"{c}: {m}")
