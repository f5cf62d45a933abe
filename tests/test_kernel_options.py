"""Option values checked where they are given: @tc.kernel's options at the kernel's def line,
Config fields when the Config is made, tunables of any hashable kind, and an effort asked for
that a cached result of a lesser effort does not answer (session 35's autotuner fuzzing)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from kernels import plus_one

import tilecraft as tc
from tilecraft.autotune import cache
from tilecraft.errors import ConfigError


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("config", {"block_sizes": [16]}, "expected a tc.Config"),
        ("configs", [{"block_sizes": [16]}], "expected a list of tc.Config"),
        ("autotune_budget_s", "30s", "a number of seconds > 0"),
        ("autotune_budget_s", -1, "a number of seconds > 0"),
        ("autotune_tolerances", {torch.float32: 1e-3}, "{dtype: (rtol, atol)}"),
        ("baseline", 42, "expected a function taking the kernel's arguments"),
        ("static_shapes", "no", "expected True or False"),
        ("hoist_operands", "no", "expected True or False"),
        ("config_table", 5, "expected the path of a table"),
        ("autotune_effort", "quik", "did you mean 'quick'?"),
        ("dot_precision", "tf23", "did you mean 'tf32'?"),
    ],
)
def test_kernel_options_of_the_wrong_kind_fail_at_the_definition(
    option: str, value: Any, message: str
) -> None:
    """They failed at the first call, as internal errors naming neither the option nor the
    user's file ('dict' object has no attribute 'key')."""
    with pytest.raises(ConfigError, match=option) as info:
        tc.kernel(**{option: value})(plus_one.fn)
    assert message in str(info.value) and "kernels.py:" in str(info.value)  # its def line


def test_a_config_of_the_wrong_length_names_the_kernel(device: str) -> None:
    """A config= whose block_sizes do not match the kernel's tiles failed at the first call
    without file:line (found while normalizing, below the kernel's frames)."""
    kernel = tc.kernel(config=tc.Config(block_sizes=[16, 16]))(plus_one.fn)
    with pytest.raises(ConfigError, match="block_sizes has 2 entries") as info:
        kernel(torch.randn(8, device=device))
    assert "kernels.py:" in str(info.value) and "def " in str(info.value)


@pytest.mark.parametrize("maxnreg", ["abc", -5, 1.5, 8, 300])
def test_maxnreg_out_of_ptxas_range_is_a_config_error(maxnreg: Any) -> None:
    """'abc' raised a raw TypeError in the occupancy check; -5 and 1.5 went into the launch."""
    with pytest.raises(ConfigError, match=f"maxnreg={maxnreg!r}"):
        tc.Config(block_sizes=[16], maxnreg=maxnreg)
    assert tc.Config(block_sizes=[16], maxnreg=128).maxnreg == 128


def _pair_scale(x: torch.Tensor) -> torch.Tensor:
    (n,) = x.size()
    pair = tc.register_tunable("pair", [(1, 2), (3, 4)])
    out = torch.empty_like(x)
    for t in tc.tile(n):
        out[t] = x[t] * pair[0] + pair[1]
    return out


def test_tunables_with_tuple_choices_survive_the_configs_json_form(tmp_path: Path) -> None:
    """A Config keeps a tuple as a list: the kernel's own default (1, 2) came back as [1, 2],
    'not one of [(1, 2), (3, 4)]', and no call worked."""
    x = torch.randn(16)
    torch.testing.assert_close(tc.kernel(_pair_scale)(x), x * 1 + 2)
    three = tc.kernel(config=tc.Config(block_sizes=[8], pair=[3, 4]))(_pair_scale)
    torch.testing.assert_close(three(x), x * 3 + 4)


def test_a_full_tuning_is_not_answered_by_a_cached_quick_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TILECRAFT_CACHE_DIR", str(tmp_path))
    kernel = tc.kernel(plus_one.fn)
    x = torch.randn(64)
    kernel.autotune((x,), effort="quick", budget_s=2)
    bound = kernel.bind((x,))
    assert cache.stored_effort(bound, "best") == "quick"
    kernel.autotune((x,), effort="full", budget_s=2)
    assert cache.stored_effort(bound, "best") == "full"
    kernel.autotune((x,), effort="quick", budget_s=2)  # the full result answers a quick one
    assert cache.stored_effort(bound, "best") == "full"


def _warps_tunable(x: torch.Tensor) -> torch.Tensor:
    (n,) = x.size()
    f = tc.register_tunable("num_warps", [3, 5])
    out = torch.empty_like(x)
    for t in tc.tile(n):
        out[t] = x[t] * f
    return out


def test_a_tunable_named_like_a_config_field_is_refused_at_its_line() -> None:
    """It became the launch's num_warps: 'num_warps=3: must be a power of two' (choices [2, 8]
    silently tied the kernel's value to the warps)."""
    from tilecraft.errors import TilecraftError

    with pytest.raises(TilecraftError, match="'num_warps' is a tc.Config field") as info:
        tc.kernel(_warps_tunable)(torch.randn(16))
    assert "test_kernel_options.py" in str(info.value) and "my_num_warps" in str(info.value)


def _wrong_baseline(x: torch.Tensor) -> torch.Tensor:
    return x + 2.0  # the mistake


