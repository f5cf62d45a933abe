"""The autotuner (tilecraft.autotune): comparison, classification, candidates, discovery in
isolated workers (timeouts, crashes, wrong results), repro scripts, the in-process fallback.
The search, cache and progress output: tests/test_autotune_search.py.

CPU only: kernels run in Triton's interpreter, so timings only exercise the search logic. Kernels
that workers must re-import live in tests/autotune_kernels.py.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

import tilecraft as tc
from tilecraft.autotune import cache
from tilecraft.autotune.candidates import candidates, neighbors, static_check
from tilecraft.autotune.classify import (
    Attempt,
    Category,
    NoWorkingConfigError,
    classify,
    classify_exit,
    one_line,
)
from tilecraft.autotune.compare import compare, tolerance_for
from tilecraft.autotune.discover import discover_default, run_discovery

sys.path.insert(0, str(Path(__file__).parent))
import autotune_kernels as K  # noqa: E402
from autotune_kernels import faults, rms_inputs, runs_correctly  # noqa: E402


@pytest.fixture(autouse=True)
def _on_the_device(device: str) -> Iterator[None]:
    """Tensors the tests make land on the GPU where there is one (else the CPU interpreter), so
    the autotuner is tested where it runs."""
    torch.set_default_device(device)
    yield
    torch.set_default_device(None)


@pytest.fixture(autouse=True)
def _fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILECRAFT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TILECRAFT_TEST_FAULT", raising=False)
    monkeypatch.delenv("TILECRAFT_FORCE_AUTOTUNE", raising=False)
    monkeypatch.delenv("TILECRAFT_AUTOTUNE_LOG", raising=False)


# -- comparison ----------------------------------------------------------------------------
def test_compare_tolerances_by_dtype() -> None:
    e = torch.linspace(-1, 1, 100)
    assert compare(e + 1e-6, e).ok
    bad = e.clone()
    bad[7] += 1e-3
    result = compare(bad, e)
    assert not result.ok
    m = result.mismatches[0]
    assert m.name == "output" and m.index == (7,) and math.isclose(m.max_abs, 1e-3, rel_tol=1e-2)
    assert "index [7]" in result.summary()
    eb = e.to(torch.bfloat16)
    assert compare((e * 1.005).to(torch.bfloat16), eb).ok  # within bf16's 2e-2
    off = (e * 1.03).to(torch.float16)
    assert not compare(off, e.to(torch.float16), tolerances={}).ok  # fp16: 1e-2
    assert compare(off, e.to(torch.float16), tolerances={"float16": (1e-1, 1e-1)}).ok
    assert tolerance_for(torch.float32) == (1e-4, 1e-5)
    assert tolerance_for(torch.bfloat16, {torch.bfloat16: (0.5, 0.5)}) == (0.5, 0.5)


def test_compare_structures_args_and_specials() -> None:
    a = torch.tensor([1.0, float("nan"), float("inf")])
    assert compare((a, None, 3), (a.clone(), None, 3)).ok
    result = compare((a, torch.zeros(2)), (a, torch.ones(2)))
    assert [m.name for m in result.mismatches] == ["output[1]"]
    assert not compare(a, None).ok and not compare((a,), (a, a)).ok
    assert "shape" in compare(torch.zeros(2, 3), torch.zeros(3, 2)).summary()
    assert not compare(torch.tensor([1, 2]), torch.tensor([1, 3])).ok
    mutated = compare(
        None,
        None,
        actual_args=(torch.zeros(3), 2.0),
        expected_args=(torch.ones(3), 2.0),
        arg_names=("x", "factor"),
    )
    assert [m.name for m in mutated.mismatches] == ["argument 'x'"]


def test_compare_integers_allow_rare_rounding_ties() -> None:
    """Float math rounded to integers (a quantization) may land one off in a few elements;
    more of them, a bigger difference, bools and small tensors stay exact."""
    want = torch.randint(-127, 128, (100_000,), dtype=torch.int8, generator=torch.Generator())
    one_off = want.clone()
    one_off[[5, 77]] += 1
    assert compare(one_off, want).ok
    two_off = want.clone()
    two_off[5] = two_off[5] - 2 if two_off[5] > 0 else two_off[5] + 2
    assert not compare(two_off, want).ok
    many = want.clone()
    many[:101] = torch.where(many[:101] > 0, many[:101] - 1, many[:101] + 1)
    assert not compare(many, want).ok  # 101 > 1e-3 of 100000
    assert not compare(torch.tensor([1, 2] * 400), torch.tensor([1, 3] * 400)).ok  # 800 < 1000
    flags = want > 0
    flipped = flags.clone()
    flipped[3] = ~flipped[3]
    assert not compare(flipped, flags).ok


def test_compare_packed_codes_allow_spread_ties_only_where_the_kernel_rounds() -> None:
    """Two int4 codes a byte: one code off moves the byte by 1, 15, 16 or 17. Where the kernel
    rounds computed floats, such differences pass when spread like ties (under 1e-3 of the
    bytes, no line holding more than 5% of its elements, no five in a run, none with more than
    two differing neighbours); a wrong row, a wrong tile (even 2x2), a run of five, or the
    same bytes in a kernel that rounds nothing do not."""
    gen = torch.Generator().manual_seed(0)
    want = torch.randint(0, 256, (512, 256), dtype=torch.uint8, generator=gen)
    ties = want.clone()
    rows = torch.randperm(512, generator=gen)[:100]
    cols = torch.randint(0, 256, (100,), generator=gen)
    steps = torch.tensor([1, 15, 16, 17], dtype=torch.int16)[torch.arange(100) % 4]
    ties[rows, cols] = ((want[rows, cols].to(torch.int16) + steps) % 256).to(torch.uint8)
    assert compare(ties, want, rounds_floats=True).ok
    assert not compare(ties, want).ok  # nothing rounded: a count off by 16 is wrong
    assert not compare(ties, want, decides_on_floats=True).ok  # an argmax: 1e-5 of flips
    wrong_row = want.clone()
    wrong_row[7, :] ^= 0x10
    assert not compare(wrong_row, want, rounds_floats=True).ok
    wrong_tile = want.clone()
    wrong_tile[100:104, 32:36] ^= 0x10  # 16 bytes: under 1e-3 and under 5% a line, but a block
    assert not compare(wrong_tile, want, rounds_floats=True).ok
    small_tile = want.clone()
    small_tile[200:202, 40:42] ^= 0x10  # each of the four has three differing neighbours
    assert not compare(small_tile, want, rounds_floats=True).ok
    long_run = ties.clone()
    long_run[300, 10:15] ^= 0x10  # five in a row: a tile's row
    assert not compare(long_run, want, rounds_floats=True).ok
    side_by_side = ties.clone()
    side_by_side[400, 20:23] ^= 0x01  # three ties in a row of a tie-heavy row still pass
    side_by_side[401, 100] ^= 0x01
    assert compare(side_by_side, want, rounds_floats=True).ok


# -- classification ------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, phase, category",
    [
        (
            "ValueError('numel (2097152) exceeds triton maximum tensor numel (1048576)')",
            "compile",
            Category.RESOURCE,
        ),  # fmt: skip
        (
            "OutOfResources: out of resource: shared memory, Required: 262144",
            "run",
            Category.RESOURCE,
        ),  # fmt: skip
        (
            "triton.runtime.errors.OutOfResources: out of resource: registers",
            "run",
            Category.RESOURCE,
        ),  # fmt: skip
        (
            "RuntimeError: CUDA error: an illegal memory access was encountered",
            "run",
            Category.RUNTIME_FAULT,
        ),  # fmt: skip
        ("RuntimeError: CUDA error: misaligned address", "run", Category.RUNTIME_FAULT),
        (
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.96 GiB",
            "run",
            Category.RESOURCE,
        ),  # fmt: skip
        ("RuntimeError: unspecified launch failure", "run", Category.RUNTIME_FAULT),
        (
            "triton.compiler.errors.CompilationError: at 3:4: bad",
            "compile",
            Category.COMPILE_ERROR,
        ),  # fmt: skip
        ("SyntaxError: invalid syntax", "compile", Category.COMPILE_ERROR),
        ("KeyError: 'x'", "run", Category.UNKNOWN),
        ("an error in tc.register_block_size", "run", Category.UNKNOWN),
    ],
)
def test_classify(text: str, phase: str, category: Category) -> None:
    assert classify(text, phase)[0] is category


def test_classify_timeouts_exits_and_one_line() -> None:
    assert classify("", "compile", timed_out=True)[0] is Category.COMPILE_TIMEOUT
    assert classify("", "run", timed_out=True)[0] is Category.RUNTIME_TIMEOUT
    assert classify_exit(-11, "run", "")[0] is Category.RUNTIME_FAULT
    assert classify_exit(-6, "compile", "")[0] is Category.COMPILE_ERROR
    text = "CompilationError: at 30:30:\n    load = tl.load(x)\n    ^\nValueError('numel (2097152) exceeds triton maximum tensor numel (1048576)')"  # fmt: skip
    assert "exceeds" in one_line(text)


# -- candidates ----------------------------------------------------------------------------
def test_candidates_default_first_normalized_unique() -> None:
    x, w = rms_inputs(64, 1024)
    spec = K.rms_norm.bind((x, w)).config_spec
    configs, rejected = candidates(spec)
    assert configs[0] == spec.normalize(spec.default())
    assert len(configs) > 3 and all(spec.normalize(c) == c for c in configs)
    assert len({c.key() for c in configs}) == len(configs)
    assert all(static_check(spec, c) is None for c in configs)
    sizes = [spec.largest_value(c)[0] for c in configs[2:]]
    assert sizes == sorted(sizes, reverse=True)  # progressively smaller tiles
    assert neighbors(spec, configs[0])
    # the seed-000 hang: a 64x1024 fp32 tile with 1 warp is rejected before compiling
    huge = tc.Config(block_sizes=[64], reduction_loops=[None], num_warps=1)
    assert "elements per thread" in (static_check(spec, huge) or "")
    assert "exceeds" in (static_check(spec, tc.Config(block_sizes=[2048], num_warps=32)) or "")


def test_candidates_never_oversize(monkeypatch: pytest.MonkeyPatch) -> None:
    """An oversize heuristic default (a 2048x2048 fp32 tile): every candidate fits, whether
    normalize repairs the default or rejects it."""
    x, w = torch.empty(2048, 2048), torch.empty(2048)
    spec = K.rms_norm.bind((x, w)).config_spec
    oversize = tc.Config(block_sizes=[2048], reduction_loops=[None], num_warps=4)
    monkeypatch.setattr(spec, "default", lambda: oversize)
    configs, rejected = candidates(spec)
    assert configs and all(static_check(spec, c) is None for c in configs)
    assert all(spec.largest_value(c)[0] <= 1 << 20 for c in configs)


def test_candidates_record_a_rejected_default(monkeypatch: pytest.MonkeyPatch) -> None:
    x, w = rms_inputs()
    spec = K.rms_norm.bind((x, w)).config_spec
    invalid = tc.Config(block_sizes=[32, 32], num_warps=4)  # one block size too many
    monkeypatch.setattr(spec, "default", lambda: invalid)
    configs, rejected = candidates(spec)
    assert rejected[0].config == invalid and "block_sizes has 2 entries" in rejected[0].reason
    assert rejected[0].category is Category.COMPILE_ERROR
    assert configs  # variants of the smallest tiles instead


# -- discovery -----------------------------------------------------------------------------
def test_discover_rms_norm_and_cache_hit(monkeypatch: pytest.MonkeyPatch) -> None:
    x, w = rms_inputs()
    bound = K.rms_norm.bind((x, w))
    found = run_discovery(bound, (x, w), timeout_s=60)
    assert found.heuristic_ok and not found.cached and found.rank == 0
    assert bound.config_spec.normalize(found.config) == found.config
    assert runs_correctly(K.rms_norm, found.config, x, w)
    assert [e.kind for e in cache.ls()] == ["default"]

    def no_workers(*a: object, **k: object) -> None:
        raise AssertionError("a cache hit must not start workers")

    monkeypatch.setattr("tilecraft.autotune.discover.open_runner", no_workers)
    start = time.perf_counter()
    assert discover_default(K.rms_norm.bind((x, w)), (x, w)) == found.config
    assert time.perf_counter() - start < 0.1


def test_discover_skips_broken_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    """A default that normalize rejects and a candidate that fails to compile (fault
    injection): both skipped, both in the table of reasons."""
    x, w = rms_inputs(64, 1024)
    bound = K.rms_norm.bind((x, w))
    spec = bound.config_spec
    invalid = tc.Config(block_sizes=[64, 64], num_warps=4)
    monkeypatch.setattr(spec, "default", lambda: invalid)
    configs, _ = candidates(spec)
    monkeypatch.setenv("TILECRAFT_TEST_FAULT", faults(compile_error=[configs[0]]))
    found = run_discovery(bound, (x, w), timeout_s=60, max_candidates=4)
    assert not found.heuristic_ok
    categories = {a.config.key(): a.category for a in found.attempts}
    assert categories[invalid.key()] is Category.COMPILE_ERROR
    assert categories[configs[0].key()] is Category.COMPILE_ERROR
    # rejected first, then results in rank order (isolated workers on a GPU may have checked
    # later candidates in parallel before the winner came back)
    assert [a.config for a in found.attempts][:3] == [invalid, configs[0], configs[1]]
    assert "injected compile error" in found.attempts[1].reason
    assert found.config == configs[1]
    assert runs_correctly(K.rms_norm, found.config, x, w)


def test_hang_and_crash_are_killed_and_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    x, w = rms_inputs()
    bound = K.rms_norm.bind((x, w))
    configs, _ = candidates(bound.config_spec)
    monkeypatch.setenv(
        "TILECRAFT_TEST_FAULT", faults(hang=[configs[0]], crash=[configs[1]], wrong=[configs[2]])
    )
    start = time.perf_counter()
    found = run_discovery(bound, (x, w), timeout_s=2.0, max_candidates=5, workers=2)
    assert time.perf_counter() - start < 30
    by_key = {a.config.key(): a for a in found.attempts}
    assert by_key[configs[0].key()].category is Category.COMPILE_TIMEOUT
    assert by_key[configs[1].key()].category is Category.RUNTIME_FAULT
    wrong = by_key[configs[2].key()]
    assert wrong.category is Category.WRONG_RESULT and "max abs error" in wrong.reason
    assert found.config == configs[3]
    # this process is fine: run a kernel here
    assert runs_correctly(K.rms_norm, found.config, x, w)


def test_run_phase_hang_is_a_runtime_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    x, w = rms_inputs()
    bound = K.rms_norm.bind((x, w))
    configs, _ = candidates(bound.config_spec)
    monkeypatch.setenv("TILECRAFT_TEST_FAULT", faults(hang_run=[configs[0]]))
    found = run_discovery(bound, (x, w), timeout_s=1.5, max_candidates=2, workers=1)
    assert found.attempts[0].category is Category.RUNTIME_TIMEOUT
    assert found.config == configs[1]


def test_mutated_argument_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    x = torch.randn(300)
    x0 = x.clone()
    bound = K.scale_.bind((x, 2.0))
    configs, _ = candidates(bound.config_spec)
    monkeypatch.setenv("TILECRAFT_TEST_FAULT", faults(wrong=[configs[0]]))
    found = run_discovery(bound, (x, 2.0), max_candidates=2, workers=1)
    assert found.attempts[0].category is Category.WRONG_RESULT
    assert "argument 'x'" in found.attempts[0].reason
    assert found.config == configs[1]
    assert torch.equal(x, x0)  # the caller's inputs are untouched (clones were used)


def test_no_working_config_error_has_table_and_repro() -> None:
    x, y = torch.randn(100), torch.randn(100)
    bound = K.add_wrong_baseline.bind((x, y))
    with pytest.raises(NoWorkingConfigError) as info:
        discover_default(bound, (x, y), max_candidates=2, workers=1)
    err = info.value
    assert len(err.attempts) == 2 and all(a.category is Category.WRONG_RESULT for a in err.attempts)
    assert "wrong result" in str(err) and "config" in str(err)
    assert err.repro is not None and err.repro.exists() and str(err.repro) in str(err)
    assert err.repro.parent == Path(os.environ["TILECRAFT_CACHE_DIR"]) / "repros"
    run = subprocess.run(
        [sys.executable, str(err.repro), "1"], capture_output=True, text=True, timeout=120
    )
    assert "config:" in run.stdout and "result:" in run.stdout, run.stderr
    assert run.returncode == 1  # the repro reproduces the mismatch


def test_kernel_defined_in_a_function_runs_in_process() -> None:
    @tc.kernel
    def local_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for t in tc.tile(x.size(0)):
            out[t] = x[t] + y[t]
        return out

    x, y = torch.randn(50), torch.randn(50)
    with pytest.warns(RuntimeWarning, match="in this process"):
        config = discover_default(local_add.bind((x, y)), (x, y))
    assert runs_correctly(local_add, config, x, y)


def test_worker_that_cannot_load_the_kernel_falls_back_in_process(tmp_path: Path) -> None:
    """The module changed on disk after import: workers cannot find the kernel, so configs run
    in this process, with a warning."""
    import importlib.util

    path = tmp_path / "tc_ghost_module.py"
    path.write_text(
        "import torch\nimport tilecraft as tc\n\n\n@tc.kernel\ndef ghost(x):\n"
        "    out = torch.empty_like(x)\n    for t in tc.tile(x.size(0)):\n"
        "        out[t] = x[t] * 2\n    return out\n"
    )
    spec = importlib.util.spec_from_file_location("tc_ghost_module", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["tc_ghost_module"] = module
    try:
        spec.loader.exec_module(module)
        path.write_text("# the kernel is gone\n")
        x = torch.randn(40)
        with pytest.warns(RuntimeWarning, match="could not load the kernel"):
            config = discover_default(module.ghost.bind((x,)), (x,), workers=1)
        assert runs_correctly(module.ghost, config, x)
    finally:
        del sys.modules["tc_ghost_module"]


def test_attempt_table_formatting() -> None:
    from tilecraft.autotune.classify import format_table

    rows = [Attempt(tc.Config(block_sizes=[8]), Category.COMPILE_TIMEOUT, "compile hung")]
    table = format_table(rows)
    assert "compile timeout" in table and "compile hung" in table and "block_sizes=[8]" in table


def test_worker_count_fits_device_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each worker keeps its arguments ~4 times: big inputs get fewer workers (a 2 GB logits
    tensor at 8 workers ran an H200 out of memory)."""
    from tilecraft.autotune import discover

    class FakeCudaTensor(torch.Tensor):
        @property
        def is_cuda(self) -> bool:  # type: ignore[override]
            return True

    big = torch.empty(0).as_subclass(FakeCudaTensor)
    monkeypatch.setattr(FakeCudaTensor, "numel", lambda self: 1 << 30)  # 2 GiB of bf16
    monkeypatch.setattr(FakeCudaTensor, "element_size", lambda self: 2)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda: (40 << 30, 140 << 30))
    monkeypatch.setattr(discover.os, "cpu_count", lambda: 16)
    assert discover.default_workers(100, cap=8) == 8  # no device tensors: cores and cap
    assert discover.default_workers(100, cap=8, args=(big,)) == 2  # 20 GiB / (8 + 1) GiB
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda: (1 << 30, 140 << 30))
    assert discover.default_workers(100, cap=8, args=(big,)) == 1  # never zero


