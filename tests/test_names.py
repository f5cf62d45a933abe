"""Misspelled ``@tc.kernel`` options and ``tc.Config`` fields are errors naming the closest valid
name; Helion-only names warn once and change nothing; user tunables stay legal Config keys; the
"no working config" hint calls for a bug report only for failures tilecraft does not understand."""

from __future__ import annotations

import warnings

import pytest
import torch

import tilecraft as tc
from tilecraft.autotune.classify import Attempt, Category, NoWorkingConfigError
from tilecraft.config import compat_names
from tilecraft.errors import ConfigError


def copy(x: torch.Tensor) -> torch.Tensor:
    (n,) = x.size()
    out = torch.empty_like(x)
    for t in tc.tile(n):
        out[t] = x[t]
    return out


def tuned(x: torch.Tensor) -> torch.Tensor:
    (n,) = x.size()
    out = torch.empty_like(x)
    scale = tc.register_tunable("scale", [1, 2])
    for t in tc.tile(n):
        out[t] = x[t] * scale
    return out


@pytest.mark.parametrize(
    "option,closest",
    [("staic_shapes", "static_shapes"), ("autotune_efort", "autotune_effort")],
)
def test_misspelled_kernel_option_names_the_closest(option: str, closest: str) -> None:
    with pytest.raises(ConfigError) as info:
        tc.kernel(copy, **{option: True})
    text = str(info.value)
    assert f"'{option}'" in text and f"did you mean '{closest}'" in text
    assert "test_names.py:" in text  # the kernel's definition line


def test_helion_only_kernel_option_warns_once() -> None:
    compat_names._warned.discard(("@tc.kernel option", "print_output_code"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = tc.kernel(copy, print_output_code=True)
        tc.kernel(copy, print_output_code=True)
    messages = [str(w.message) for w in caught if "print_output_code" in str(w.message)]
    assert len(messages) == 1 and "Helion" in messages[0]
    assert "print_output_code" not in first.options


def test_misspelled_config_field_names_the_closest() -> None:
    with pytest.raises(ConfigError, match="did you mean 'num_warps'"):
        tc.Config(num_warp=4)


def test_helion_only_config_field_warns_and_is_dropped() -> None:
    compat_names._warned.discard(("Config field", "static_ranges"))
    with pytest.warns(UserWarning, match="static_ranges"):
        config = tc.Config(block_sizes=[16], static_ranges=[True])
    assert config == tc.Config(block_sizes=[16])


def test_user_tunable_is_a_legal_config_key() -> None:
    kernel = tc.kernel(tuned, config=tc.Config(block_sizes=[16], scale=2))
    x = torch.randn(40)
    assert torch.equal(kernel(x), x * 2)


def test_unknown_config_key_is_checked_against_the_kernels_tunables() -> None:
    kernel = tc.kernel(tuned, config=tc.Config(block_sizes=[16], scal=2))
    with pytest.raises(ConfigError, match="did you mean 'scale'"):
        kernel(torch.randn(40))


def _failure(category: Category) -> Attempt:
    return Attempt(tc.Config(block_sizes=[16]), category, "why")


def test_bug_report_only_for_unknown_failures_or_a_correct_ref_mode() -> None:
    """A failure tilecraft does not understand is a bug report; every config disagreeing with
    ref mode is one only where ref mode is what the user expects (compiled code then differs
    from the kernel's own meaning); resources and timeouts are the config's."""
    unknown = NoWorkingConfigError("k", [_failure(Category.UNKNOWN)], None)
    assert "tilecraft bug" in str(unknown)
    for category in (Category.RESOURCE, Category.RUNTIME_TIMEOUT):
        err = NoWorkingConfigError("k", [_failure(category)], None)
        assert "tilecraft bug" not in str(err)
    wrong = str(NoWorkingConfigError("k", [_failure(Category.WRONG_RESULT)], None))
    assert "if kernel.run_ref(...) gives what you expect" in wrong and "tilecraft bug" in wrong
