"""The docs' training example: a block with tilecraft norm and activation learns like PyTorch's."""

from __future__ import annotations

import pytest

from examples.train_mlp import train


@pytest.mark.parametrize("backend", [None, "aot_eager"])
def test_loss_curve_matches_pytorch(backend: str | None, device: str) -> None:
    shape = {"steps": 6, "dim": 32, "hidden": 48, "batch": 8, "device": device}
    ours, _ = train(True, compile_backend=backend, **shape)  # type: ignore[arg-type]
    ref, _ = train(False, compile_backend=backend, **shape)  # type: ignore[arg-type]
    assert ours[-1] < ours[0]  # it learns
    for a, b in zip(ours, ref, strict=True):
        assert a == pytest.approx(b, rel=1e-4, abs=1e-6)