def test_a_cancel_that_raced_a_worker_start_does_not_hang_its_next_request() -> None:
    """A cancel marks the busy workers and kills their processes; one that lands while a worker
    is still starting (no process yet) kills nothing, and the request then finishes normally
    with the mark left set. The worker's next request must replace the live process, not wait
    for it to exit (it waits on its stdin: a CI run hung there for good)."""
    import threading

    from tilecraft.autotune.isolate import IsolatedRunner

    x, w = rms_inputs()
    bound = K.rms_norm.bind((x, w))
    configs, _ = candidates(bound.config_spec)
    runner = IsolatedRunner(bound, (x, w), {}, None, workers=1)
    try:
        (worker,) = runner.workers
        first = worker.request("check", configs[0], timeout_s=60)
        assert first.get("ok"), first
        worker.cancelled = True  # the mark of a cancel that found no process to kill
        alive = worker.proc
        assert alive is not None and alive.poll() is None
        result: dict[str, object] = {}
        thread = threading.Thread(
            target=lambda: result.update(worker.request("check", configs[1], timeout_s=60))
        )
        thread.start()
        thread.join(timeout=90)
        hung = thread.is_alive()
        if hung:  # unblock the test's thread before failing
            alive.kill()
            thread.join(timeout=30)
        assert not hung, "the request waited for a live idle worker to exit"
        assert result.get("ok"), result
        assert alive.poll() is not None  # the old process was replaced
    finally:
        runner.close()


