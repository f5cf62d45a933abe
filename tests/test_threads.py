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


@pytest.mark.interpreter
def test_a_child_forked_while_a_thread_holds_the_launch_lock_runs_kernels() -> None:
    """A DataLoader-style fork while another thread was inside a launch: the child inherited
    the interpreter's launch lock held by a thread it does not have, and its first launch
    waited forever (fuzz round 55b)."""
    import multiprocessing
    import os

    from tilecraft.runtime import direct_launch

    x = torch.randn(4, 32)
    w = torch.randn(32)
    threaded_rms(x, w, 1e-6)  # compiled: the child only launches
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with direct_launch._INTERPRETER_LOCK:
            held.set()
            release.wait(30)

    thread = threading.Thread(target=hold)
    thread.start()
    held.wait(10)
    try:
        child = multiprocessing.get_context("fork").Process(
            target=lambda: os._exit(
                0
                if torch.allclose(threaded_rms(x, w, 1e-6), eager_rms(x, w, 1e-6), atol=1e-5)
                else 3
            )
        )
        child.start()
        child.join(60)
        hung = child.is_alive()
        if hung:
            child.kill()
            child.join()
    finally:
        release.set()
        thread.join()
    assert not hung and child.exitcode == 0, (hung, child.exitcode)
