"""Discovery and tuning run a kernel several times (the default, candidates, the baseline in
ref mode): each run gets clones of every argument tensor, also of tensors inside lists, tuples
and dicts, so the caller's tensors are written once, by the call itself. An optimizer-style
kernel over a parameter list had its step applied three times by its first call."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import pytest
import torch

import tilecraft as tc
from tilecraft.autotune.baseline import clone_args
from tilecraft.errors import ArgumentError


@tc.kernel(static_shapes=True)
def scale_all_(grads: list[torch.Tensor], inv_scale: float) -> None:
    for g in grads:
        for tn in tc.tile(g.numel()):
            g[tn] = g[tn] * inv_scale


@tc.kernel(static_shapes=True)
def momentum_(state: dict[str, torch.Tensor], grad: torch.Tensor, beta: float) -> None:
    buf = state["buf"]
    for tn in tc.tile(grad.numel()):
        buf[tn] = buf[tn] * beta + grad[tn]


@pytest.fixture
def fresh_discovery(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No cached config: the first call discovers one (the runs that wrote the list)."""
    monkeypatch.setenv("TILECRAFT_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TILECRAFT_FORCE_AUTOTUNE", "1")
    monkeypatch.delenv("TILECRAFT_NO_AUTOTUNE", raising=False)


@pytest.mark.usefixtures("fresh_discovery")
def test_a_list_argument_is_written_once_by_the_first_call(device: str) -> None:
    grads = [torch.randn(24, device=device), torch.randn(24, device=device)]
    want = [g * 0.5 for g in grads]
    scale_all_(grads, 0.5)
    for got, w in zip(grads, want, strict=True):
        torch.testing.assert_close(got, w, rtol=0, atol=0)


@pytest.mark.usefixtures("fresh_discovery")
def test_a_dict_argument_is_written_once_by_the_first_call(device: str) -> None:
    state, grad = {"buf": torch.randn(40, device=device)}, torch.randn(40, device=device)
    want = state["buf"] * 0.9 + grad
    momentum_(state, grad, 0.9)
    torch.testing.assert_close(state["buf"], want)


class Pair(NamedTuple):
    a: torch.Tensor
    b: int


def test_clone_args_copies_tensors_inside_containers() -> None:
    t = torch.randn(3, 4).t()  # a strided layout the kernel was specialized to
    args, kwargs = clone_args(([t], (t, 2), Pair(t, 3)), {"d": {"x": t}})
    copies = [args[0][0], args[1][0], args[2].a, kwargs["d"]["x"]]
    assert isinstance(args[1], tuple) and args[1][1] == 2 and isinstance(args[2], Pair)
    for c in copies:
        assert c.data_ptr() != t.data_ptr() and c.stride() == t.stride()
        assert torch.equal(c, t)


@tc.kernel(static_shapes=True, config=tc.Config(block_sizes=[16]))
def axpy_(x: torch.Tensor, y: torch.Tensor, a: float) -> None:
    (n,) = x.size()
    for tn in tc.tile(n):
        y[tn] = y[tn] + a * x[tn]


def test_a_written_argument_that_partly_overlaps_another_is_refused(device: str) -> None:
    """y = buf[1:] written while x = buf[:-1] is read: the result depended on the block (3 to
    62 elements off); torch refuses such in-place ops. The same tensor twice, disjoint halves
    of one buffer and interleaved strided views run."""
    buf = torch.randn(101, device=device)
    with pytest.raises(ArgumentError, match="'y' is written and partly overlaps argument 'x'"):
        axpy_(buf[:-1], buf[1:], 2.0)
    z = torch.randn(50, device=device)
    want = z * 3.0
    axpy_(z, z, 2.0)
    torch.testing.assert_close(z, want)
    halves = torch.randn(100, device=device)
    want = halves[50:] + 2.0 * halves[:50]
    axpy_(halves[:50], halves[50:], 2.0)
    torch.testing.assert_close(halves[50:], want)
    pairs = torch.randn(100, device=device)
    want = pairs[1::2] + 2.0 * pairs[0::2]
    axpy_(pairs[0::2], pairs[1::2], 2.0)
    torch.testing.assert_close(pairs[1::2], want)


@tc.kernel(static_shapes=True, config=tc.Config(block_sizes=[16, 16]))
def add_matrix_(x: torch.Tensor, y: torch.Tensor) -> None:
    m, n = x.size()
    for tm, tn in tc.tile([m, n]):
        y[tm, tn] = y[tm, tn] + x[tm, tn]


def test_a_written_argument_beside_its_transpose_is_refused(device: str) -> None:
    """``y += x.t()`` with ``x`` being ``y``: one start, one shape, other strides (1024 of 4096
    elements wrong: programs read blocks others had written); torch's x.add_(x.t()) refuses
    it. A transposed copy of another buffer runs."""
    y = torch.randn(64, 64, device=device)
    with pytest.raises(ArgumentError, match="'y' is written and partly overlaps argument 'x'"):
        add_matrix_(y.t(), y)
    other = torch.randn(64, 64, device=device)
    want = y + other.t()
    add_matrix_(other.t(), y)
    torch.testing.assert_close(y, want)


@tc.kernel(static_shapes=True, config=tc.Config(block_sizes=[16]))
def shift_right_(x: torch.Tensor) -> None:
    dst = x[1:]
    src = x[:-1]
    for t in tc.tile(dst.size(0)):
        dst[t] = src[t]


