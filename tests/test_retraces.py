"""A kernel traced again and again for new argument values says so once, naming the
arguments and how to pass them at run time (runtime/retraces.py): an optimizer's int step
(compiled in with static_shapes=True) or a dict of hyperparameters retraced every step
silently (fuzz round 52c)."""

from __future__ import annotations

import warnings

import pytest
import torch

import tilecraft as tc
from tilecraft.runtime.retraces import WARN_AT, retrace_warning


@tc.kernel(static_shapes=True)
def bias_corrected(x: torch.Tensor, step: int) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in tc.tile(x.size(0)):
        out[t] = x[t] / (1.0 - 0.9**step)
    return out


@tc.kernel(static_shapes=True)
def from_group(x: torch.Tensor, group: dict[str, float]) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in tc.tile(x.size(0)):
        out[t] = x[t] * group["lr"]
    return out


def _retrace_warnings(call: object, steps: int) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for step in range(1, steps + 1):
            call(step)  # type: ignore[operator]
    return [str(w.message) for w in caught if "specializations traced" in str(w.message)]


def test_an_int_step_that_retraces_every_call_is_named_once(device: str) -> None:
    x = torch.randn(32, device=device)
    found = _retrace_warnings(lambda s: bias_corrected(x, s), WARN_AT + 3)
    assert len(found) == 1 and "'step' (an int, compiled in" in found[0], found
    assert "0-d tensor" in found[0]


def test_a_dict_of_changing_numbers_is_named(device: str) -> None:
    x = torch.randn(32, device=device)
    found = _retrace_warnings(lambda s: from_group(x, {"lr": 0.1 / s}), WARN_AT)
    assert len(found) == 1 and "'group' (a dict whose numbers are compiled in" in found[0]
    torch.testing.assert_close(from_group(x, {"lr": 0.5}), x * 0.5)  # values still right


def test_new_shapes_name_static_shapes_only_where_they_apply() -> None:
    names, shapes = ("x",), [torch.empty(n, device="meta") for n in range(1, WARN_AT + 1)]
    keys = [(repr(s.shape),) for s in shapes]
    text = retrace_warning("k", keys, names, (shapes[-1],), static_shapes=True)
    assert text is not None and "static_shapes=False" in text
    assert retrace_warning("k", keys, names, (shapes[-1],), static_shapes=False) is None
    assert retrace_warning("k", keys[:-1], names, (shapes[-1],)) is None  # not yet
    same = [("same",)] * WARN_AT  # e.g. one argument's key, new targets: nothing changing
    assert retrace_warning("k", same, names, (shapes[-1],)) is None


@pytest.mark.parametrize("kind", ["float", "tensor"])
def test_the_suggested_run_time_forms_do_not_retrace(kind: str, device: str) -> None:
    """What the warning suggests for a step: a float argument or a 0-d tensor."""

    @tc.kernel(static_shapes=True)
    def corrected(x: torch.Tensor, step: float | torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for t in tc.tile(x.size(0)):
            out[t] = x[t] / (1.0 - 0.9**step)
        return out

    x = torch.randn(32, device=device)
    for s in range(1, WARN_AT + 2):
        step = float(s) if kind == "float" else torch.tensor(float(s), device=device)
        torch.testing.assert_close(corrected(x, step), x / (1.0 - 0.9**s))
    assert len(corrected._bound) == 1


@tc.kernel(static_shapes=True)
def momentum_(p: torch.Tensor, g: torch.Tensor, buf: torch.Tensor, step: int) -> None:
    for t in tc.tile(p.size(0)):
        b = g[t] if step == 0 else 0.9 * buf[t] + g[t]
        buf[t] = b
        p[t] = p[t] - 0.01 * b


def test_the_argument_that_keeps_coming_is_named_not_a_fixed_set_of_shapes(device: str) -> None:
    """An optimizer kernel per parameter (4 shapes) with an int step: at the 8th
    specialization there were 4 shapes and 2 steps, and the warning named the shapes, never
    the step (48 specializations after 12 steps; fuzz round 55b). It names what the second
    half of the keys brought new, and warns again at 4x as many."""
    params = [torch.randn(n, device=device) for n in (6, 12, 36, 3)]
    bufs = [torch.zeros_like(p) for p in params]
    found = _retrace_warnings(
        lambda s: [momentum_(p, torch.ones_like(p), b, s - 1) for p, b in zip(params, bufs)],
        8,
    )
    assert len(found) == 2 and all("'step' (an int" in text for text in found), found
    assert not any("'p'" in text for text in found) and "32 specializations" in found[1]


@tc.kernel(static_shapes=True)
def doubled(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in tc.tile(x.size(0)):
        out[t] = x[t] * 2
    return out


doubled.register_backward(lambda ctx, g: g * 2)


def test_a_call_that_needs_gradients_is_warned_at_the_users_line(device: str) -> None:
    """Through torch's custom op (inputs that require grad) the warning pointed into
    torch/_library/custom_ops.py, not the user's call (fuzz round 55b)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in range(1, WARN_AT + 1):
            doubled(torch.randn(n, device=device, requires_grad=True))
    found = [w for w in caught if "specializations traced" in str(w.message)]
    assert len(found) == 1 and found[0].filename == __file__, [w.filename for w in found]
