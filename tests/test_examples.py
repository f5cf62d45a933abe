"""Every example kernel against its eager reference: the default config, random configs, ref mode.

One test per (kernel, shape, dtype, mode). ``mode`` is ``default`` (the ConfigSpec default),
``random<seed>`` (``config_spec.random(random.Random(seed))``, fp32 and bf16 only, to keep the
interpreter run under ~5 minutes; seeds from ``N_RANDOM_DEFAULT`` on are marked ``slow`` and run
with ``--run-slow``) or ``ref`` (``Kernel.run_ref``).
The kernel under test runs in that mode; the module's other kernels (e.g. the forward pass that
feeds a backward kernel) run in ref mode. Known tilecraft bugs are strict xfails
(see /tmp/tc_bugs_examples.md), listed in ``known_bug``: they turn into failures once fixed.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

import tilecraft as tc

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `examples` lives at the repo root
from examples import EXAMPLES  # noqa: E402

N_RANDOM = 5
N_RANDOM_DEFAULT = 2  # random seeds in a default run; the rest are a `slow` sweep (--run-slow)
MODES = ["default", *(f"random{i}" for i in range(N_RANDOM)), "ref"]
# random configs run for these dtypes only (the interpreter is slow); fp16 gets default + ref
RANDOM_DTYPES = {torch.float32, torch.bfloat16}
TOLERANCES = {  # (rtol, atol relative to the reference's largest magnitude)
    torch.float32: (1e-4, 1e-4),
    torch.float16: (2e-2, 2e-2),
    torch.bfloat16: (2e-2, 2e-2),
}


HAS_CUDA = torch.cuda.is_available()


def known_bug(kernel: str, dtype: torch.dtype, mode: str) -> str | None:
    """The open tilecraft bug that makes this case fail, if any (bugs found while writing this
    suite are fixed and have regression tests at the end of the file)."""
    return None


def _cases() -> list[Any]:
    cases = []
    for module in EXAMPLES.values():
        for kernel_name in module.KERNELS:
            for shape in module.TEST_SHAPES:
                for dtype in module.DTYPES:
                    for mode in MODES:
                        if mode.startswith("random") and dtype not in RANDOM_DTYPES:
                            continue
                        dt = str(dtype).removeprefix("torch.")
                        case_id = f"{kernel_name}-{'x'.join(map(str, shape))}-{dt}-{mode}"
                        bug = known_bug(kernel_name, dtype, mode)
                        marks = [pytest.mark.xfail(strict=True, reason=bug)] if bug else []
                        if mode.startswith("random") and int(mode[6:]) >= N_RANDOM_DEFAULT:
                            marks.append(pytest.mark.slow)
                        cases.append(
                            pytest.param(
                                module, kernel_name, shape, dtype, mode, id=case_id, marks=marks
                            )
                        )
    return cases


def _flatten(out: Any) -> list[torch.Tensor]:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def assert_outputs_close(
    module: ModuleType, actual: Any, expected: Any, dtype: torch.dtype
) -> None:
    rtol, atol = getattr(module, "TOLERANCES", {}).get(dtype, TOLERANCES[dtype])
    actual_list, expected_list = _flatten(actual), _flatten(expected)
    assert len(actual_list) == len(expected_list)
    for i, (a, e) in enumerate(zip(actual_list, expected_list)):
        assert a.shape == e.shape, f"output {i}: shape {tuple(a.shape)} != {tuple(e.shape)}"
        scale = max(e.float().abs().max().item(), 1.0) if e.numel() else 1.0
        torch.testing.assert_close(
            a.float(),
            e.float(),
            rtol=rtol,
            atol=atol * scale,
            msg=lambda m, i=i: f"output {i}: {m}",
        )


def _move(value: Any, device: torch.device) -> Any:
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, (tuple, list)):
        return type(value)(_move(v, device) for v in value)
    return value


def make_call(kernel: tc.Kernel, mode: str) -> Any:
    """A ``call`` hook for ``module.run``: ``kernel`` runs in ``mode``; the module's other kernels
    run in ref mode on the CPU (the semantics, independent of the device and of configs), with
    their results moved back to the inputs' device."""

    def call(k: tc.Kernel, *args: Any) -> Any:
        if k is not kernel:
            device = next(a.device for a in args if isinstance(a, torch.Tensor))
            return _move(k.run_ref(*_move(args, torch.device("cpu"))), device)
        if mode == "ref":
            return k.run_ref(*args)
        bound = k.bind(args)
        spec = bound.config_spec
        config = spec.default() if mode == "default" else spec.random(random.Random(int(mode[6:])))
        try:
            return bound.run(bound.compile_config(config), *args)
        except Exception as exc:
            if mode != "default" and type(exc).__name__ == "OutOfResources":
                # a random point of the space may need more shared memory than this GPU has
                # (the autotuner classifies and skips those); the default config never may
                pytest.skip(f"random config over this GPU's resources: {exc}")
            raise

    return call