@tc.kernel(static_shapes=True, config=tc.Config(block_sizes=[16]))
def double_halves_(x: torch.Tensor) -> None:
    n = x.size(0) // 2
    dst, src = x[n:], x[:n]
    for t in tc.tile(n):
        dst[t] = src[t] * 2.0


def test_host_views_of_one_argument_written_and_read_are_compared(device: str) -> None:
    """``dst = x[1:]`` written while ``src = x[:-1]`` is read, views the host code made: only
    arguments were compared (3 of 4096 elements off); eager ``x[1:] = x[:-1]`` raises.
    Disjoint halves of one argument run."""
    with pytest.raises(ArgumentError, match="'dst' is written and partly overlaps 'src'"):
        shift_right_(torch.randn(4096, device=device))
    x = torch.randn(64, device=device)
    want = x[:32] * 2.0
    double_halves_(x)
    torch.testing.assert_close(x[32:], want)


@tc.kernel(static_shapes=True, config=tc.Config(block_sizes=[16]))
def double_flat_(x: torch.Tensor) -> None:
    flat = x.view(-1)
    for t in tc.tile(flat.numel()):
        flat[t] = flat[t] * 2.0


@tc.kernel(static_shapes=True, config=tc.Config(block_sizes=[16]))
def double_transposed_(x: torch.Tensor) -> None:
    xt = x.t()
    m, n = xt.size()
    for tm in tc.tile(m):
        xt[tm, :] = xt[tm, :] * 2.0


def test_writes_through_host_views_and_list_items_bump_versions(device: str) -> None:
    """A write through ``x.view(-1)`` or into a list argument's tensors left ``_version``
    alone: a backward that saved the tensor used the new values silently (eager and a write
    by the parameter's name raise)."""
    for write in (double_flat_, lambda b: scale_all_([b.view(-1)], 2.0)):
        a = torch.randn(8, 4, device=device, requires_grad=True)
        b = torch.randn(8, 4, device=device)
        y = (a * b).sum()
        version = b._version
        write(b)
        assert b._version > version
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.backward()


def test_an_expanded_tensor_written_through_a_view_or_a_list_is_refused(device: str) -> None:
    """Written by name it was refused; through ``x.t()`` or as a list's item it was not (every
    program wrote one element's memory)."""
    expanded = torch.randn(4, 1, device=device).expand(4, 8)
    with pytest.raises(ArgumentError, match="it is an expanded view"):
        double_transposed_(expanded)
    with pytest.raises(ArgumentError, match="it is an expanded view"):
        scale_all_([torch.randn(1, device=device).expand(8)], 2.0)


@tc.kernel(static_shapes=True, config=tc.Config(block_sizes=[16]))
def permute_into(dst: torch.Tensor, src: torch.Tensor, perm: torch.Tensor) -> None:
    for t in tc.tile(dst.size(0)):
        dst[t] = src[perm[t]]


@tc.kernel(static_shapes=True, config=tc.Config(block_sizes=[16, 16]))
def transpose_into(dst: torch.Tensor, src: torch.Tensor) -> None:
    m, n = dst.size()
    for tm, tn in tc.tile([m, n]):
        dst[tm, tn] = src[tn, tm].t()


def test_one_tensor_written_and_read_at_other_positions_is_refused(device: str) -> None:
    """``permute_into(x, x, perm)`` (2048 of 4096 elements wrong) and an in-place transpose
    (1024 of 4096): the same view twice is safe only where each program reads what it writes
    (``axpy_(z, z)`` runs, in the test above). Distinct tensors run."""
    x = torch.randn(4096, device=device)
    perm = torch.arange(4095, -1, -1, device=device)
    with pytest.raises(ArgumentError, match="'dst' is written and shares memory with 'src'"):
        permute_into(x, x, perm)
    a = torch.randn(64, 64, device=device)
    with pytest.raises(ArgumentError, match="reads at other positions than it writes 'dst'"):
        transpose_into(a, a)
    out = torch.empty_like(x)
    permute_into(out, x, perm)
    torch.testing.assert_close(out, x.flip(0))
    b = torch.empty_like(a)
    transpose_into(b, a)
    torch.testing.assert_close(b, a.t())


@tc.kernel(static_shapes=True)
def scale_and_pick(x: torch.Tensor, y: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    m, _ = x.size()
    out = torch.empty([m, idx.size(1)], dtype=x.dtype, device=x.device)
    for tm in tc.tile(m):
        xt = x[tm, :]
        y[tm, :] = xt * 3.0
        out[tm, :] = torch.gather(xt, 1, idx[tm, :])  # re-read from memory, after the store
    return out


def test_an_argument_refusal_at_launch_is_raised_as_itself_while_discovering(
    device: str, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Refused at each candidate's launch, the call's ArgumentError came out as "cannot be
    compiled for this target: all 5 candidate configs raised the same error" after two
    "unknown error" lines with repro scripts (fuzz 53b)."""
    monkeypatch.setenv("TILECRAFT_FORCE_AUTOTUNE", "1")  # discovery, not a cached config
    g = torch.Generator().manual_seed(0)
    x = torch.randn(9, 40, generator=g).to(device)
    idx = torch.randint(0, 40, (9, 6), generator=g).to(device)
    with pytest.raises(ArgumentError, match="'y' is written and shares memory with 'x'"):
        scale_and_pick(x, x, idx)
    assert "unknown error" not in capfd.readouterr().err
    y = torch.empty_like(x)
    out = scale_and_pick(x, y, idx)
    assert torch.equal(out, torch.gather(x, 1, idx)) and torch.equal(y, x * 3.0)
