"""The autotuner on a real GPU (marker ``gpu``: skipped without CUDA).

Discovery and a quick search on rms_norm (bf16 8192x8192), the seed-000 layer-norm backward at
4608x40920 bf16 with no config and no baseline given, and device faults injected into workers
(``TILECRAFT_TEST_FAULT``) that must leave this process's CUDA context healthy. Prints timings
(run with ``-s``).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
import torch

from tilecraft.autotune import cache
from tilecraft.autotune.candidates import candidates
from tilecraft.autotune.classify import Category
from tilecraft.autotune.compare import compare
from tilecraft.autotune.discover import discover_default, run_discovery
from tilecraft.autotune.search import tune

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `examples`
import autotune_kernels as K  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILECRAFT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TILECRAFT_TEST_FAULT", raising=False)


def test_gpu_rms_norm_discover_and_quick_tune() -> None:
    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(8192, 8192, device="cuda", generator=gen).to(torch.bfloat16)
    w = torch.randn(8192, device="cuda", generator=gen).to(torch.bfloat16)
    bound = K.rms_norm.bind((x, w))
    start = time.perf_counter()
    found = run_discovery(bound, (x, w))
    discovered = time.perf_counter() - start
    print(f"\nrms_norm discovery: {discovered:.1f}s rank {found.rank} {found.config}")
    start = time.perf_counter()
    assert discover_default(bound, (x, w)) == found.config
    assert time.perf_counter() - start < 0.1
    start = time.perf_counter()
    config = tune(bound, (x, w), effort="quick", budget_s=30, stream=sys.stdout)
    tuned = time.perf_counter() - start
    out = bound.run(bound.compile_config(config), x, w)
    assert compare(out, K.rms_norm.run_ref(x, w)).ok
    entry = next(e for e in cache.ls() if e.kind == "best")
    print(f"rms_norm quick tune: {tuned:.1f}s; {entry.path.read_text()[:400]}")


@pytest.mark.parametrize(
    "m,n", [(4608, 40920), (1152, 16384), (2048, 8192), (4096, 128), (37, 5000)]
)
def test_gpu_seed_000_layer_norm_bwd(m: int, n: int) -> None:
    """No config and no baseline given: discovery, then a quick search (20 s budget); both
    results match PyTorch autograd's layer-norm backward."""
    from examples.layer_norm import layer_norm_bwd, make_inputs, reference

    x, weight, bias, grad_out = make_inputs((m, n), torch.bfloat16, "cuda", 0)
    _, mean, rstd, dx, dw, db = reference(x, weight, bias, grad_out)
    args = (grad_out, x, mean, rstd, weight, True)
    bound = layer_norm_bwd.bind(args)
    start = time.perf_counter()
    found = run_discovery(bound, args, timeout_s=120)
    print(f"\nlayer_norm_bwd {m}x{n} discovery: {time.perf_counter() - start:.1f}s {found.config}")
    for a in found.attempts:
        print(f"  {a.category}: {a.reason[:200]} ({a.elapsed_s:.1f}s)")
    start = time.perf_counter()
    tuned = tune(bound, args, effort="quick", budget_s=20, stream=sys.stdout)
    print(f"layer_norm_bwd {m}x{n} quick tune: {time.perf_counter() - start:.1f}s")
    tolerances = {"bfloat16": (5e-2, 5e-2)}
    for config in (found.config, tuned):
        out = bound.run(bound.compile_config(config), *args)
        result = compare(out, (dx, dw, db), tolerances=tolerances)
        errors = [(o.float() - r.float()).abs().max().item() for o, r in zip(out, (dx, dw, db))]
        print(f"vs autograd ({config}): max abs err dx/dw/db {errors}: {result.summary()}")
        assert result.ok


def test_gpu_device_faults_leave_the_parent_healthy(monkeypatch: pytest.MonkeyPatch) -> None:
    x = torch.randn(512, 1024, device="cuda")
    w = torch.randn(1024, device="cuda")
    bound = K.rms_norm.bind((x, w))
    configs, _ = candidates(bound.config_spec)
    keys = ",".join(c.key() for c in configs[:1])
    crash = ",".join(c.key() for c in configs[1:2])
    monkeypatch.setenv("TILECRAFT_TEST_FAULT", f"fault:{keys};crash:{crash}")
    found = run_discovery(bound, (x, w), max_candidates=4, workers=2, use_cache=False)
    cats = [a.category for a in found.attempts[:2]]
    assert cats == [Category.RUNTIME_FAULT, Category.RUNTIME_FAULT], cats
    assert found.config == configs[2]
    assert float((x + 1).sum()) == pytest.approx(float(x.sum()) + x.numel(), rel=1e-3)