def test_a_baseline_that_is_not_eager_pytorch_names_the_kernel_line() -> None:
    """A body that compiles but that eager PyTorch rejects (a carried value started as a Python
    float, then tensor.maximum(float)): the warning names the kernel's line and says how to
    keep the accuracy check."""
    import warnings

    from tilecraft.autotune.discover import baseline_or_none

    x = torch.randn(6, 50)
    # the first call discovers a config: the warning comes with it, and the kernel still runs
    with pytest.warns(RuntimeWarning, match=r"autotune_kernels\.py:\d+ `m = torch\.amax"):
        torch.testing.assert_close(K.grid_row_max(x), x.amax(1))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert baseline_or_none(K.grid_row_max.bind((x,)), (x,), {}) is None
    (message,) = [str(w.message) for w in caught]
    line = next(
        i
        for i, text in enumerate(Path(K.__file__).read_text().splitlines(), 1)
        if "m = torch.amax(x[i, tcol].to(torch.float32)).maximum(m)" in text
    )
    assert f"autotune_kernels.py:{line}" in message
    assert "must be Tensor, not float" in message and "tc.full([], value" in message


@tc.kernel(static_shapes=True)
def plus_host_noise(x: torch.Tensor) -> torch.Tensor:
    noise = torch.rand_like(x)  # drawn in host code: another value on every run
    out = torch.empty_like(x)
    for t in tc.tile(x.size(0)):
        out[t] = x[t] + noise[t]
    return out


