"""Calls of kernels from several threads at once: first calls (trace, discovery, cache) and
later ones, at different shapes and dtypes, all give the eager result
(runtime/direct_launch.SerializedKernel under the interpreter)."""

from __future__ import annotations

import threading

import pytest
import torch

import tilecraft as tc
from tilecraft.autotune import cache


@tc.kernel(static_shapes=True)
def threaded_rms(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        xt = x[tm, :].float()
        r = torch.rsqrt((xt * xt).mean(-1) + eps)
        out[tm, :] = (xt * r[:, None] * w[None, :].float()).to(out.dtype)
    return out


def eager_rms(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    xt = x.float()
    return (xt * torch.rsqrt((xt * xt).mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype)


def test_concurrent_calls_from_threads_match_eager(
    device: str, tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under the interpreter 7 of 24 such calls raised raw InterpreterErrors, and the tuner
    cached the heuristic default as failed."""
    monkeypatch.setenv("TILECRAFT_CACHE_DIR", str(tmp_path))
    gen = torch.Generator().manual_seed(0)
    inputs = [
        (torch.randn(37, 100, generator=gen), torch.randn(100, generator=gen), 1e-5),
        (torch.randn(5, 300, generator=gen).bfloat16(), torch.randn(300, generator=gen).bfloat16(), 1e-6),
        (torch.randn(300, 16, generator=gen).t(), torch.randn(300, generator=gen), 1e-5),
        (torch.randn(64, 64, generator=gen).half(), torch.randn(64, generator=gen).half(), 1e-3),
    ]  # fmt: skip
    inputs = [(x.to(device), w.to(device), eps) for x, w, eps in inputs]
    failures: list[str] = []

    def worker(i: int) -> None:
        for rep in range(4):
            x, w, eps = inputs[(i + rep) % len(inputs)]
            try:
                got = threaded_rms(x, w, eps)
                torch.testing.assert_close(got, eager_rms(x, w, eps), rtol=2e-2, atol=2e-2)
            except Exception as exc:  # collected: an assert in a thread would be lost
                failures.append(f"thread {i} call {rep}: {type(exc).__name__}: {exc}"[:400])

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    entries = cache.ls("threaded_rms")
    assert entries and all("default failed" not in e.describe() for e in entries)