def test_every_config_disagreeing_with_a_users_baseline_names_it() -> None:
    """The hint suspected the compiled code ('report the repro script as a tilecraft bug')."""
    from tilecraft.autotune.classify import NoWorkingConfigError

    kernel = tc.kernel(baseline=_wrong_baseline)(plus_one.fn)
    x = torch.randn(16)
    with pytest.raises(NoWorkingConfigError, match="baseline=_wrong_baseline") as info:
        kernel(x)
    assert "test_kernel_options.py" in str(info.value) and "run_ref" in str(info.value)


def _reverse_by_range_form(x: torch.Tensor) -> torch.Tensor:
    (n,) = x.size()
    out = torch.empty_like(x)
    for i in tc.grid(n - 1, -1, -1):  # Python's range(begin, end, step)
        out[i] = x[i]
    return out


def test_a_range_with_a_step_names_tc_grid_and_the_way_backwards() -> None:
    """It said "tc.tile takes ..." of a tc.grid call, with no line and no way to go backwards."""
    from tilecraft.errors import DeviceCodeError

    with pytest.raises(DeviceCodeError, match="tc.grid takes") as info:
        tc.kernel(_reverse_by_range_form)(torch.randn(8))
    assert "test_kernel_options.py" in str(info.value) and "n - 1 - i" in str(info.value)


def _failing_baseline(x: torch.Tensor) -> torch.Tensor:
    raise RuntimeError("bug in my baseline")


def test_a_failing_baseline_function_is_named_as_the_users(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The warning blamed 'the kernel run as eager PyTorch' and said to pass baseline=, which
    the user had."""
    monkeypatch.setenv("TILECRAFT_CACHE_DIR", str(tmp_path))

    @tc.kernel(baseline=_failing_baseline)
    def doubled(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for t in tc.tile(x.size(0)):
            out[t] = x[t] * 2
        return out

    x = torch.randn(10)
    with pytest.warns(
        RuntimeWarning, match="your baseline= function _failing_baseline failed"
    ) as seen:
        torch.testing.assert_close(doubled(x), 2 * x)
    # attributed to the user's call, not to the line of tilecraft that warned
    assert [w.filename for w in seen if "baseline=" in str(w.message)] == [__file__]


@pytest.mark.parametrize("budget", [0, -1, float("nan"), float("inf"), "3"])
def test_autotune_budget_is_checked_as_the_decorators(budget: Any) -> None:
    """Kernel.autotune took 0, -1, nan and "3"; a budget of 0's result was cached as best."""
    with pytest.raises(ConfigError, match="expected a number of seconds > 0"):
        plus_one.autotune((torch.randn(8),), budget_s=budget)


@pytest.mark.parametrize(
    ("value", "on"), [("0", False), ("false", False), ("OFF", False), ("1", True), ("", True)]
)
def test_the_glue_flag_reads_like_every_other_flag(
    monkeypatch: pytest.MonkeyPatch, value: str, on: bool
) -> None:
    from tilecraft import settings

    monkeypatch.setenv("TILECRAFT_GLUE", value)
    assert settings.fuse_glue() is on


@tc.kernel(static_shapes=True)
def rowmax_parts(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    parts = tc.register_tunable("parts", [1, 2])
    chunk = (n + parts - 1) // parts
    out = torch.empty([m], dtype=torch.float32, device=x.device)
    for tm in tc.tile(m):
        best = tc.full([tm], float("-inf"), dtype=torch.float32)
        for p in tc.static_range(parts):
            for tk in tc.tile(p * chunk, min(n, p * chunk + chunk)):
                best = torch.maximum(best, x[tm, tk].amax(1))
        out[tm] = best
    return out


def test_a_tunable_that_adds_tile_loops_is_a_config_error_naming_it() -> None:
    """A choice whose trace has more tile loops than the first choice's crashed with an
    IndexError in config/plan.py (its config's block sizes are the first choice's)."""
    x = torch.randn(13, 90)
    bound = rowmax_parts.bind((x,))
    default = bound.config_spec.default()
    torch.testing.assert_close(bound.run(bound.compile_config(default), x), x.amax(1))
    with pytest.raises(ConfigError, match=r"tunable value\(s\) \{'parts': 2\} change the kernel"):
        bound.compile_config(default.replace(parts=2))


@pytest.mark.parametrize(
    ("name", "value", "read"),
    [
        ("TILECRAFT_NO_AUTOTUNE", "2", "no_autotune"),
        ("TILECRAFT_GLUE", "garbage", "fuse_glue"),
        ("TILECRAFT_FORCE_AUTOTUNE", "always", "force_autotune"),
        ("TILECRAFT_COMPILE_MEMORY_GB", "abc", "compile_memory_bytes"),
    ],
)
def test_a_setting_of_an_unknown_value_is_named(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, read: str
) -> None:
    """TILECRAFT_NO_AUTOTUNE=2 read as unset let production tune; a memory cap of 'abc' showed
    as every compile worker crashing (fuzz round 55c)."""
    from tilecraft import settings

    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError, match=f"{name}='{value}'"):
        getattr(settings, read)()
    for good, want in (("yes", True), ("OFF", False), ("", read in ("fuse_glue",))):
        if read != "compile_memory_bytes":
            monkeypatch.setenv(name, good)
            assert getattr(settings, read)() is want
