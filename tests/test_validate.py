"""Inputs checked at the launch boundary: size-0 launches, tensors shorter than the loops that
index them, and arguments the kernel cannot take (dtype, rank, device, meta) — each a clear error
or the right answer, never a crash or an out-of-bounds read."""

from __future__ import annotations

import inspect
from collections.abc import Iterator

import pytest
import torch

import tilecraft as tc
from examples.add import add
from examples.softmax import softmax
from examples.sum import sum_last
from tests.kernels import rms_norm, rms_norm_ref
from tilecraft.errors import ArgumentError, DeviceCodeError, ShapeError

CONFIG = tc.Config(block_sizes=[16, 16])


@pytest.fixture(autouse=True)
def _tensors_where_kernels_run(device: str) -> Iterator[None]:
    """Tensors these tests build live where kernels run: the GPU on a machine with one (the
    checks must hold at the launches that matter), else the CPU interpreter."""
    torch.set_default_device(device)
    yield
    torch.set_default_device(None)


@tc.kernel(config=CONFIG)
def axpy(x: torch.Tensor, y: torch.Tensor, a: float) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tm, tn in tc.tile([m, n]):
        out[tm, tn] = x[tm, tn] * a + y[tm, tn]
    return out


@tc.kernel(config=CONFIG, static_shapes=False)
def axpy_dynamic(x: torch.Tensor, y: torch.Tensor, a: float) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tm, tn in tc.tile([m, n]):
        out[tm, tn] = x[tm, tn] * a + y[tm, tn]
    return out


def _line(kernel: tc.Kernel, needle: str) -> str:
    lines, first = inspect.getsourcelines(kernel.fn)
    (idx,) = [i for i, ln in enumerate(lines) if needle in ln]
    return f"test_validate.py:{first + idx}"


def _eager(name: str, x: torch.Tensor) -> torch.Tensor:
    if name == "add":
        return x + x
    if name == "softmax":
        return torch.softmax(x, dim=-1)
    return rms_norm_ref(x, torch.ones(x.shape[1]))


@pytest.mark.parametrize("shape", [(0, 64), (64, 0), (0, 0)])
@pytest.mark.parametrize("name", ["add", "softmax", "rms_norm"])
def test_size_zero_inputs_return_empty(name: str, shape: tuple[int, int]) -> None:
    x = torch.randn(shape)
    if name == "add":
        out = add(x, x)
    elif name == "softmax":
        out = softmax(x)
    else:
        out = rms_norm(x, torch.ones(shape[1]))
    assert out.shape == _eager(name, x).shape


def test_reduction_over_empty_dim_is_zero() -> None:
    x = torch.randn(5, 0)
    assert torch.equal(sum_last(x), torch.zeros(5))


def test_empty_grid_launcher_returns_before_launch() -> None:
    code = add.bind((torch.empty(0, 8), torch.empty(0, 8))).to_triton_code(
        tc.Config(block_sizes=[16, 16])
    )
    launcher = code[code.index("def launch_0") :]
    assert launcher.splitlines()[1].strip() == "return"


def test_dynamic_empty_grid_is_skipped() -> None:
    x = torch.randn(64, 64)
    assert torch.equal(axpy_dynamic(x, x, 2.0), x * 3)
    empty = torch.randn(0, 64)
    assert axpy_dynamic(empty, empty, 2.0).shape == (0, 64)


def test_short_tensor_is_a_shape_error_at_its_line() -> None:
    with pytest.raises(ShapeError) as info:
        axpy(torch.ones(512, 512), torch.zeros(2, 2), 1.0)
    text = str(info.value)
    assert "'y'" in text and "dim 0" in text and "[0, 512)" in text
    assert _line(axpy, "out[tm, tn] = x[tm, tn]") in text


def test_short_tensor_dynamic_shapes_checked_per_call() -> None:
    x = torch.randn(64, 64)
    axpy_dynamic(x, x, 1.0)  # traced on a call that fits
    with pytest.raises(ShapeError) as info:
        axpy_dynamic(x, torch.zeros(40, 64), 1.0)  # same size buckets, shorter y
    text = str(info.value)
    assert "'y'" in text and "dim 0" in text and "(40, 64)" in text
    assert _line(axpy_dynamic, "out[tm, tn] = x[tm, tn]") in text


