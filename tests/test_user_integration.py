"""Kernels in users' PyTorch code (fuzzing, session 49): in-place kernels follow torch's in-place
rules (version counter, inference tensors), argument mistakes are located errors on every path
(autograd, torch.compile), kernels copy and pickle as functions, a method is refused when
decorated, and a backward registered after torch.compile traced a call is used."""

from __future__ import annotations

import copy
import io
import pickle

import pytest
import torch
import torch.nn.functional as F

import tilecraft as tc
from tilecraft.errors import ArgumentError, ConfigError, ShapeError


@tc.kernel
def scale_inplace(w: torch.Tensor, s: float) -> None:
    (m,) = w.size()
    for tm in tc.tile(m):
        w[tm] = w[tm] * s


@tc.kernel
def add_scaled(x: torch.Tensor, y: torch.Tensor, s: float = 1.0) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        out[tm, :] = x[tm, :] + y[tm, :] * s
    return out


add_scaled.register_backward(lambda ctx, g: (g, g, None))


@tc.kernel
def square(x: torch.Tensor) -> torch.Tensor:
    (m,) = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        out[tm] = x[tm] * x[tm]
    return out


class HoldsKernel(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.act = square
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(x)


def test_an_inplace_kernel_bumps_the_version_autograd_checks(device: str) -> None:
    """The kernel overwrote a tensor autograd had saved, and backward silently used the new
    values (x.grad off by up to 5); torch's own in-place op makes backward raise."""
    x = torch.randn(37, device=device, requires_grad=True)
    w = torch.randn(37, device=device, requires_grad=True)
    y = (x * w).sum()  # saves w
    for call in range(2):  # the first call, then the fast path
        before = w._version
        with torch.no_grad():
            scale_inplace(w, 1.5)
        assert w._version > before, f"call {call}"
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


def test_writing_an_inference_tensor_outside_inference_mode_is_refused(device: str) -> None:
    with torch.inference_mode():
        w = torch.ones(20, device=device)
    with pytest.raises(ArgumentError, match="'w' is an inference tensor") as info:
        scale_inplace(w, 2.0)
    assert "test_user_integration.py" in str(info.value)
    assert torch.equal(w, torch.ones(20, device=device))  # nothing was written
    with torch.inference_mode():
        scale_inplace(w, 2.0)
    assert torch.equal(w, torch.full((20,), 2.0, device=device))


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda x, y: add_scaled(x, y, scale=3.0), "unexpected keyword argument 'scale'"),
        (lambda x, y: add_scaled(x, y, 2.0, s=3.0), "multiple values for argument 's'"),
        (lambda x, y: add_scaled(x, y, 1.0, 2.0), "takes 3 arguments but 4 were given"),
        (lambda x, y: add_scaled(x), "missing a required argument: 'y'"),
    ],
)
def test_argument_mistakes_are_errors_when_inputs_need_grad(call: object, message: str) -> None:
    """The autograd path took every parameter from kwargs by name: a misspelled keyword ran
    with the default, a repeated one with the positional value, an extra argument gave
    'zip() argument 2 is longer'."""
    x = torch.randn(5, 8, requires_grad=True)
    with pytest.raises(ArgumentError, match=message):
        call(x, torch.randn(5, 8))  # type: ignore[operator]


def test_argument_mistakes_under_torch_compile_are_the_kernels_errors() -> None:
    fn = torch.compile(lambda x, y: add_scaled(x, y, scale=3.0), backend="eager")
    with pytest.raises(ArgumentError, match="unexpected keyword argument 'scale'"):
        fn(torch.randn(5, 8), torch.randn(5, 8))
    strict = torch.compile(
        lambda x, y: add_scaled(x, y, 2.0, s=3.0), backend="eager", fullgraph=True
    )
    with pytest.raises(Exception, match="multiple values for argument 's'"):
        strict(torch.randn(5, 8), torch.randn(5, 8))


def test_host_code_failing_on_an_input_that_needs_grad_is_located() -> None:
    """A 1-D x gave a bare 'ValueError: not enough values to unpack' where a plain call names
    the host line and the arguments."""
    x = torch.randn(8, requires_grad=True)
    with pytest.raises(ArgumentError, match="host code failed on these arguments") as info:
        add_scaled(x, torch.randn(5, 8))
    assert "test_user_integration.py" in str(info.value)


def test_kernels_copy_and_pickle_as_functions(device: str) -> None:
    """After one call, deepcopy of a module holding a kernel raised 'cannot pickle module',
    torch.save a misleading PicklingError."""
    model = HoldsKernel()
    x = torch.randn(37, device=device)
    torch.testing.assert_close(model(x), x * x)
    twin = copy.deepcopy(model)
    assert twin.act is square and twin.lin is not model.lin
    assert pickle.loads(pickle.dumps(square)) is square
    buffer = io.BytesIO()
    torch.save(model, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)
    assert loaded.act is square