def test_a_baseline_that_disagrees_with_itself_is_named_as_the_cause() -> None:
    """Every config disagreed with a ref-mode baseline that changes from run to run (random
    numbers drawn in host code, an output from torch.empty never written): the hint asked to
    report the repro as a tilecraft bug."""
    with pytest.raises(NoWorkingConfigError) as info:
        plus_host_noise(torch.randn(64))
    assert "gives other outputs each time it runs eagerly" in str(info.value)


UNGUARDED_SCRIPT = """
import torch
import tilecraft as tc


@tc.kernel
def doubled(x):
    out = torch.empty_like(x)
    for t in tc.tile(x.size(0)):
        out[t] = x[t] * 2
    return out


x = torch.randn(100)
y = doubled(x)  # top-level work, no `if __name__ == "__main__":`
print("ok", bool(torch.allclose(y, 2 * x)))
"""


def test_a_script_without_a_main_guard_tunes_in_workers_at_once(tmp_path: Path) -> None:
    """The worker re-imported the script, whose top-level call waited on the tuning lock the
    parent held for the same key: 180 s, then in-process tuning with a warning that blamed
    where the kernel was defined. The worker's import now stops at that call."""
    script = tmp_path / "unguarded.py"
    script.write_text(UNGUARDED_SCRIPT)
    env = {
        **os.environ,
        "TRITON_INTERPRET": "1",
        "TILECRAFT_TARGET": "cuda:90",  # the isolated-worker path a GPU run takes
        "TILECRAFT_CACHE_DIR": str(tmp_path / "cache"),
        "PYTHONPATH": str(Path(__file__).parent.parent),
    }
    run = subprocess.run(
        [sys.executable, "-W", "error::RuntimeWarning", str(script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=150,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert "ok True" in run.stdout


@tc.kernel(static_shapes=True)
def smooth_in_place(u: torch.Tensor) -> None:
    (n,) = u.size()
    for t in tc.tile(n):
        i = t.index
        left = tc.load(u, [i - 1], extra_mask=i >= 1)
        right = tc.load(u, [i + 1], extra_mask=i + 1 < n)
        u[t] = 0.5 * (left + right)


@tc.kernel(static_shapes=True)
def double_in_place(u: torch.Tensor) -> None:
    (n,) = u.size()
    for t in tc.tile(n):
        u[t] = u[t] * 2


def test_a_stencil_updated_in_place_names_the_race(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every config of an in-place smoothing differs from ref mode (programs read neighbours
    other programs have overwritten): the error said to report a tilecraft bug (fuzz 54a). A
    tensor each program reads only where it writes is not named."""
    from tilecraft.autotune.classify import NoWorkingConfigError, shifted_updates

    monkeypatch.setenv("TILECRAFT_FORCE_AUTOTUNE", "1")
    with pytest.raises(NoWorkingConfigError) as info:
        smooth_in_place(torch.randn(1000))
    text = str(info.value)
    assert re.search(r"'u' \(line \d+\) is stored by each program", text), text
    assert "programs race" in text and "ping-pong" in text and "tilecraft bug" not in text
    u = torch.randn(100)
    assert shifted_updates(double_in_place.bind((u,)).traced.loops) == []