@pytest.mark.parametrize("module,kernel_name,shape,dtype,mode", _cases())
def test_example(
    module: ModuleType,
    kernel_name: str,
    shape: tuple[int, ...],
    dtype: torch.dtype,
    mode: str,
    device: str,
) -> None:
    inputs = module.make_inputs(shape, dtype, device, seed=0)
    expected = module.reference(*inputs)
    actual = module.run(inputs, make_call(module.KERNELS[kernel_name], mode))
    assert_outputs_close(module, actual, expected, dtype)


# -- regression tests: minimal repros of tilecraft bugs found by the examples (fixed) ------------


def test_bug1_param_named_v(device: str) -> None:
    """Generated temporaries must not shadow a parameter called `v`."""

    @tc.kernel(static_shapes=True)
    def scale_rows(x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        m, n = x.size()
        out = torch.empty_like(x)
        for tm in tc.tile(m):
            out[tm, :] = x[tm, :] * 2.0 + v[tm, :]
        return out

    x, v = torch.randn(8, 16, device=device), torch.randn(8, 16, device=device)
    torch.testing.assert_close(scale_rows(x, v), x * 2 + v)


def test_bug2_ref_block_size_one(device: str) -> None:
    """Ref mode drops a tile dim of literal block_size=1, as compiled code does."""

    @tc.kernel(static_shapes=True)
    def row_sums(x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.size()
        out = x.new_empty([b, s])
        for tb, ts in tc.tile([b, s], block_size=[1, None]):
            out[tb, ts] = torch.sum(x[tb, ts, :], dim=1)
        return out

    x = torch.randn(2, 5, 4, device=device)
    torch.testing.assert_close(row_sums(x), x.sum(-1))  # the compiled kernel is right
    torch.testing.assert_close(row_sums.run_ref(x), x.sum(-1))


def test_bug3_bf16_dot(device: str) -> None:
    """bf16 dots are right in the interpreter too."""

    @tc.kernel(static_shapes=True)
    def mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        m, k = a.size()
        _, n = b.size()
        out = torch.empty([m, n], dtype=torch.float32, device=a.device)
        for tm, tn in tc.tile([m, n]):
            acc = tc.zeros([tm, tn], dtype=torch.float32)
            for tk in tc.tile(k):
                acc = tc.dot(a[tm, tk], b[tk, tn], acc=acc)
            out[tm, tn] = acc
        return out

    a = torch.randn(32, 32, dtype=torch.bfloat16, device=device)
    b = torch.randn(32, 32, dtype=torch.bfloat16, device=device)
    torch.testing.assert_close(mm(a, b), a.float() @ b.float(), rtol=1e-4, atol=1e-3)


def test_bug4_code_cache_id_reuse() -> None:
    """The frontend's code cache never returns code of another (freed) expression."""
    import ast

    from tilecraft.frontend.interpreter import Interpreter

    class NoTracer:
        loc = None

    interp = Interpreter(NoTracer(), {"a": 10}, {}, "<repro>", 0)  # type: ignore[arg-type]
    wrong = 0
    for k in range(200):  # temporary nodes, as Interpreter.aug_assign / eval_index build them
        node = ast.fix_missing_locations(
            ast.BinOp(left=ast.Name("a", ast.Load()), op=ast.Add(), right=ast.Constant(k))
        )
        wrong += interp.eval(node) != 10 + k
        del node
    assert wrong == 0, f"{wrong}/200 evaluations ran the code of an earlier expression"