def test_a_kernel_not_importable_by_name_says_why_it_cannot_pickle() -> None:
    @tc.kernel
    def local_square(x: torch.Tensor) -> torch.Tensor:
        (m,) = x.size()
        out = torch.empty_like(x)
        for tm in tc.tile(m):
            out[tm] = x[tm] * x[tm]
        return out

    with pytest.raises(pickle.PicklingError, match="not importable as .*define it at module"):
        pickle.dumps(local_square)
    assert copy.deepcopy(local_square) is local_square


def test_a_method_kernel_is_refused_where_it_is_defined(device: str) -> None:
    """obj.k(x) bound x to self: 'missing a required argument: x'."""
    with pytest.raises(ConfigError, match="on the method .*does not bind 'self'") as info:

        class Ops(torch.nn.Module):
            @tc.kernel
            def double(self, x: torch.Tensor) -> torch.Tensor:
                (m,) = x.size()
                out = torch.empty_like(x)
                for tm in tc.tile(m):
                    out[tm] = x[tm] * 2
                return out

    assert "@staticmethod" in (info.value.hint or "")

    class StaticOps:
        @staticmethod
        @tc.kernel
        def double(x: torch.Tensor) -> torch.Tensor:
            (m,) = x.size()
            out = torch.empty_like(x)
            for tm in tc.tile(m):
                out[tm] = x[tm] * 2
            return out

    x = torch.randn(9, device=device)
    torch.testing.assert_close(StaticOps().double(x), 2 * x)


def test_a_backward_registered_after_compile_is_used(device: str) -> None:
    """torch.compile kept raising 'no backward' after register_backward (its guards cannot see
    the registration); only torch._dynamo.reset() cleared it."""

    @tc.kernel
    def cube(x: torch.Tensor) -> torch.Tensor:
        (m,) = x.size()
        out = torch.empty_like(x)
        for tm in tc.tile(m):
            out[tm] = x[tm] * x[tm] * x[tm]
        return out

    model = torch.compile(lambda x: cube(x) + 1, backend="aot_eager")
    x0 = torch.randn(11, device=device)
    with pytest.raises(Exception, match="no backward"):
        model(x0.clone().requires_grad_(True)).sum().backward()
    with pytest.warns(RuntimeWarning, match="torch.compiler.reset"):
        cube.register_backward(lambda ctx, g: (3 * g * ctx.x * ctx.x,), setup_context=_keep_x)
    x = x0.clone().requires_grad_(True)
    model(x).sum().backward()
    torch.testing.assert_close(x.grad, 3 * x0 * x0)


def _keep_x(ctx: object, inputs: tuple[torch.Tensor], output: torch.Tensor) -> None:
    ctx.x = inputs[0]  # type: ignore[attr-defined]


