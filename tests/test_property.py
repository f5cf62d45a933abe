"""Property test: example kernels against eager PyTorch in the interpreter over drawn shapes
(0, 1, primes, 2^k +- 1), dtypes, layouts (transposed, sliced, expanded, offset views), scalars
and NaN/Inf placements. Bounded here; ``--run-slow`` runs a larger sample."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from examples.add import add
from examples.rms_norm import rms_norm_fwd
from examples.softmax import softmax
from examples.sum import sum_last
from tilecraft.autotune.compare import tolerance_for

SIZES = [0, 1, 2, 3, 5, 7, 13, 17, 31, 33, 63, 65, 127, 129]
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
LAYOUTS = ["contiguous", "transposed", "sliced", "expanded", "offset"]
SPECIALS = [None, float("nan"), float("inf"), float("-inf")]


def _tensor(
    m: int, n: int, dtype: torch.dtype, layout: str, seed: int, special: float | None
) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    if layout == "transposed":
        x = torch.randn(n, m, generator=g).t()
    elif layout == "sliced":
        x = torch.randn(m, 2 * n + 1, generator=g)[:, 1::2]
    elif layout == "expanded":
        x = torch.randn(1, n, generator=g).expand(m, n)
    elif layout == "offset":
        x = torch.randn(m + 2, n + 3, generator=g)[1 : m + 1, 3 : n + 3]
    else:
        x = torch.randn(m, n, generator=g)
    x = x.to(dtype)
    if special is not None and x.numel() and layout != "expanded":
        x[seed % m, (seed // 7) % n] = special
    assert x.shape == (m, n)
    return x


def _run(kernel: Any, *args: Any) -> Any:
    """The kernel's heuristic default config, compiled and run (no discovery per shape)."""
    bound = kernel.bind(args)
    program = bound.compile_config(bound.config_spec.default())
    return bound.run(program, *args)


def _rms(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    xf = x.float()
    out = xf * torch.rsqrt((xf * xf).mean(-1, keepdim=True) + eps) * w.float()
    return out.to(x.dtype)


CASES: dict[str, tuple[Callable[..., Any], Callable[..., torch.Tensor]]] = {
    "add": (lambda x, y, s: _run(add, x, y), lambda x, y, s: x + y),
    "softmax": (
        lambda x, y, s: _run(softmax, x),
        lambda x, y, s: torch.softmax(x.float(), dim=-1).to(x.dtype),
    ),
    "rms_norm": (
        lambda x, y, s: _run(rms_norm_fwd, x, y[0].contiguous(), s)[0],
        lambda x, y, s: _rms(x, y[0], s),
    ),
    "sum_last": (
        lambda x, y, s: _run(sum_last, x),
        lambda x, y, s: x.float().sum(-1).to(x.dtype),
    ),
}


@st.composite
def _inputs(draw: st.DrawFn) -> tuple[str, torch.Tensor, torch.Tensor, float]:
    name = draw(st.sampled_from(sorted(CASES)))
    m, n = draw(st.sampled_from(SIZES)), draw(st.sampled_from(SIZES))
    if name == "rms_norm":
        m = max(m, 1)  # w is y's first row
    dtype = draw(st.sampled_from(DTYPES))
    seed = draw(st.integers(0, 2**16))
    special = draw(st.sampled_from(SPECIALS))
    x = _tensor(m, n, dtype, draw(st.sampled_from(LAYOUTS)), seed, special)
    y = _tensor(m, n, dtype, draw(st.sampled_from(LAYOUTS)), seed + 1, None)
    scalar = draw(st.sampled_from([1e-5, 1e-6, 0.5, 3.0]))
    return name, x, y, scalar


def _check(case: tuple[str, torch.Tensor, torch.Tensor, float]) -> None:
    name, x, y, scalar = case
    kernel, eager = CASES[name]
    got, want = kernel(x, y, scalar), eager(x, y, scalar)
    rtol, atol = tolerance_for(x.dtype)
    if name == "sum_last":  # a sum of n values: its rounding grows with n
        atol *= max(1, x.shape[1]) ** 0.5 * 4
    torch.testing.assert_close(got, want, rtol=rtol, atol=atol, equal_nan=True)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_inputs())
def test_examples_match_eager(case: tuple[str, torch.Tensor, torch.Tensor, float]) -> None:
    _check(case)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_inputs())
def test_examples_match_eager_long(case: tuple[str, torch.Tensor, torch.Tensor, float]) -> None:
    _check(case)
