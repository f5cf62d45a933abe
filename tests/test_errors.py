"""Errors users cause: each is a TilecraftError naming the thing, with the user's file:line; and
non-contiguous inputs, which are not an error (strides are honored)."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Any

import pytest
import torch

import tilecraft as tc
from tilecraft.errors import (
    ArgumentError,
    ConfigError,
    DeviceCodeError,
    ShapeError,
    TilecraftError,
    UnsupportedOpError,
)

FILE = "test_errors.py"


def _rand(*shape: int, dtype: torch.dtype = torch.float32, device: str = "cpu") -> torch.Tensor:
    g = torch.Generator().manual_seed(shape[0] * 17 + len(shape))
    return (torch.randn(*shape, generator=g) + 0.1).to(dtype=dtype, device=device)


def _line_of(kernel: tc.Kernel, needle: str) -> int:
    lines, first = inspect.getsourcelines(kernel.fn)
    (idx,) = [i for i, ln in enumerate(lines) if needle in ln]
    return first + idx


def _assert_located(err: BaseException, kernel: tc.Kernel, needle: str) -> str:
    """``err`` is a TilecraftError whose text has this file, the line of ``needle`` and the line."""
    assert isinstance(err, TilecraftError)
    text = str(err)
    line = _line_of(kernel, needle)
    assert f"{FILE}:{line}" in text, (line, text)
    assert needle in text  # the source line is shown
    assert "Traceback" not in text
    return text


# ----------------------------------------------------------------------------------------------
# unsupported ops
# ----------------------------------------------------------------------------------------------


@tc.kernel
def uses_i0(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        out[tm, :] = torch.special.i0(x[tm, :])
    return out


@tc.kernel
def uses_fft(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        out[tm, :] = torch.fft.fft(x[tm, :]).real
    return out


@tc.kernel
def uses_method(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        out[tm, :] = x[tm, :].kthvalue(2, -1).values[:, None] * x[tm, :]
    return out


@pytest.mark.parametrize(
    ("kern", "needle", "opname"),
    [
        (uses_i0, "out[tm, :] = torch.special.i0(x[tm, :])", "i0"),
        (uses_fft, "out[tm, :] = torch.fft.fft(x[tm, :]).real", "fft"),
        (uses_method, "out[tm, :] = x[tm, :].kthvalue(2, -1)", "kthvalue"),
    ],
    ids=["special", "fft", "method"],
)
def test_unsupported_torch_op(kern: tc.Kernel, needle: str, opname: str) -> None:
    with pytest.raises(UnsupportedOpError) as info:
        kern(_rand(37, 100))
    text = _assert_located(info.value, kern, needle)
    assert re.search(rf"torch op '[\w.]*{opname}' is not supported in device code", text), text


def _bessel_twice(v: torch.Tensor) -> torch.Tensor:
    w = v * 2
    return torch.special.i0(w)


@tc.kernel
def calls_a_helper(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in tc.tile(x.size(0)):
        out[t, :] = _bessel_twice(x[t, :])
    return out


def test_unsupported_op_in_a_helper_names_the_helpers_line() -> None:
    """The error points at the helper's line with the op and names the kernel line calling it."""
    with pytest.raises(UnsupportedOpError) as info:
        calls_a_helper(_rand(4, 8))
    err = info.value
    assert err.loc is not None and "return torch.special.i0(w)" in err.loc.source_line()
    text = str(err)
    assert "(in `_bessel_twice`, called at test_errors.py:" in text, text
    assert "out[t, :] = _bessel_twice(x[t, :])" not in text  # the caret is on the helper's line


@tc.kernel
def uses_with(x: torch.Tensor) -> torch.Tensor:
    (n,) = x.size()
    out = torch.empty_like(x)
    for t in tc.tile(n):
        v = x[t]
        with torch.no_grad():
            v = v + 1
        out[t] = v
    return out


def test_unsupported_statement() -> None:
    with pytest.raises(UnsupportedOpError) as info:
        uses_with(_rand(100))
    text = _assert_located(info.value, uses_with, "with torch.no_grad():")
    assert "With" in text


