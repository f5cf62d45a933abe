"""The per-call fast path: prebuilt launchers per specialization, guarded by the arguments."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

import tilecraft as tc
from tilecraft.runtime import fastpath


@pytest.fixture(autouse=True)
def _on_test_device(device: str) -> Iterator[None]:
    """Tensors made without a device land on the GPU when there is one, else the interpreter."""
    with torch.device(device):
        yield


@tc.kernel
def add_scaled(x: torch.Tensor, y: torch.Tensor, s: float = 2.0) -> torch.Tensor:
    (m,) = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        out[tm] = x[tm] + y[tm] * s
    return out


@tc.kernel
def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    (m,) = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        out[tm] = x[tm] + y[tm]
    return out


def test_second_call_uses_the_prebuilt_launcher(monkeypatch: pytest.MonkeyPatch) -> None:
    add_scaled.reset()
    x, y = torch.randn(50), torch.randn(50)
    torch.testing.assert_close(add_scaled(x, y, 2.0), x + y * 2)
    assert list(add_scaled._fast) == [fastpath.guard_key((x, y, 2.0))]
    # the ordinary path is not taken any more for arguments like these
    monkeypatch.setattr(add_scaled, "call_eager", lambda *a: pytest.fail("slow path taken"))
    x2, y2 = torch.randn(50), torch.randn(50)
    torch.testing.assert_close(add_scaled(x2, y2, 0.5), x2 + y2 * 0.5)


def test_guards_send_new_shapes_dtypes_and_strides_to_the_ordinary_path() -> None:
    add.reset()
    x, y = torch.randn(50), torch.randn(50)
    add(x, y)
    others = [
        (torch.randn(70), torch.randn(70)),
        (torch.randn(50, dtype=torch.float16), torch.randn(50, dtype=torch.float16)),
        (torch.randn(100)[::2], torch.randn(50)),
    ]
    for a, b in others:
        assert fastpath.guard_key((a, b)) not in add._fast
        torch.testing.assert_close(add(a, b), a + b)
    assert len(add._fast) == 4


def test_keys_that_opt_out() -> None:
    x = torch.randn(4)
    assert fastpath.guard_key((x.requires_grad_(),)) is None  # autograd decides
    assert fastpath.guard_key((torch.randn(4), "text")) is None
    assert fastpath.guard_key((torch.randn(4), 3)) != fastpath.guard_key((torch.randn(4), 4))


def test_ref_mode_still_applies_after_the_fast_path_exists(monkeypatch: pytest.MonkeyPatch) -> None:
    add_scaled.reset()
    x, y = torch.randn(50), torch.randn(50)
    add_scaled(x, y)
    monkeypatch.setenv("TILECRAFT_REF", "1")
    monkeypatch.setattr(add_scaled._fast[fastpath.guard_key((x, y))], "host_fn", None)
    torch.testing.assert_close(add_scaled(x, y), x + y * 2)  # ran eagerly, not the launcher


def test_a_new_config_replaces_the_prebuilt_launcher() -> None:
    add.reset()
    x, y = torch.randn(50), torch.randn(50)
    add(x, y)
    assert add._fast
    bound = add.bind((x, y))
    bound.use_config(tc.Config(block_sizes=[16]))
    assert not add._fast
    torch.testing.assert_close(add(x, y), x + y)
    assert list(bound.default_program().config.block_sizes) == [16]
