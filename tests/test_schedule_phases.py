"""Where values are emitted around rolled reduction loops (codegen/schedule.py): values off the
rolled dim before the first chunk loop that uses them, not before the first loop of all (live
across a loop that does not read them, they held registers through it); loads on the rolled
dim of a tensor the loop stores into in program order (emitted where first used, a load placed
before a store read the stored values)."""

from __future__ import annotations

import re

import torch

import tilecraft as tc


@tc.kernel(static_shapes=True)
def scaled_diff(x: torch.Tensor) -> torch.Tensor:
    """A row's differences (another whole dim: t - 1) over the row's sum (a rolled loop)."""
    b, t = x.size()
    out = torch.empty([b, t - 1], dtype=x.dtype, device=x.device)
    for tb in tc.tile(b):
        row = x[tb, :]
        total = row.sum(-1)
        out[tb, :] = (row[:, 1:] - row[:, :-1]) / total[:, None]
    return out


@tc.kernel(static_shapes=True)
def centered_then_added(x: torch.Tensor, out: torch.Tensor) -> None:
    """A load of the tensor the block writes keeps its place before the store, though only
    the second store uses it (out's row is the rolled dim: the config's first loop)."""
    b, t = x.size()
    for tb in tc.tile(b):
        before = out[tb, :]
        total = x[tb, :].sum(-1)
        out[tb, :] = x[tb, 1:] - total[:, None]
        out[tb, :] = out[tb, :] + before
    return None


CONFIG = tc.Config(block_sizes=[1], reduction_loops=[512, None])


def test_values_used_after_a_chunk_loop_are_emitted_after_it(device: str) -> None:
    # rows summing far from 0: a randn row's sum near 0 made the quotient ill-conditioned, and
    # the chunked sum's order alone exceeded the tolerance (a CI run, session 48)
    x = torch.randn(4, 3000, generator=torch.Generator().manual_seed(7)) + 0.5
    code = scaled_diff.bind((x,)).to_triton_code(CONFIG)
    loop = code.index("for roffset_1 in tl.range(")
    shifted = [m.start() for m in re.finditer(r"\bload(_1)? = ", code)]
    assert len(shifted) == 2 and all(at > loop for at in shifted), code
    x = x.to(device)
    kernel = tc.kernel(scaled_diff.fn, static_shapes=True, config=CONFIG)
    torch.testing.assert_close(kernel(x), x.diff(dim=1) / x.sum(-1, keepdim=True))


def test_a_load_of_a_written_tensor_keeps_its_order(device: str) -> None:
    g = torch.Generator().manual_seed(3)
    x, out = torch.randn(3, 700, generator=g).to(device), torch.randn(3, 699, generator=g)
    out = out.to(device)
    want = x[:, 1:] - x.sum(-1, keepdim=True) + out
    kernel = tc.kernel(centered_then_added.fn, static_shapes=True, config=CONFIG)
    kernel(x, out)
    torch.testing.assert_close(out, want, rtol=1e-5, atol=1e-4)


@tc.kernel(static_shapes=True)
def row_max_and_where(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """amax, argmax and amin of a half-precision row, each of its own ``.float()``."""
    b, _ = x.size()
    top = torch.empty([b], dtype=torch.float32, device=x.device)
    at = torch.empty([b], dtype=torch.int64, device=x.device)
    low = torch.empty([b], dtype=torch.float32, device=x.device)
    for tb in tc.tile(b):
        row = x[tb, :]
        top[tb] = row.float().amax(dim=1)
        at[tb] = row.float().argmax(dim=1)
        low[tb] = row.float().amin(dim=1)
    return top, at, low


def test_a_rolled_max_shares_its_argmax_lanes(device: str) -> None:
    """A rolled max beside its argmax of the same values (each of its own ``.float()``: a
    cast counts as its source) takes the argmax's lanes' best: two chunk-wide accumulators
    (argmax, amin) and the argmax's indices, not three."""
    x = torch.randn(5, 3000, dtype=torch.float16)
    x[1, 2500:] = x[1].max()  # ties in a later chunk: the first index
    x[2, 700] = float("nan")  # NaN wins, its first index
    x[3, :] = float("-inf")
    config = tc.Config(block_sizes=[1], reduction_loops=[512], num_warps=4)
    code = row_max_and_where.bind((x,)).to_triton_code(config)
    assert len(re.findall(r"_acc\w* = tl\.full\(", code)) == 2, code
    x = x.to(device)
    kernel = tc.kernel(row_max_and_where.fn, static_shapes=True, config=config)
    top, at, low = kernel(x)
    torch.testing.assert_close(top, x.float().amax(1), equal_nan=True)
    assert torch.equal(at, x.float().argmax(1))
    torch.testing.assert_close(low, x.float().amin(1), equal_nan=True)
