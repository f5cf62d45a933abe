"""Messages for mistakes users make in device code: each says what the user did and what to
write instead, and points at the user's kernel line."""

from __future__ import annotations

import inspect

import pytest
import torch

import tilecraft as tc
from tilecraft.errors import TilecraftError

FILE = "test_error_messages_s19.py"


def _line_of(kernel: tc.Kernel, needle: str) -> int:
    lines, first = inspect.getsourcelines(kernel.fn)
    (idx,) = [i for i, ln in enumerate(lines) if needle in ln]
    return first + idx


def _error_text(kernel: tc.Kernel, needle: str, *args: torch.Tensor) -> str:
    with pytest.raises(TilecraftError) as info:
        kernel(*args)
    text = str(info.value)
    assert f"{FILE}:{_line_of(kernel, needle)}" in text, text
    assert needle in text
    return text


@tc.kernel
def uses_torch_index_select(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty([m], dtype=x.dtype, device=x.device)
    for tm in tc.tile(m):
        out[tm] = torch.index_select(x[tm, :], 1, idx[0:1])[:, 0]
    return out


@tc.kernel
def uses_method_index_select(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty([m], dtype=x.dtype, device=x.device)
    for tm in tc.tile(m):
        out[tm] = x[tm, :].index_select(1, idx[0:1])[:, 0]
    return out


@pytest.mark.parametrize(
    ("kern", "needle", "name"),
    [
        (uses_torch_index_select, "torch.index_select(x[tm, :]", "'torch.index_select'"),
        (uses_method_index_select, "x[tm, :].index_select(1", "'Tensor.index_select'"),
    ],
    ids=["torch", "method"],
)
def test_index_select_names_the_public_op_and_suggests_index_tiles(
    kern: tc.Kernel, needle: str, name: str, device: str
) -> None:
    x = torch.randn(8, 16, device=device)
    idx = torch.randint(0, 16, (8,), device=device)
    text = _error_text(kern, needle, x, idx)
    assert f"torch op {name} is not supported in device code" in text
    assert "_VariableFunctionsClass" not in text and "TensorBase" not in text
    assert "docs/ops.md" in text
    assert "[tn.index, idx]" in text


@tc.kernel
def uses_item(x: torch.Tensor) -> torch.Tensor:
    (n,) = x.size()
    out = torch.empty_like(x)
    for t in tc.tile(n):
        s = x[t].item()
        out[t] = x[t] * s
    return out


def test_item_says_a_loaded_element_is_already_a_scalar(device: str) -> None:
    text = _error_text(uses_item, "s = x[t].item()", torch.randn(16, device=device))
    assert "torch op 'Tensor.item' is not supported in device code" in text
    assert "already a scalar" in text
    assert "docs/ops.md" in text


@tc.kernel
def uses_torch_arange(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        lsm = x[tm, :]
        r = torch.arange(lsm.shape[0])
        out[tm, :] = lsm + r[:, None]
    return out


def test_torch_arange_on_a_symbolic_size_suggests_tc_arange(device: str) -> None:
    x = torch.randn(8, 16, device=device)
    text = _error_text(uses_torch_arange, "r = torch.arange(lsm.shape[0])", x)
    assert "torch.arange" in text
    assert "tc.arange(n)" in text and ".index" in text
    assert "must be Number, not Sym" not in text


@tc.kernel
def list_of_tiles(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty([4, n], dtype=x.dtype, device=x.device)
    for tch in tc.tile(n):
        accs = [tc.zeros([tch]) for _ in range(4)]
        for k in tc.static_range(4):
            accs[k] = accs[k] + x[k, tch]
        for k in tc.static_range(4):
            out[k, tch] = accs[k]
    return out


def test_assigning_into_a_list_of_tiles_suggests_a_stacked_tile(device: str) -> None:
    x = torch.randn(4, 32, device=device)
    text = _error_text(list_of_tiles, "accs[k] = accs[k] + x[k, tch]", x)
    assert "Python list" in text
    assert "torch.where(tc.arange(4)[:, None] == k" in text
    assert "tc.static_range" in text


@tc.kernel
def uses_break(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty([m], dtype=x.dtype, device=x.device)
    for tm in tc.tile(m):
        acc = tc.zeros([tm])
        for tn in tc.tile(n):
            acc = acc + torch.sum(x[tm, tn], dim=-1)
            break
        out[tm] = acc
    return out


@tc.kernel
def uses_continue(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty([m], dtype=x.dtype, device=x.device)
    for tm in tc.tile(m):
        acc = tc.zeros([tm])
        for tn in tc.tile(n):
            acc = acc + torch.sum(x[tm, tn], dim=-1)
            continue
        out[tm] = acc
    return out


@pytest.mark.parametrize(("kern", "word"), [(uses_break, "break"), (uses_continue, "continue")])
def test_break_and_continue_suggest_a_while_test_or_if(
    kern: tc.Kernel, word: str, device: str
) -> None:
    text = _error_text(kern, f"            {word}", torch.randn(8, 16, device=device))
    assert f"`{word}`" in text
    assert "while (i < n) & ~done:" in text
    assert "if" in text
    assert "constant `if`" not in text


@tc.kernel
def uses_index_add(x: torch.Tensor, seg: torch.Tensor) -> torch.Tensor:
    (n,) = x.size()
    out = torch.zeros([4], dtype=x.dtype, device=x.device)
    for tn in tc.tile(n):
        out.index_add_(0, seg[tn], x[tn])
    return out


@tc.kernel
def uses_scatter_add(x: torch.Tensor, seg: torch.Tensor) -> torch.Tensor:
    (n,) = x.size()
    out = torch.zeros([4], dtype=x.dtype, device=x.device)
    for tn in tc.tile(n):
        out.scatter_add_(0, seg[tn], x[tn])
    return out


def test_in_place_scatter_methods_suggest_atomic_add(device: str) -> None:
    x = torch.randn(32, device=device)
    seg = torch.randint(0, 4, (32,), device=device)
    text = _error_text(uses_scatter_add, "out.scatter_add_(0, seg[tn], x[tn])", x, seg)
    assert "tc.atomic_add(out, [" in text


def test_index_add_in_device_code_adds_atomically(device: str) -> None:
    """x.index_add_(0, index, source) on a host tensor is the atomic add it means (session 40:
    ref mode ran it, compiled code refused it)."""
    x = torch.randn(32, device=device)
    seg = torch.randint(0, 4, (32,), device=device)
    want = torch.zeros(4, device=device).index_add_(0, seg, x)
    torch.testing.assert_close(uses_index_add(x, seg), want)


@tc.kernel(static_shapes=True)
def reads_past_the_end(x: torch.Tensor) -> torch.Tensor:
    n = x.size(0)
    out = torch.empty_like(x)
    for tm in tc.tile(n):
        cols = tm.index + 1
        out[tm] = tc.load(x, [cols])
    return out


def test_a_baseline_that_finds_a_kernel_bug_keeps_its_hint() -> None:
    """Ref mode finding an index out of range is a bug of the kernel, not of eager PyTorch: the
    warning keeps the error's location and hint and does not suggest passing baseline=."""
    import warnings

    from tilecraft.autotune.discover import baseline_or_none

    x = torch.randn(7)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert baseline_or_none(reads_past_the_end.bind((x,)), (x,), {}) is None
    (message,) = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert "IndexOutOfBoundsError" in message and "7 is not in [0, 7)" in message, message
    assert f"{FILE}:{_line_of(reads_past_the_end, 'tc.load(x, [cols])')}" in message, message
    assert "hint:" in message and "extra_mask=" in message, message
    assert "baseline=" not in message, message


def _segment_sum_baseline(x: torch.Tensor, seg: torch.Tensor) -> torch.Tensor:
    return (
        torch.zeros(4, x.size(1), device=x.device).index_add_(0, seg, x) + 1.0
    )  # every config disagrees


@tc.kernel(baseline=_segment_sum_baseline)
def segment_sum_rmw(x: torch.Tensor, seg: torch.Tensor) -> torch.Tensor:
    n, d = x.size()
    out = torch.zeros([4, d], dtype=x.dtype, device=x.device)
    for tn, td in tc.tile([n, d]):
        out[seg[tn], td] += x[tn, td]
    return out


def test_no_working_config_names_a_read_modify_write_at_loaded_indices(device: str) -> None:
    from tilecraft.autotune.classify import NoWorkingConfigError
    from tilecraft.autotune.discover import discover_default

    x = torch.randn(64, 8, device=device)
    seg = torch.randint(0, 4, (64,), device=device)
    bound = segment_sum_rmw.bind((x, seg))
    with pytest.raises(NoWorkingConfigError) as info:
        discover_default(bound, (x, seg), max_candidates=2, isolate=False, use_cache=False)
    text = str(info.value)
    line = _line_of(segment_sum_rmw, "out[seg[tn], td] += x[tn, td]")
    assert f"'out' (line {line})" in text, text
    assert "race" in text and "tc.atomic_add(" in text, text


@tc.kernel
def accumulate_at_tile_rows(x: torch.Tensor, seg: torch.Tensor) -> torch.Tensor:
    n, d = x.size()
    out = torch.zeros([n, d], dtype=x.dtype, device=x.device)
    for tn, td in tc.tile([n, d]):
        out[tn, td] += x[tn, td]  # each program owns its rows: no race
        out[tn.index, td] += x[tn, td]  # an index tile, not loaded data: no race
    return out


@tc.kernel
def scatter_store_only(x: torch.Tensor, seg: torch.Tensor) -> torch.Tensor:
    n, d = x.size()
    out = torch.zeros([4, d], dtype=x.dtype, device=x.device)
    for tn, td in tc.tile([n, d]):
        out[seg[tn], td] = x[tn, td]  # a store at loaded indices without reading 'out'
    return out


def test_race_hint_needs_a_load_and_a_store_at_loaded_indices() -> None:
    from tilecraft.autotune.classify import racy_updates

    x, seg = torch.randn(64, 8), torch.randint(0, 4, (64,))
    assert racy_updates(accumulate_at_tile_rows.bind((x, seg)).traced.loops) == []
    assert racy_updates(scatter_store_only.bind((x, seg)).traced.loops) == []
    assert racy_updates(segment_sum_rmw.bind((x, seg)).traced.loops) != []
