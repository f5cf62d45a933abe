"""F.cross_entropy / F.nll_loss in device code (frontend/losses.py): per-row losses against
eager PyTorch (ignore_index, label smoothing, bf16 logits, a row longer than a chunk), and the
errors for what a tile of rows cannot mean (a batch reduction, class weights, wrong ranks)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import tilecraft as tc
from tilecraft.errors import DeviceCodeError, UnsupportedOpError


@tc.kernel(static_shapes=True)
def token_losses(
    logits: torch.Tensor, target: torch.Tensor, smoothing: float
) -> tuple[torch.Tensor, torch.Tensor]:
    n, _ = logits.size()
    ce = torch.empty([n], dtype=logits.dtype, device=logits.device)
    nll = torch.empty([n], dtype=torch.float32, device=logits.device)
    for tn in tc.tile(n):
        row, tgt = logits[tn, :], target[tn]
        ce[tn] = F.cross_entropy(row, tgt, reduction="none", label_smoothing=smoothing)
        logp = torch.log_softmax(row.float(), dim=-1)
        nll[tn] = F.nll_loss(logp, tgt, ignore_index=-100, reduction="none")
    return ce, nll


def _inputs(n: int, c: int, dtype: torch.dtype, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(7)
    logits = (torch.randn(n, c, generator=g) * 3).to(dtype).to(device)
    target = torch.randint(0, c, (n,), generator=g)
    target[::5] = -100  # ignored tokens
    return logits, target.to(device)


@pytest.mark.parametrize(
    ("dtype", "smoothing", "c"),
    [(torch.float32, 0.0, 37), (torch.float32, 0.1, 300), (torch.bfloat16, 0.0, 1000)],
)
def test_per_row_losses_match_torch(
    dtype: torch.dtype, smoothing: float, c: int, device: str
) -> None:
    logits, target = _inputs(23, c, dtype, device)
    ce, nll = token_losses(logits, target, smoothing)
    want = F.cross_entropy(logits.float(), target, reduction="none", label_smoothing=smoothing)
    tol = 1e-5 if dtype == torch.float32 else 1e-2
    assert ce.dtype == dtype and bool((ce[::5] == 0).all())
    torch.testing.assert_close(ce.float(), want, rtol=tol, atol=tol)
    logp = torch.log_softmax(logits.float(), -1)
    torch.testing.assert_close(nll, F.nll_loss(logp, target, reduction="none"))


def test_a_long_row_loops_in_chunks(device: str) -> None:
    logits, target = _inputs(5, 5000, torch.float32, device)
    bound = token_losses.bind((logits, target, 0.0))
    config = tc.Config(block_sizes=[2], reduction_loops=[256])
    ce, _ = bound.run(bound.compile_config(config), logits, target, 0.0)
    want = F.cross_entropy(logits, target, reduction="none")
    torch.testing.assert_close(ce, want, rtol=1e-5, atol=1e-5)


@tc.kernel(static_shapes=True)
def mean_loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    out = torch.empty([1], dtype=torch.float32, device=logits.device)
    for tn in tc.tile(logits.size(0)):
        out[0] = F.cross_entropy(logits[tn, :], target[tn])
    return out


@tc.kernel(static_shapes=True)
def weighted_loss(logits: torch.Tensor, target: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    out = torch.empty([logits.size(0)], dtype=torch.float32, device=logits.device)
    for tn in tc.tile(logits.size(0)):
        out[tn] = F.cross_entropy(logits[tn, :], target[tn], weight=w[:], reduction="none")
    return out


@tc.kernel(static_shapes=True)
def float_targets(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    out = torch.empty([logits.size(0)], dtype=torch.float32, device=logits.device)
    for tn in tc.tile(logits.size(0)):
        out[tn] = F.cross_entropy(logits[tn, :], target[tn, :], reduction="none")
    return out


def test_errors_name_the_call_and_the_way_out() -> None:
    logits, target = _inputs(8, 16, torch.float32, "cpu")
    with pytest.raises(UnsupportedOpError, match=r"reduction='mean'.*one tile") as err:
        mean_loss.bind((logits, target))
    assert "reduction='none'" in str(err.value) and "test_losses.py" in str(err.value)
    with pytest.raises(UnsupportedOpError, match="class weight"):
        weighted_loss.bind((logits, target, torch.ones(16)))
    with pytest.raises(DeviceCodeError, match="class-index target"):
        float_targets.bind((logits, torch.rand(8, 16)))


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_banned_tokens_with_a_run_time_smoothing(smoothing: float, device: str) -> None:
    """-inf logits (a padded vocabulary tail) with label_smoothing passed at run time: 0.0 adds
    no smoothing term (0 * inf was NaN on every such row), 0.1 gives torch's inf."""
    logits, target = _inputs(9, 40, torch.float32, device)
    logits[:, 33:] = float("-inf")
    target = torch.where(target >= 33, 3, target)
    ce, _ = token_losses(logits, target, smoothing)
    want = F.cross_entropy(logits, target, reduction="none", label_smoothing=smoothing)
    torch.testing.assert_close(ce, want, rtol=1e-5, atol=1e-5)


@tc.kernel(static_shapes=True)
def row_cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    (n, _) = logits.size()
    out = torch.empty([n], dtype=torch.float32, device=logits.device)
    for tn in tc.tile(n):
        out[tn] = F.cross_entropy(logits[tn, :], labels[tn], reduction="none")
    return out


def test_a_label_out_of_range_says_to_check_the_inputs(
    device: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Eager PyTorch's IndexError in the baseline is the call's data, not something a
    baseline= function fixes (the warning said to pass one; fuzz 53b)."""
    monkeypatch.setenv("TILECRAFT_FORCE_AUTOTUNE", "1")
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(8, 30, generator=g).to(device)
    labels = torch.randint(0, 30, (8,), generator=g)
    labels[0] = 30
    with pytest.warns(RuntimeWarning, match="found an index out of range") as caught:
        got = row_cross_entropy(logits, labels.to(device))
    assert "baseline=" not in str(caught[0].message)
    torch.testing.assert_close(got[0], torch.logsumexp(logits[0], 0))  # reads 0 there