@tc.kernel
def twice(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    (m,) = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        out[tm] = x[tm] * 2
    return out, out.view(-1)


twice.register_backward(lambda ctx, g1, g2: (2 * g1 + 2 * g2,))


def test_returns_that_share_memory_are_a_located_error_as_an_op(device: str) -> None:
    """torch's raw custom-op error named an internal op and no line."""
    x = torch.randn(7, device=device)
    plain = twice(x)  # eager calls may return views of one tensor
    assert plain[0].data_ptr() == plain[1].data_ptr()
    with pytest.raises(ArgumentError, match="return values 0 and 1 share memory") as info:
        twice(x.clone().requires_grad_())
    assert "test_user_integration.py" in str(info.value)
    # (Dynamo wraps what its constant-folded op lookup raises; the message is ours)
    with pytest.raises(Exception, match="return values 0 and 1 share memory"):
        torch.compile(twice, backend="eager", fullgraph=True)(x)


class Squares(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return square(x) + 1


def test_torch_jit_trace_records_the_kernel_after_it_ran(device: str) -> None:
    """Under no_grad a traced call launched the kernel (its sizes became tensors: a misleading
    'bounds must be host ints' error), and a warm kernel's fast path ran outside the trace."""
    model = Squares()
    x = torch.randn(37, device=device)
    torch.testing.assert_close(model(x), x * x + 1)  # warm: the fast path has a launcher
    with torch.no_grad():
        traced = torch.jit.trace(model, (x,), check_trace=False)
    y = torch.randn(37, device=device)
    torch.testing.assert_close(traced(y), y * y + 1)


@tc.kernel
def times(x: torch.Tensor, a: float) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in tc.tile(x.size(0)):
        out[t] = x[t] * a
    return out


@tc.kernel
def times_plus_one(x: torch.Tensor) -> torch.Tensor:
    y = times(x, 2.0)  # host code calling another kernel
    z = torch.empty_like(x)
    for t in tc.tile(x.size(0)):
        z[t] = y[t] + 1
    return z


def test_host_code_may_call_another_kernel(device: str) -> None:
    """The inner kernel got the outer's meta stand-ins while the outer was traced and said
    "argument 'x' is a meta tensor", blaming the user's CPU tensor."""
    x = torch.randn(9, device=device)
    torch.testing.assert_close(times_plus_one(x), x * 2 + 1)
    torch.testing.assert_close(times_plus_one(x), x * 2 + 1)  # the fast path
    meta = times_plus_one(torch.empty(5, device="meta"))
    assert meta.is_meta and meta.shape == (5,)


@tc.kernel(static_shapes=True)
def add_into(x: torch.Tensor, y: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    for tm, tn in tc.tile([m, n]):
        out[tm, tn] = x[tm, tn] + y[tm, tn]
    return out


def test_calls_on_meta_tensors_check_what_real_calls_check() -> None:
    """A call on meta tensors ran the host code alone: a too-short or wrongly ranked argument
    returned a meta output (torch's meta ops check shapes); and two meta arguments, each with
    data_ptr() 0, were refused as 'partly overlapping' views when one is written."""
    meta = torch.device("meta")
    x, out = torch.empty(5, 7, device=meta), torch.empty(5, 7, device=meta)
    assert add_into(x, torch.empty(5, 7, device=meta), out).shape == (5, 7)
    assert add_into(torch.empty(4, 7, device=meta), torch.empty(4, 7, device=meta), out).is_meta
    with pytest.raises(ShapeError, match="tensor 'y' has size 4 along dim 0"):
        add_into(x, torch.empty(4, 7, device=meta), out)
    with pytest.raises(ShapeError, match="too many indices for 'y'"):
        add_into(x, torch.empty(7, device=meta), out)


@tc.kernel
def checked_scale(x: torch.Tensor, a: float) -> torch.Tensor:
    if a < 0:
        raise ValueError(f"a must be >= 0, got {a}")
    out = torch.empty_like(x)
    for t in tc.tile(x.size(0)):
        out[t] = x[t] * a
    return out


def test_the_kernels_own_raise_reaches_the_caller_as_it_is(device: str) -> None:
    """A first call wrapped the user's ValueError in an ArgumentError (with a hint about
    shapes), later calls did not: `except ValueError` worked sometimes."""
    x = torch.randn(8, device=device)
    with pytest.raises(ValueError, match="a must be >= 0"):
        checked_scale(x, -1.0)  # a first call: traced here
    torch.testing.assert_close(checked_scale(x, 2.0), 2 * x)
    with pytest.raises(ValueError, match="a must be >= 0"):
        checked_scale(x, -1.0)  # compiled host code


@tc.kernel(static_shapes=True)
def layer_norm_upcast(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    y = torch.empty_like(x)
    for tm in tc.tile(m):
        h = x[tm, :].float()
        y[tm, :] = F.layer_norm(h, (n,), w.float(), b.float(), 1e-5).to(y.dtype)
    return y


def test_a_whole_host_tensor_converts_in_device_code(device: str) -> None:
    """`w.float()` of a weight inside a device loop was refused ('host tensor has no
    device-side method'); `w` alone worked, as the whole tensor."""
    x = torch.randn(5, 33, device=device).bfloat16()
    w = torch.randn(33, device=device).bfloat16()
    b = torch.randn(33, device=device).bfloat16()
    want = F.layer_norm(x.float(), (33,), w.float(), b.float(), 1e-5).bfloat16()
    torch.testing.assert_close(layer_norm_upcast(x, w, b), want, rtol=2e-2, atol=2e-2)


TABLE = torch.arange(8.0)


@tc.kernel(static_shapes=True)
def scaled_by_table(x: torch.Tensor) -> torch.Tensor:
    w = x * torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0])  # made without device=
    out = torch.empty_like(x)
    for t in tc.tile(x.size(0)):
        out[t] = w[t] + 1
    return torch.sum(out) * TABLE  # a global tensor in host code


def test_host_code_may_use_its_own_tensors_on_the_arguments_device(device: str) -> None:
    """Host code mixing the arguments with a global tensor or one made without device= (all
    on the CPU, where eager runs it) failed while traced on meta stand-ins: 'Tensor on device
    cpu is not on the expected device meta!', with a hint about shapes. Beside CUDA arguments
    those CPU tensors are refused, as eager refuses them, with a hint that says so."""
    x = torch.randn(8, device=device)
    if device == "cpu":
        want = torch.sum(x * torch.arange(1.0, 9.0) + 1) * TABLE
        torch.testing.assert_close(scaled_by_table(x), want)
        return
    with pytest.raises(ArgumentError, match="another device") as info:
        scaled_by_table(x)
    assert "device=x.device" in str(info.value)


@tc.kernel(static_shapes=True)
def tree_sum(x: torch.Tensor) -> torch.Tensor:
    n = x.size(0)
    if n == 1:
        return x.clone()
    half = torch.empty([n // 2], dtype=x.dtype, device=x.device)
    for t in tc.tile(n // 2):
        half[t] = x[2 * t.index] + x[2 * t.index + 1]
    return tree_sum(half)  # the kernel itself, on its own shape


def test_host_code_may_call_its_own_kernel(device: str) -> None:
    """Inside the rewritten host function the kernel's name was that function, so a recursive
    call ran as the caller's device loop launched again ('x changed: shape (8,) then (4,)')."""
    x = torch.arange(8.0, device=device)
    torch.testing.assert_close(tree_sum(x), x.sum().reshape(1))
    torch.testing.assert_close(tree_sum(x), x.sum().reshape(1))  # the fast path