@tc.kernel
def uses_slice(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        out[tm, :] = x[tm, ::-1].sum(-1, keepdim=True)
    return out


def test_unsupported_slice() -> None:
    with pytest.raises(UnsupportedOpError) as info:
        uses_slice(_rand(37, 100))
    text = _assert_located(info.value, uses_slice, "x[tm, ::-1]")
    assert "slice ::-1 on 'x': step -1" in text


@tc.kernel
def uses_undefined(x: torch.Tensor) -> torch.Tensor:
    (n,) = x.size()
    out = torch.empty_like(x)
    for t in tc.tile(n):
        out[t] = x[t] * not_defined_anywhere  # type: ignore[name-defined]  # noqa: F821
    return out


def test_undefined_name() -> None:
    with pytest.raises(DeviceCodeError) as info:
        uses_undefined(_rand(100))
    text = _assert_located(info.value, uses_undefined, "* not_defined_anywhere")
    assert "not_defined_anywhere" in text


# ----------------------------------------------------------------------------------------------
# tiles outside device loops
# ----------------------------------------------------------------------------------------------


@tc.kernel
def iterates_tile_on_host(x: torch.Tensor) -> torch.Tensor:
    (n,) = x.size()
    out = torch.empty_like(x)
    starts = [t for t in tc.tile(n)]  # host code: not a device loop
    for t in tc.tile(n):
        out[t] = x[t] + len(starts)
    return out


def test_tile_iterated_in_plain_python() -> None:
    with pytest.raises(DeviceCodeError, match=r"tc\.tile\(\) ran as a plain Python loop"):
        for _ in tc.tile(10):
            pass
    with pytest.raises(DeviceCodeError, match=r"tc\.grid\(\) ran as a plain Python loop"):
        list(tc.grid(3))


def test_tile_iterated_in_host_code() -> None:
    with pytest.raises(DeviceCodeError, match=r"tc\.tile\(\) ran as a plain Python loop"):
        iterates_tile_on_host(_rand(100))


def test_tile_iterated_in_host_code_is_located() -> None:
    with pytest.raises(DeviceCodeError) as info:
        iterates_tile_on_host(_rand(100))
    _assert_located(info.value, iterates_tile_on_host, "starts = [t for t in tc.tile(n)]")


def test_language_calls_outside_kernel() -> None:
    with pytest.raises(DeviceCodeError, match="register_block_size"):
        tc.register_block_size(64)
    with pytest.raises(DeviceCodeError, match="register_tunable"):
        tc.register_tunable("f", [1, 2])


def test_kernel_without_device_loop() -> None:
    def no_loop(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    with pytest.raises(DeviceCodeError) as info:
        tc.kernel(no_loop)
    text = str(info.value)
    assert "no device loop" in text and "no_loop" in text
    assert f"{FILE}:{inspect.getsourcelines(no_loop)[1]}" in text


# ----------------------------------------------------------------------------------------------
# shapes, data-dependent control flow, loop-carried values
# ----------------------------------------------------------------------------------------------


@tc.kernel
def stores_wrong_shape(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty(m, device=x.device)
    for tm in tc.tile(m):
        out[tm] = x[tm, :] * 2.0
    return out


def test_store_of_wrong_shape() -> None:
    with pytest.raises(ShapeError) as info:
        stores_wrong_shape(_rand(37, 100))
    text = _assert_located(info.value, stores_wrong_shape, "out[tm] = x[tm, :] * 2.0")
    assert "store into 'out'" in text
    assert "[BLOCK_0, RDIM_1 (100)]" in text and "[BLOCK_0]" in text  # with the whole size


@tc.kernel
def too_many_indices(x: torch.Tensor) -> torch.Tensor:
    (n,) = x.size()
    out = torch.empty_like(x)
    for t in tc.tile(n):
        out[t] = x[t, 0]
    return out


def test_too_many_indices() -> None:
    with pytest.raises(ShapeError) as info:
        too_many_indices(_rand(100))
    text = _assert_located(info.value, too_many_indices, "out[t] = x[t, 0]")
    assert "too many indices for 'x'" in text


@tc.kernel
def branches_on_data(x: torch.Tensor) -> torch.Tensor:
    (n,) = x.size()
    out = torch.zeros_like(x)
    for t in tc.tile(n):
        v = x[t]
        if v.sum() > 0:
            out[t] = v
    return out


@tc.kernel
def bool_of_data(x: torch.Tensor) -> torch.Tensor:
    (n,) = x.size()
    out = torch.zeros_like(x)
    for t in tc.tile(n):
        v = x[t]
        out[t] = v if v.amax() > 1.0 else v * 2.0
    return out


@pytest.mark.parametrize(
    ("kern", "needle"),
    [(branches_on_data, "if v.sum() > 0:"), (bool_of_data, "out[t] = v if v.amax()")],
    ids=["if", "ifexp"],
)
def test_data_dependent_if(kern: tc.Kernel, needle: str) -> None:
    with pytest.raises(DeviceCodeError) as info:
        kern(_rand(100))
    text = _assert_located(info.value, kern, needle)
    assert "torch.where" in text  # the hint says what to do instead


@tc.kernel
def carried_changes_dtype(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty(m, device=x.device)
    for tm in tc.tile(m):
        acc = tc.zeros([tm], dtype=torch.float16)
        for tn in tc.tile(n):
            acc = acc + x[tm, tn].sum(-1)
        out[tm] = acc
    return out


def test_loop_carried_dtype_change() -> None:
    with pytest.raises(DeviceCodeError) as info:
        carried_changes_dtype(_rand(37, 100))
    text = str(info.value)
    assert FILE in text
    lines = {_line_of(carried_changes_dtype, s) for s in ("for tn in", "acc = acc +")}
    assert any(f"{FILE}:{n}" in text for n in lines), text
    assert "loop-carried 'acc' changes dtype" in text
    assert "torch.float16" in text and "torch.float32" in text


@tc.kernel
def carried_changes_shape(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty(m, device=x.device)
    for tm in tc.tile(m):
        acc = tc.zeros([tm], dtype=torch.float32)
        for tn in tc.tile(n):
            acc = acc + x[tm, tn]
        out[tm] = acc.sum(-1)
    return out


def test_loop_carried_shape_change() -> None:
    with pytest.raises(ShapeError) as info:
        carried_changes_shape(_rand(37, 100))
    _assert_located(info.value, carried_changes_shape, "acc = acc + x[tm, tn]")


# ----------------------------------------------------------------------------------------------
# arguments of a BoundKernel
# ----------------------------------------------------------------------------------------------


@tc.kernel
def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in tc.tile(x.size(0)):
        out[t] = x[t] + y[t]
    return out


@pytest.mark.parametrize(
    ("make_other", "needle"),
    [
        (lambda d: _rand(100, dtype=torch.float64, device=d), "torch.float64"),
        (lambda d: _rand(100, 1, device=d), "shape [100, 1]"),
        (lambda d: _rand(50, device=d), "shape [50]"),
        (lambda d: _rand(200, device=d)[::2], "strides [2]"),
    ],
    ids=["dtype", "rank", "shape", "stride"],
)
def test_bound_kernel_wrong_argument(
    make_other: Callable[[str], torch.Tensor], needle: str, device: str
) -> None:
    x, y, other = _rand(100, device=device), _rand(100, device=device), make_other(device)
    bound = add.bind((x, y))
    torch.testing.assert_close(bound(x, y), x + y)
    with pytest.raises(ArgumentError) as info:
        bound(x, other)
    text = str(info.value)
    assert "argument 'y'" in text and needle in text
    assert "add()" in text
    assert "torch.float32 tensor of shape [100]" in text  # what it was compiled for


def test_bound_kernel_wrong_argument_count() -> None:
    x = _rand(100)
    with pytest.raises(ArgumentError, match="missing a required argument: 'y'"):
        add(x)
    with pytest.raises(ArgumentError, match="add()"):
        add.bind((x, x))(x, x, x)


def test_tensors_on_different_devices() -> None:
    x = _rand(100)
    y = torch.empty(100, device="meta")
    with pytest.raises(ArgumentError) as info:
        add(x, y)
    text = str(info.value)
    assert "different devices" in text and "x=cpu" in text and "y=meta" in text


def test_argument_error_is_located() -> None:
    x, y = _rand(100), _rand(100)
    with pytest.raises(ArgumentError) as info:
        add.bind((x, y))(x, y.double())
    assert f"{FILE}:" in str(info.value)


# ----------------------------------------------------------------------------------------------
# non-contiguous inputs are honored
# ----------------------------------------------------------------------------------------------


@tc.kernel
def rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty(m, n, dtype=x.dtype, device=x.device)
    for tm in tc.tile(m):
        xt = x[tm, :].to(torch.float32)
        inv = torch.rsqrt(torch.mean(xt * xt, dim=-1) + eps)
        out[tm, :] = (xt * inv[:, None] * w[None, :].to(torch.float32)).to(out.dtype)
    return out


def _rms_ref(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-5) * w


@pytest.mark.parametrize("looped", [None, 32])
def test_transposed_input_gives_correct_results(looped: int | None, device: str) -> None:
    base = _rand(100, 37, device=device)
    x = base.t()  # [37, 100] with strides (1, 37)
    assert not x.is_contiguous()
    w = _rand(100, device=device)
    bound = rms_norm.bind((x, w))
    program = bound.compile_config(tc.Config(block_sizes=[8], reduction_loops=[looped]))
    torch.testing.assert_close(bound.run(program, x, w), _rms_ref(x, w), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(rms_norm(x, w), _rms_ref(x, w), rtol=1e-5, atol=1e-5)
    # the strides are part of the specialization: a contiguous x gets its own
    xc = x.contiguous()
    torch.testing.assert_close(rms_norm(xc, w), _rms_ref(xc, w), rtol=1e-5, atol=1e-5)
    with pytest.raises(ArgumentError, match="strides"):
        bound(xc, w)


def test_sliced_and_strided_inputs(device: str) -> None:
    big = _rand(37, 300, device=device)
    x = big[:, 50:150]  # storage offset 50, row stride 300
    w = _rand(400, device=device)[::4]  # stride 4
    torch.testing.assert_close(rms_norm(x, w), _rms_ref(x, w), rtol=1e-5, atol=1e-5)


def test_broadcast_stride_zero_input(device: str) -> None:
    x = _rand(100, device=device).expand(37, 100)  # stride (0, 1)
    w = _rand(100, device=device)
    torch.testing.assert_close(rms_norm(x, w), _rms_ref(x, w), rtol=1e-5, atol=1e-5)


def test_non_contiguous_output(device: str) -> None:
    @tc.kernel
    def scale_into(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        m, n = x.size()
        for tm, tn in tc.tile([m, n]):
            out[tm, tn] = x[tm, tn] * 3.0
        return out

    x = _rand(37, 100, device=device)
    out_base = torch.full((100, 37), -1.0, device=device)
    out = scale_into(x, out_base.t())
    torch.testing.assert_close(out, x * 3.0)
    torch.testing.assert_close(out_base, (x * 3.0).t())


@tc.kernel(static_shapes=True)
def stores_through_a_list(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    n = x.size(0)
    outs = [torch.empty_like(x) for _ in range(2)]
    for tn in tc.tile(n):
        outs[0][tn] = x[tn] * 2
        outs[1][tn] = x[tn] + 1
    return outs[0], outs[1]


@tc.kernel(static_shapes=True)
def loads_through_a_tuple(x: torch.Tensor) -> torch.Tensor:
    n = x.size(0)
    ins = (x, x)
    out = torch.empty_like(x)
    for tn in tc.tile(n):
        out[tn] = ins[1][tn] * 2
    return out


@pytest.mark.parametrize(
    "kern, line", [(stores_through_a_list, "outs[0][tn] ="), (loads_through_a_tuple, "ins[1][tn]")]
)
def test_host_tensor_in_a_container_names_the_fix(kern: tc.Kernel, line: str) -> None:
    """A host tensor reached through a Python container: the error says to name it before the
    loop (it used to say the subscript was not a host tensor, or that Tensor.__getitem__ is
    unsupported)."""
    with pytest.raises(DeviceCodeError, match="inside a Python list, tuple or dict") as info:
        kern(torch.randn(8))
    text = str(info.value)
    assert "test_errors.py" in text and line in text and "out0 = outs[0]" in text


@tc.kernel(static_shapes=True)
def gather_rows(table: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    n, d = ids.size(0), table.size(1)
    out = torch.empty([n, d], dtype=table.dtype, device=table.device)
    for tn, td in tc.tile([n, d]):
        out[tn, td] = table[ids[tn], td]
    return out


@tc.kernel(static_shapes=True)
def segment_sums(x: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    s, d = offsets.size(0) - 1, x.size(1)
    out = torch.zeros([s, d], dtype=torch.float32, device=x.device)
    for seg, td in tc.tile([s, d], block_size=[1, None]):
        acc = tc.zeros([td], dtype=torch.float32)
        for tt in tc.tile(offsets[seg.begin], offsets[seg.begin + 1]):
            acc = acc + torch.sum(x[tt, td], dim=0)
        out[seg.begin, td] = acc
    return out


def test_index_tensors_of_the_wrong_dtype_name_the_index(device: str) -> None:
    """A bool index was read as positions 0 and 1 (torch takes it as a mask: wrong rows,
    silently); a float one named the indexed tensor, not the index."""
    table = torch.arange(20.0, device=device).view(10, 2)
    mask = torch.tensor([True, False, True, True], device=device)
    with pytest.raises(DeviceCodeError, match=r"'table' with 'ids', a bool tile.*mask") as info:
        gather_rows(table, mask)
    assert "torch.where(mask" in str(info.value)
    with pytest.raises(DeviceCodeError, match=r"'table' with 'ids', a torch.float32 tile"):
        gather_rows(table, torch.tensor([1.0, 2.0], device=device))
    rows = gather_rows(table, torch.tensor([3, 1], device=device))
    assert rows.tolist() == [[6.0, 7.0], [2.0, 3.0]]


def test_float_loop_bounds_read_from_memory_name_the_tensor(device: str) -> None:
    """Every config failed in Triton ('unexpected type fp32') and no message named 'offsets'."""
    x = torch.randn(40, 8, device=device)
    with pytest.raises(DeviceCodeError, match=r"bound read from 'offsets' is torch.float32"):
        segment_sums(x, torch.tensor([0.0, 7.0, 30.0, 40.0], device=device))
    offsets = torch.tensor([0, 7, 7, 40], dtype=torch.int32, device=device)
    want = torch.stack([x[:7].sum(0), torch.zeros(8, device=device), x[7:].sum(0)])
    torch.testing.assert_close(segment_sums(x, offsets), want, rtol=1e-5, atol=1e-5)


# ----------------------------------------------------------------------------------------------
# the traceback a user reads
# ----------------------------------------------------------------------------------------------


@tc.kernel
def uses_i0_on_a_tile(x: torch.Tensor) -> torch.Tensor:
    (n,) = x.size()
    out = torch.empty_like(x)
    for tn in tc.tile(n):
        out[tn] = torch.special.i0(x[tn])
    return out


def _frames(err: BaseException) -> list[str]:
    tb = err.__traceback__
    files = []
    while tb is not None:
        files.append(tb.tb_frame.f_code.co_filename)
        tb = tb.tb_next
    return files


def test_kernel_errors_hide_tilecraft_frames(monkeypatch: pytest.MonkeyPatch) -> None:
    """The traceback of a user's mistake ends at their call (one frame of tilecraft: the call
    that re-raises), not in the tracer; the caret sits under the statement's first character."""
    monkeypatch.delenv("TILECRAFT_FULL_TRACEBACK", raising=False)
    with pytest.raises(UnsupportedOpError) as info:
        uses_i0_on_a_tile(_rand(16))
    inside = [f for f in _frames(info.value) if "/tilecraft/" in f]
    assert len(inside) == 1 and inside[0].endswith("runtime/kernel.py"), inside
    assert info.value.__cause__ is None and info.value.__suppress_context__
    text = _assert_located(info.value, uses_i0_on_a_tile, "torch.special.i0(x[tn])")
    source, caret = text.splitlines()[2:4]
    assert caret.index("^") == len(source) - len(source.lstrip()), (source, caret)


def _make_nested_kernel() -> tc.Kernel:
    @tc.kernel
    def nested_i0(x: torch.Tensor) -> torch.Tensor:
        (n,) = x.size()
        out = torch.empty_like(x)
        for tn in tc.tile(n):
            out[tn] = torch.special.i0(x[tn])
        return out

    return nested_i0


def test_caret_of_a_kernel_defined_inside_a_function() -> None:
    """A kernel defined in a function is indented in its file: its columns count from the
    file's line, not from the dedented source (the caret sat 4 columns left of the line)."""
    kernel = _make_nested_kernel()
    with pytest.raises(UnsupportedOpError) as info:
        kernel(_rand(16))
    text = _assert_located(info.value, kernel, "torch.special.i0(x[tn])")
    source, caret = text.splitlines()[2:4]
    assert caret.index("^") == len(source) - len(source.lstrip()), (source, caret)


def test_full_traceback_setting_keeps_frames(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILECRAFT_FULL_TRACEBACK", "1")
    with pytest.raises(UnsupportedOpError) as info:
        uses_i0_on_a_tile(_rand(16))
    inside = [f for f in _frames(info.value) if "/tilecraft/" in f]
    assert any(f.endswith("frontend/trace.py") for f in inside), inside


@tc.kernel
def centre_rows_one_at_a_time(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m, block_size=1):
        v = x[tm, :]
        out[tm, :] = v - v.mean(1)[:, None]
    return out


def test_a_dim_error_under_a_block_of_one_says_the_tile_indexes_like_an_int() -> None:
    with pytest.raises(ShapeError, match="dim=1 is out of range") as info:
        centre_rows_one_at_a_time(_rand(6, 8))
    text = _assert_located(info.value, centre_rows_one_at_a_time, "v.mean(1)")
    assert "block_size=1 indexes like an int" in text
    with pytest.raises(ShapeError) as plain:
        reduces_a_missing_dim(_rand(6, 8))
    assert "block_size=1" not in str(plain.value)


@tc.kernel
def reduces_a_missing_dim(x: torch.Tensor) -> torch.Tensor:
    (m, n) = x.size()
    out = torch.empty([m], dtype=x.dtype, device=x.device)
    for tm in tc.tile(m):
        out[tm] = x[tm, :].sum(2)
    return out


@tc.kernel
def picks_by_a_computed_index(x: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty([m, q.size(0)], dtype=x.dtype, device=x.device)
    for tm in tc.tile(m):
        xs = x[tm, :] * 2.0
        lo = (q[:] * (n - 1)).long()
        out[tm, :] = xs[:, lo]
    return out


def test_indexing_a_tile_with_a_tile_names_its_dtype_not_the_ir() -> None:
    with pytest.raises(UnsupportedOpError, match=r"indexing a tile with a tile \(int64") as info:
        picks_by_a_computed_index(_rand(6, 8), torch.tensor([0.1, 0.9]))
    text = _assert_located(info.value, picks_by_a_computed_index, "xs[:, lo]")
    assert "TileValue" not in text and "%" not in text and "torch.gather" in text


@tc.kernel
def doubles_in_place(x: torch.Tensor) -> torch.Tensor:
    (n,) = x.size()
    out = torch.empty_like(x)
    for tn in tc.tile(n):
        v = x[tn] + 0.0
        v.mul_(2.0)
        out[tn] = v
    return out


def test_an_in_place_method_on_a_tile_suggests_the_out_of_place_form() -> None:
    with pytest.raises(UnsupportedOpError, match="Tensor.mul_") as info:
        doubles_in_place(_rand(8))
    text = _assert_located(info.value, doubles_in_place, "v.mul_(2.0)")
    assert "v = v.mul(...)" in text


@tc.kernel
def stores_after_its_loop(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        out[tm, :] = x[tm, :]
    out[tm, :] = 0.0  # noqa: F821 (the tile does not exist here)
    return out


def test_a_tile_used_after_its_loop_is_not_blamed_on_the_arguments() -> None:
    with pytest.raises(ArgumentError, match="NameError") as info:
        stores_after_its_loop(_rand(6, 8))
    text = _assert_located(info.value, stores_after_its_loop, "out[tm, :] = 0.0")
    assert "inside their device loop" in text and "ranks and shapes" not in text


@tc.kernel
def scales_by_a_python_float(x: torch.Tensor) -> torch.Tensor:
    (n,) = x.size()
    out = torch.empty_like(x)
    for tn in tc.tile(n):
        out[tn] = x[tn] * float(x[tn].sum())
    return out


def test_float_of_a_tile_is_a_located_error_not_a_type_error() -> None:
    """float(tile) / int(tile) / len(tile) raised TypeError naming an internal class."""
    with pytest.raises(DeviceCodeError, match=r"float\(\.\.\.\) of a device value") as info:
        scales_by_a_python_float(_rand(20))
    text = _assert_located(info.value, scales_by_a_python_float, "float(x[tn].sum())")
    assert "TileValue" not in text and ".to(torch.float32)" in text


@tc.kernel
def cumsum_down_the_grid(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        out[tm, :] = torch.cumsum(x[tm, :], dim=0)
    return out


@tc.kernel(config=tc.Config(block_sizes=[16]))
def chunked_cumsum(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m, block_size=1):
        total = tc.zeros([1], dtype=torch.float32)
        for tk in tc.tile(n):
            out[tm, tk] = total + torch.cumsum(x[tm, tk], dim=0)
            total = total + torch.sum(x[tm, tk], dim=0, keepdim=True)
    return out


def test_a_scan_along_the_grid_block_is_refused_and_an_inner_loops_is_not(device: str) -> None:
    """cumsum over dim 0 of x[tm, :] restarted at every program's block (up to 17 off;
    ref mode scanned the whole column): refused as sort and flip are. A chunked scan over an
    inner loop's tiles, carrying its total, is the way to write it."""
    with pytest.raises(ShapeError, match=r"torch.cumsum along dim 0 .* one program each tile"):
        cumsum_down_the_grid(_rand(37, 10, device=device))
    x = _rand(5, 100, device=device)
    torch.testing.assert_close(chunked_cumsum(x), x.cumsum(1), rtol=1e-5, atol=1e-4)


@tc.kernel
def every_other_row(x: torch.Tensor) -> torch.Tensor:
    out = torch.zeros_like(x)
    for i in tc.grid(0, x.size(0), step=2):
        out[i, :] = x[i, :]
    return out


def test_an_error_of_a_tc_call_in_host_code_names_the_users_line(device: str) -> None:
    """tc.grid(step=2) was refused with no file:line (the only refusal without one)."""
    with pytest.raises(DeviceCodeError, match="only step 1") as info:
        every_other_row(torch.randn(8, 4, device=device))
    assert f"test_errors.py:{every_other_row.def_loc.lineno + 2}" in str(info.value)


@tc.kernel(static_shapes=True)
def embedded(table: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    (n,) = ids.size()
    out = torch.empty([n, table.size(1)], dtype=table.dtype, device=table.device)
    for tn in tc.tile(n):
        out[tn, :] = torch.nn.functional.embedding(ids[tn], table)
    return out


@tc.kernel(static_shapes=True)
def counted(ids: torch.Tensor) -> torch.Tensor:
    out = torch.zeros([8], dtype=torch.int64, device=ids.device)
    for tn in tc.tile(ids.size(0)):
        out[:] = torch.bincount(ids[tn], minlength=8)
    return out


def test_an_op_with_a_one_line_equivalent_names_it() -> None:
    """F.embedding and torch.bincount got only the generic "docs/ops.md lists..." hint."""
    ids = torch.tensor([1, 0, 3, 3])
    with pytest.raises(UnsupportedOpError, match="embedding") as info:
        embedded(torch.randn(5, 4), ids)
    assert "table[ids[tn], :]" in str(info.value)
    with pytest.raises(UnsupportedOpError, match="bincount") as info:
        counted(ids)
    assert "tc.atomic_add(counts, [ids[tn]], 1)" in str(info.value)


@tc.kernel(static_shapes=True)
def prefix_means(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    b, _, d = x.size()
    out = torch.empty([b, d], dtype=torch.float32, device=x.device)
    for tb in tc.tile(b, block_size=1):
        n = lengths[tb.begin]
        acc = tc.zeros([d], dtype=torch.float32)
        for ts in tc.tile(n):
            acc = acc + x[tb.begin, ts, :].sum(0)
        out[tb.begin, :] = acc / torch.clamp(n, min=1).to(torch.float32)
    return out


@pytest.mark.parametrize("kind", ["list", "tuple", "numpy"])
def test_a_list_indexed_in_device_code_names_the_argument(kind: str) -> None:
    """``lengths[tb.begin]`` of a list, tuple or NumPy array: an UnsupportedOpError showed
    Python's 'list indices must be integers or slices, not TileValue' (fuzz 54b)."""
    import numpy as np

    values = [12, 0, 5, 3]
    lengths = {"list": values, "tuple": tuple(values), "numpy": np.array(values)}[kind]
    with pytest.raises(DeviceCodeError, match=r"test_errors.py:\d+: 'lengths' is a ") as info:
        prefix_means(torch.randn(4, 12, 8), lengths)
    assert "torch.tensor(lengths, device=x.device)" in str(info.value)
    assert "TileValue" not in str(info.value)


@tc.kernel(static_shapes=True)
def scratch_in_device_code(x: torch.Tensor) -> torch.Tensor:
    (n,) = x.size()
    out = torch.empty_like(x)
    for t in tc.tile(n):
        acc = torch.zeros(n)
        out[t] = x[t] + acc[t]
    return out


@tc.kernel(static_shapes=True)
def tensor_number_in_device_code(x: torch.Tensor) -> torch.Tensor:
    (n,) = x.size()
    out = torch.empty_like(x)
    for t in tc.tile(n):
        out[t] = x[t] * torch.tensor(0.5)
    return out


def test_values_made_in_device_code_say_where_they_live() -> None:
    """``torch.zeros(n)`` in device code indexed by the loop's tile showed 'indexing a tile
    with Tile(BLOCK_0)'; ``torch.tensor(0.5)`` there was called a global or a closure's
    (fuzz 54a)."""
    with pytest.raises(UnsupportedOpError, match=r"test_errors.py:\d+: indexing a tile value") as e:
        scratch_in_device_code(torch.rand(10))
    assert "allocate a tensor in host code" in str(e.value) and "BLOCK_0" not in str(e.value)
    with pytest.raises(UnsupportedOpError, match=r"made in device code as torch.tensor\(0.5\)"):
        tensor_number_in_device_code(torch.rand(10))


def test_a_kernel_over_a_wrapping_decorator_is_refused() -> None:
    """@tc.kernel above a functools.wraps wrapper compiled the inner function's source: the
    wrapper's own code (here a factor of 10) was dropped silently (fuzz round 55c)."""
    import functools

    def times10(f: Any) -> Any:
        @functools.wraps(f)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return f(*args, **kwargs) * 10

        return wrapper

    def scaled(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for t in tc.tile(x.size(0)):
            out[t] = x[t] * 3
        return out

    with pytest.raises(ConfigError, match="a wrapper of another function"):
        tc.kernel(times10(scaled))
    kernel = tc.kernel(scaled)  # the documented order: the wrapper around the kernel
    x = torch.randn(8)
    torch.testing.assert_close(times10(kernel)(x), x * 30)


def test_a_generator_kernel_is_refused_at_its_definition() -> None:
    """Its first call said to report a tilecraft bug (fuzz round 55c)."""

    def rows(x: torch.Tensor) -> Any:
        for t in tc.tile(x.size(0)):
            yield x[t]

    with pytest.raises(ConfigError, match="a generator: a kernel is a plain function"):
        tc.kernel(rows)
