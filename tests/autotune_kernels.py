"""Module-level kernels (isolated workers re-import them from here) and helpers for
tests/test_autotune*.py."""

from __future__ import annotations

import torch

import tilecraft as tc


@tc.kernel
def rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        xt = x[tm, :].to(torch.float32)
        r = torch.rsqrt(torch.mean(xt * xt, dim=-1) + eps)
        out[tm, :] = (xt * r[:, None] * w[None, :].to(torch.float32)).to(out.dtype)
    return out


@tc.kernel
def scale_(x: torch.Tensor, factor: float) -> None:
    """In place: the result is the mutated argument."""
    (n,) = x.size()
    for t in tc.tile(n):
        x[t] = x[t] * factor


def _wrong_baseline(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x + y + 1.0


@tc.kernel(baseline=_wrong_baseline)
def add_wrong_baseline(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Every config disagrees with this baseline: discovery must raise NoWorkingConfigError."""
    out = torch.empty_like(x)
    for t in tc.tile(x.size(0)):
        out[t] = x[t] + y[t]
    return out


def rms_inputs(m: int = 37, n: int = 100) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)  # a CPU generator: the same values on every device
    x, w = (
        torch.randn(m, n, generator=gen, device="cpu"),
        torch.randn(n, generator=gen, device="cpu"),
    )
    device = torch.get_default_device()
    return x.to(device), w.to(device)


def faults(**kinds: list[tc.Config]) -> str:
    """A ``TILECRAFT_TEST_FAULT`` value: fault kind -> the configs it hits."""
    return ";".join(f"{kind}:{','.join(c.key() for c in cfgs)}" for kind, cfgs in kinds.items())


def runs_correctly(kernel: tc.Kernel, config: tc.Config, *args: object) -> bool:
    """Compile ``config`` in this process, run it, and compare with ref mode."""
    from tilecraft.autotune.compare import compare

    bound = kernel.bind(args)
    out = bound.run(bound.compile_config(config), *args)
    return compare(out, kernel.run_ref(*args)).ok


@tc.kernel(static_shapes=True)
def grid_row_max(x: torch.Tensor) -> torch.Tensor:
    """Row maxima with the running max started as a Python float: compiles, but eager PyTorch
    rejects Tensor.maximum(float) (the accuracy baseline cannot run; ref mode takes numbers
    in torch.maximum(float, tensor), not in a tensor's methods)."""
    r, c = x.size()
    out = torch.empty([r], dtype=torch.float32, device=x.device)
    for i in tc.grid(r):
        m = float("-inf")
        for tcol in tc.tile(c):
            m = torch.amax(x[i, tcol].to(torch.float32)).maximum(m)
        out[i] = m
    return out