def test_unsupported_dtype_is_one_line_before_any_candidate() -> None:
    x = torch.randn(8, 16, dtype=torch.complex64)
    with pytest.raises(ArgumentError) as info:
        rms_norm(x, torch.randn(16, dtype=torch.complex64))
    text = str(info.value)
    assert "argument 'x'" in text and "complex64" in text and "candidates" not in text


def test_wrong_rank_names_the_host_line() -> None:
    with pytest.raises(ArgumentError) as info:
        rms_norm(torch.randn(2, 8, 16), torch.randn(16))
    text = str(info.value)
    assert "[2, 8, 16]" in text and "too many values to unpack" in text
    assert _line_of_kernels("m, n = x.size()") in text


@tc.kernel
def scaled_by_longest(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    longest = int(lengths.max())  # a value read from tensor data in host code
    out = torch.empty_like(x)
    for t in tc.tile(x.size(0)):
        out[t] = x[t] * longest
    return out


def test_host_code_reading_tensor_data_says_why_and_what_to_do() -> None:
    """Host code runs on meta tensors while traced: ``int(lengths.max())`` failed with
    torch's 'cannot be called on meta tensors' and a hint about ranks and shapes."""
    with pytest.raises(ArgumentError) as info:
        scaled_by_longest(torch.randn(8), torch.tensor([3, 5]))
    text = str(info.value)
    assert "test_validate.py" in text and "int(lengths.max())" in text
    assert "meta tensors (shapes, no data)" in text and "as an int or float argument" in text
    assert "ranks and shapes" not in text


def _line_of_kernels(needle: str) -> str:
    lines, first = inspect.getsourcelines(rms_norm.fn)
    (idx,) = [i for i, ln in enumerate(lines) if needle in ln]
    return f"kernels.py:{first + idx}"


def test_mismatched_reduction_extents_are_a_shape_error() -> None:
    with pytest.raises(ShapeError, match="do not broadcast"):
        rms_norm(torch.randn(8, 16), torch.randn(12))


def test_meta_tensors_give_shapes_without_any_candidate() -> None:
    """A call on meta tensors runs the host code alone (as torch's ops on meta tensors): no
    discovery, no launch; ``bind`` still generates code for them."""
    x, w = torch.randn(8, 16, device="meta"), torch.randn(16, device="meta")
    out = rms_norm(x, w)
    assert out.is_meta and out.shape == (8, 16)
    assert "tl.store" in rms_norm.bind((x, w)).to_triton_code()  # inspection still works


def test_non_contiguous_inputs_are_honored() -> None:
    base = torch.randn(24, 40)
    x, y = base.t(), torch.randn(80, 24)[::2]
    assert torch.allclose(axpy(x, y, 0.5), x * 0.5 + y)


def test_cpu_without_interpreter_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    x = torch.randn(8, 24, device="cpu")
    with pytest.raises(ArgumentError, match="TRITON_INTERPRET=1") as info:
        rms_norm(x, torch.randn(24, device="cpu"))
    assert "candidates" not in str(info.value)


@tc.kernel(static_shapes=True)
def batched_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    bs, m, k = a.size()
    out = torch.empty([bs, m, b.size(2)], dtype=torch.float32, device=a.device)
    for tb, tm, tn in tc.tile([bs, m, b.size(2)], block_size=[1, None, None]):
        acc = tc.zeros([tm, tn], dtype=torch.float32)
        for tk in tc.tile(k):
            acc = tc.dot(a[tb.begin, tm, tk], b[tb.begin, tk, tn], acc=acc)
        out[tb.begin, tm, tn] = acc
    return out


@tc.kernel(static_shapes=True)
def row_variance(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty([x.size(0)], dtype=torch.float32, device=x.device)
    for tm in tc.tile(x.size(0)):
        out[tm] = torch.var(x[tm, :], dim=-1)
    return out


def test_an_empty_batch_over_an_inner_loop_and_variances_of_empty_rows() -> None:
    """A batch of 0 over an inner k loop raised ZeroDivisionError choosing the default's split;
    torch.var over 0 (or 1) elements gave -0.0 where torch gives nan (fuzzing, session 34)."""
    assert batched_matmul(torch.randn(0, 4, 8), torch.randn(0, 8, 4)).shape == (0, 4, 4)
    for n in (0, 1):
        assert bool(row_variance(torch.randn(3, n)).isnan().all())


@tc.kernel(config=CONFIG)
def doubled(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm, tn in tc.tile(x.size()):
        out[tm, tn] = x[tm, tn] * 2
    return out


def test_meta_sparse_and_nested_tensors_are_refused_by_name() -> None:
    """With config= a meta tensor reached the launch (torch's 'Cannot copy out of meta tensor'):
    a call on meta tensors is now shapes only, as torch's ops on meta tensors (the host code,
    device loops skipped); sparse and nested tensors failed reading strides ('Sparse CSR
    tensors do not have strides', 'NestedTensorImpl doesn't support sizes. Please file an
    issue')."""
    shapes = doubled(torch.zeros(4, 6, device="meta"))
    assert shapes.is_meta and shapes.shape == (4, 6)
    dense = torch.eye(4)
    for value, kind in (
        (dense.to_sparse(), "sparse_coo"),
        (dense.to_sparse_csr(), "sparse_csr"),
        (torch.nested.nested_tensor([torch.ones(2, 4), torch.ones(3, 4)]), "nested"),
    ):
        with pytest.raises(ArgumentError, match=f"argument 'x' is a {kind} tensor"):
            doubled(value)


@tc.kernel(static_shapes=True)
def sum_pair(xs: list[torch.Tensor]) -> torch.Tensor:
    a, b = xs
    out = torch.empty(a.size(), dtype=a.dtype, device=a.device)
    for tm, tn in tc.tile(a.size()):
        out[tm, tn] = a[tm, tn] + b[tm, tn]
    return out


def test_a_list_of_tensors_is_keyed_by_its_tensors() -> None:
    """A list argument was keyed by its repr: a column-major tensor that prints like a
    row-major one reused the row-major specialization's strides; a tensor in it that requires
    grad was not seen (no 'no backward' error)."""
    x = torch.zeros(4, 4)
    x[0, 1] = 1.0
    y = torch.zeros(4, 4)
    assert torch.equal(sum_pair([x, y]), x)
    column_major = x.t().contiguous().t()
    assert torch.equal(sum_pair([column_major, y]), x)
    with pytest.raises(ArgumentError, match="has no backward"):
        sum_pair([torch.randn(4, 4, requires_grad=True), y])


@tc.kernel(static_shapes=True)
def range_scale(x: torch.Tensor, a: int, b: int) -> torch.Tensor:
    out = x.clone()
    for t in tc.tile(a, b):
        out[t] = x[t] * 3
    return out


@tc.kernel(static_shapes=True, config=tc.Config(block_sizes=[4]))
def segment_copy(x: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    out = torch.zeros_like(x)
    for seg in tc.grid(offsets.size(0) - 1):
        for tt in tc.tile(offsets[seg], offsets[seg + 1]):
            out[tt] = x[tt] * 2
    return out


def test_loops_that_begin_before_or_end_past_a_tensor_never_touch_outside_it() -> None:
    """``tc.tile(-3, 4)`` read and wrote before the tensor; CSR offsets past its end (bad data)
    did the same from the device: the interpreter's process aborted (heap corruption)."""
    x = torch.arange(10.0)
    with pytest.raises(ShapeError, match="begins at -3, before the tensor's first element"):
        range_scale(x, -3, 4)
    out = segment_copy(x, torch.tensor([0, 3, 50], dtype=torch.int32))
    assert torch.equal(out, x * 2)  # the elements past the end are neither read nor written


def test_ref_mode_refuses_a_loop_that_begins_before_a_tensor() -> None:
    """Ref mode made the tile ``x[-3:4]`` (Python's slice from the end: empty) and returned the
    untouched copy, where compiled code refuses the loop; a begin read from memory (offsets
    [-5, ...]) likewise, which compiled code reads as 0 there (fuzz 54b)."""
    x = torch.arange(10.0)
    with pytest.raises(ShapeError, match=r"over \[-3, 4\) indexes a tensor from -3"):
        range_scale.run_ref(x, -3, 4)
    with pytest.raises(ShapeError, match=r"test_validate.py:\d+: a tile loop over \[-5, 3\)"):
        segment_copy.run_ref(x, torch.tensor([-5, 3, 10]))


@tc.kernel(static_shapes=True, config=tc.Config(block_sizes=[4, 8]))
def ragged_row_sums(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    b, _ = x.size()
    out = torch.zeros([b], dtype=torch.float32, device=x.device)
    for tb in tc.tile(b):
        acc = tc.zeros([tb], dtype=torch.float32)
        for ts in tc.tile(lengths[tb]):  # one end per row: a loop has one
            acc = acc + x[tb, ts].sum(1)
        out[tb] = acc
    return out


@pytest.mark.parametrize("mode", ["compiled", "ref"])
def test_a_loop_bound_of_several_values_is_refused_at_its_line(mode: str) -> None:
    """``tc.tile(lengths[tb])`` with a tile of rows: the trace emitted a loop to a vector
    (the interpreter's broadcast error, an MLIR assertion killing the sm_90 compile worker),
    ref mode raised torch's 'only one element tensors' (fuzz 54b)."""
    x, lengths = torch.randn(6, 20), torch.tensor([20, 3, 0, 7, 11, 1])
    call = ragged_row_sums if mode == "compiled" else ragged_row_sums.run_ref
    with pytest.raises(
        DeviceCodeError, match=r"test_validate.py:\d+: tc.tile\(...\): a loop bound is a tile"
    ) as info:
        call(x, lengths)
    assert "extra_mask=ts.index[None, :] < lengths[tb][:, None]" in str(info.value)


@tc.kernel(static_shapes=False)
def add_dynamic(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)  # follows x's layout
    for tm, tn in tc.tile([m, n]):
        out[tm, tn] = x[tm, tn] + y[tm, tn]
    return out


def test_dynamic_shapes_follow_the_layouts_empty_like_gives() -> None:
    """A transposed [7, 1] column (torch.empty_like gives stride 7 along its size-1 dim on the
    CPU, 1 on meta) had no working config; an expanded [3, 5] column after a transposed [3, 5]
    shared its compile and raised ShapeError asking to make 'out' contiguous (fuzzing)."""
    column = torch.randn(1, 7).t()
    assert torch.equal(add_dynamic(column, torch.ones(7, 1)), column + 1)
    y = torch.randn(3, 5)
    transposed, expanded = torch.randn(5, 3).t(), torch.randn(3, 1).expand(3, 5)
    assert torch.equal(add_dynamic(transposed, y), transposed + y)
    assert torch.equal(add_dynamic(expanded, y), expanded + y)


@tc.kernel(static_shapes=True)
def previous_row(x: torch.Tensor) -> torch.Tensor:
    out = torch.zeros_like(x)
    for r in tc.grid(x.size(0)):
        out[r, :] = x[r - 1, :]
    return out


def test_a_negative_scalar_index_wraps_as_in_python(device: str) -> None:
    """``x[r - 1, :]`` at r = 0 is the last row in PyTorch (and ref mode); compiled code read
    0, so every candidate disagreed (NoWorkingConfigError; fuzzing, session 34)."""
    x = torch.arange(12.0, device=device).view(3, 4)
    assert torch.equal(previous_row(x), torch.roll(x, 1, dims=0))


@tc.kernel(static_shapes=True)
def row_before(x: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    (n,) = rows.size()
    out = torch.empty([n, x.size(1)], dtype=x.dtype, device=x.device)
    for tn in tc.tile(n, block_size=1):
        r = rows[tn.begin]
        out[tn.begin, :] = x[r - 1, :]
    return out


def test_a_negative_loaded_scalar_index_wraps_in_ref_mode_too(device: str) -> None:
    """A scalar loaded from memory indexes as an int: ref mode refused r - 1 = -1 as a
    negative tensor index, so the tuner checked configs for running only and warned that the
    compiled code "reads 0 there" (it wraps, as torch does; fuzz 53b)."""
    x = torch.arange(40.0, device=device).view(10, 4)
    rows = torch.tensor([0, 3, 5], device=device)
    assert torch.equal(row_before.run_ref(x, rows), x[rows - 1])
    assert torch.equal(row_before(x, rows), x[rows - 1])


@tc.kernel(static_shapes=True)
def add_vectors(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in tc.tile(x.size(0)):
        out[t] = x[t] + y[t]
    return out


@pytest.mark.parametrize(("value", "kind"), [(3.0, "float"), (3, "int")])
def test_a_number_passed_for_a_tensor_is_named(value: object, kind: str) -> None:
    """``add(x, 3.0)`` said 'indexing a tile with Tile(BLOCK_0)'; ``add(x, 3)`` "TypeError: 'int'
    object is not subscriptable" (neither named the argument)."""
    with pytest.raises(DeviceCodeError, match=f"'y' is a host {kind} .*not a tensor"):
        add_vectors(torch.randn(8), value)


@tc.kernel(config=CONFIG)
def scale_into_(out: torch.Tensor, x: torch.Tensor) -> None:
    m, n = x.size()
    for tm, tn in tc.tile([m, n]):
        out[tm, tn] = x[tm, tn] * 2.0


@tc.kernel(config=CONFIG)
def count_into(out: torch.Tensor, x: torch.Tensor) -> None:
    m, n = x.size()
    for tm, tn in tc.tile([m, n]):
        tc.atomic_add(out, [tm, tn], x[tm, tn])


@pytest.mark.parametrize("kernel", [scale_into_, count_into], ids=["store", "atomic"])
def test_an_expanded_output_is_refused_where_stored(kernel: tc.Kernel, device: str) -> None:
    """Storing into an expand()ed view (stride 0) would race: every program writes one row's
    memory (torch refuses such a write too). Reading an expanded input, and atomics (meant to
    meet in memory), are fine."""
    x = torch.randn(4, 3, device=device)
    row = torch.zeros(1, 3, device=device)
    if kernel is scale_into_:
        with pytest.raises(ArgumentError, match="argument 'out' is written, but it is an expanded"):
            kernel(row.expand(4, 3), x)
        assert not row.any()  # nothing ran
        out = torch.empty(4, 3, device=device)
        kernel(out, row.expand(4, 3) + 0 * x[:1])  # an input may be expanded
        kernel(out, x)
        torch.testing.assert_close(out, x * 2)
    else:
        kernel(row.expand(4, 3), x)
        torch.testing.assert_close(row, x.sum(0, keepdim=True))


def test_tensors_in_a_list_decide_the_device_and_are_checked() -> None:
    """A kernel whose tensors all come in a list ran as a CPU kernel on the GPU machine (the
    device came from direct tensor arguments only); their dtypes went unchecked."""
    from tilecraft.runtime.validate import check_tensor_args

    meta = [torch.empty(2, device="meta"), torch.empty(2, device="meta")]
    assert check_tensor_args("k", {"xs": meta, "n": 3}, None) == "meta"
    with pytest.raises(ArgumentError, match=r"xs\[0\]=meta.*y=cpu"):
        check_tensor_args("k", {"xs": meta, "y": torch.empty(2, device="cpu")}, None)
    with pytest.raises(ArgumentError, match=r"argument 'xs\[1\]' is a .*complex64"):
        check_tensor_args("k", {"xs": [meta[0], torch.empty(2, dtype=torch.complex64)]}, None)


@tc.kernel(static_shapes=True)
def head_row_sums(x: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
    m, _ = x.size()
    out = torch.empty([m], dtype=torch.float32, device=x.device)
    for tm in tc.tile(m):
        acc = tc.zeros([tm], dtype=torch.float32)
        for tk in tc.tile(n):  # a count kept on the device
            acc = acc + x[tm, tk].sum(1)
        out[tm] = acc
    return out


def test_a_0d_tensor_bounds_an_inner_loop() -> None:
    """The loop's end is loaded, as ``n[()]`` would be: codegen met the host tensor itself
    ('no device-side attribute node') and every config failed alike (fuzz 54b). A [1] tensor
    is refused at the line, naming its element."""
    x = torch.randn(7, 30)
    torch.testing.assert_close(head_row_sums(x, torch.tensor(13)), x[:, :13].sum(1))
    with pytest.raises(
        DeviceCodeError, match=r"(?s)test_validate.py:\d+.*hint: read its element: n\[0\]"
    ):
        head_row_sums(x, torch.tensor([13]))
