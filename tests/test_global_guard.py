"""A global or closure constant that device code reads is baked in when the kernel is traced; a
later change must retrace it (runtime/global_guard.py), never keep the old value silently."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
import torch

import tilecraft as tc
from tilecraft.runtime.global_guard import GlobalGuard

SHIFT = 1.0
SCALE = 2.0
TAPS = (1.0, 2.0)


def _scaled(v: torch.Tensor) -> torch.Tensor:
    """A helper the kernel calls: its own global is baked in as well."""
    return v * SCALE


@tc.kernel(static_shapes=True)
def add_shift(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        out[tm, :] = _scaled(x[tm, :]) + SHIFT * TAPS[1]
    return out


@pytest.fixture
def restore_globals() -> Iterator[None]:
    saved = dict(SHIFT=SHIFT, SCALE=SCALE, TAPS=TAPS)
    yield
    globals().update(saved)


def _expected(x: torch.Tensor) -> torch.Tensor:
    return x * SCALE + SHIFT * TAPS[1]


def test_changed_global_retraces(restore_globals: None, device: str) -> None:
    x = torch.randn(37, 20, device=device)
    torch.testing.assert_close(add_shift(x), _expected(x))
    first = add_shift.bind((x,))
    for name, value in (("SHIFT", 10.0), ("SCALE", -3.0), ("TAPS", (1.0, 0.5))):
        globals()[name] = value
        with pytest.warns(UserWarning, match=f"{name} .* -> {re.escape(repr(value))}"):
            got = add_shift(x)
        torch.testing.assert_close(got, _expected(x))
    assert add_shift.bind((x,)) is not first


def test_unchanged_globals_keep_the_specialization(
    recwarn: pytest.WarningsRecorder, device: str
) -> None:
    x = torch.randn(8, 16, device=device)
    add_shift(x)  # (another test may have traced it with other values)
    recwarn.clear()
    bound = add_shift.bind((x,))
    add_shift(x)
    assert add_shift.bind((x,)) is bound
    assert not [w for w in recwarn if "since it was traced" in str(w.message)]


def _closure_kernel(offset: int) -> tc.Kernel:
    bias = offset

    @tc.kernel(static_shapes=True)
    def add_bias(x: torch.Tensor) -> torch.Tensor:
        (n,) = x.size()
        out = torch.empty_like(x)
        for tn in tc.tile(n):
            out[tn] = x[tn] + bias
        return out

    def set_bias(value: int) -> None:
        nonlocal bias
        bias = value

    add_bias.set_bias = set_bias  # type: ignore[attr-defined]
    return add_bias


def test_changed_closure_constant_retraces(device: str) -> None:
    kernel = _closure_kernel(3)
    x = torch.arange(10, dtype=torch.int32, device=device)
    assert torch.equal(kernel(x), x + 3)
    kernel.set_bias(5)  # type: ignore[attr-defined]
    with pytest.warns(UserWarning, match="bias 3 -> 5"):
        assert torch.equal(kernel(x), x + 5)


def test_guarded_names() -> None:
    """Constants (also a helper's and a tuple) are guarded; modules, functions and builtins are
    not, and 1 -> 1.0 is a change (another constant in generated code)."""
    guard = GlobalGuard(add_shift.fn, add_shift.source.loops)
    names = sorted(slot[0] for slot in guard._slots)
    assert names == ["SCALE", "SHIFT", "TAPS"], names
    assert guard.changed() == []
    globals()["SHIFT"], saved = 1, SHIFT
    try:
        assert guard.changed() == [("SHIFT", saved, 1)]
        assert guard.changed() == []
    finally:
        globals()["SHIFT"] = saved


HOST_SCALE = 2.0  # read by host code only: live at each call, no retrace


@tc.kernel(static_shapes=True)
def host_scaled(x: torch.Tensor) -> torch.Tensor:
    (n,) = x.size()
    out = torch.empty_like(x)
    for tn in tc.tile(n):
        out[tn] = x[tn] + 1.0
    return out * HOST_SCALE


def test_host_only_global_is_not_guarded(
    monkeypatch: pytest.MonkeyPatch, recwarn: pytest.WarningsRecorder, device: str
) -> None:
    x = torch.randn(50, device=device)
    torch.testing.assert_close(host_scaled(x), (x + 1.0) * 2.0)
    bound = host_scaled.bind((x,))
    monkeypatch.setattr(f"{__name__}.HOST_SCALE", 5.0)
    torch.testing.assert_close(host_scaled(x), (x + 1.0) * 5.0)
    assert host_scaled.bind((x,)) is bound
    assert not [w for w in recwarn if "since it was traced" in str(w.message)]


HP = {"scale": 2.0, "taps": [1.0, 0.5]}


class _Cfg:
    shift = 1.0


CFG = _Cfg()


@tc.kernel(static_shapes=True)
def hyper_scaled(x: torch.Tensor) -> torch.Tensor:
    (n,) = x.size()
    out = torch.empty_like(x)
    for tn in tc.tile(n):
        out[tn] = x[tn].to(torch.float32) * HP["scale"] + CFG.shift * HP["taps"][1]
    return out


def test_items_and_attributes_of_mutable_globals_are_guarded(
    monkeypatch: pytest.MonkeyPatch,
    device: str,
) -> None:
    """A hyperparameter dict's item, a config object's attribute and a list item read in
    device code were baked in and went stale when mutated (fuzzing, session 48: 15.6 off)."""
    monkeypatch.setitem(HP, "taps", [1.0, 0.5])
    x = torch.randn(40, device=device)
    torch.testing.assert_close(hyper_scaled(x), x * 2.0 + 0.5)
    for change, want, label in (
        (lambda: monkeypatch.setitem(HP, "scale", -3.0), x * -3.0 + 0.5, "HP['scale']"),
        (lambda: monkeypatch.setattr(CFG, "shift", 4.0), x * -3.0 + 2.0, "CFG.shift"),
        (lambda: HP["taps"].__setitem__(1, 0.25), x * -3.0 + 1.0, "HP['taps'][1]"),
    ):
        change()
        with pytest.warns(UserWarning, match=re.escape(label)):
            got = hyper_scaled(x)
        torch.testing.assert_close(got, want)


def test_a_closure_dict_item_is_guarded(device: str) -> None:
    params = {"bias": 1.0}

    @tc.kernel(static_shapes=True)
    def add_bias(x: torch.Tensor) -> torch.Tensor:
        (n,) = x.size()
        out = torch.empty_like(x)
        for tn in tc.tile(n):
            out[tn] = x[tn] + params["bias"]
        return out

    x = torch.randn(20, device=device)
    torch.testing.assert_close(add_bias(x), x + 1.0)
    params["bias"] = 5.0
    with pytest.warns(UserWarning, match=re.escape("params['bias'] 1.0 -> 5.0")):
        torch.testing.assert_close(add_bias(x), x + 5.0)
    guard = GlobalGuard(add_bias.fn, add_bias.source.loops)
    assert [c.label for c in guard._chains] == ["params['bias']"]  # not torch.float32 etc.


def _scaler(factor: float) -> tc.Kernel:
    @tc.kernel
    def scaled(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for t in tc.tile(x.size(0)):
            out[t] = x[t] * factor
        return out

    return scaled


def test_the_cache_key_holds_the_constants_device_code_reads(device: str) -> None:
    """Two kernels of one source that read other closure values (or module constants) shared
    one cache entry: each evicted the other's ('no longer works') and tuned again in every
    process."""
    from tilecraft.autotune.cache import key_for

    x = torch.randn(16, device=device)
    twice, thrice, twice_again = _scaler(2.0), _scaler(3.0), _scaler(2.0)
    keys = [key_for(k.bind((x,))) for k in (twice, thrice, twice_again)]
    assert keys[0] != keys[1] and keys[0] == keys[2]


def test_tuning_workers_see_the_callers_constants(
    monkeypatch: pytest.MonkeyPatch, device: str
) -> None:
    """A tuning worker imports the kernel's module afresh, with the values its source assigns:
    after the caller changed SHIFT (and an item of HP), every config 'differed' from the
    caller's baseline and the call raised NoWorkingConfigError (an H100; on CPUs tuning runs in
    the caller's process). The worker now assigns the caller's values first."""
    from tilecraft.autotune.baseline import compute_baseline
    from tilecraft.autotune.candidates import candidates
    from tilecraft.autotune.isolate import IsolatedRunner

    monkeypatch.setattr(f"{__name__}.SHIFT", 10.0)
    monkeypatch.setitem(HP, "scale", -3.0)
    for kernel, x in (
        (add_shift, torch.randn(8, 16, device=device)),
        (hyper_scaled, torch.randn(40, device=device)),
    ):
        bound = kernel.bind((x,))
        baseline = compute_baseline(kernel, (x,))
        runner = IsolatedRunner(bound, (x,), {}, baseline, workers=1)
        try:
            config = candidates(bound.config_spec)[0][0]
            result = runner.workers[0].request("check", config, timeout_s=120)
            # (the worker's fp64 re-run of ref mode, with its own constants, had excused the
            # difference as ill-conditioned elements on the CPU: an empty reason is a match)
            assert result.get("ok") and not result.get("reason"), (kernel.__name__, result)
        finally:
            runner.close()
