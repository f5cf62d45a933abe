"""A sort's shared memory (config/pipelines.sort_scratch): Triton's bitonic steps convert the
whole tile of 64-bit keys through shared memory, so the estimate the default, discovery's static
check and ``TILECRAFT_NO_AUTOTUNE=1`` read must count it; a row no target can sort whole is
refused before any compile, naming the sort and what fits; dot operands past it are named too."""

from __future__ import annotations

import pytest
import torch

import tilecraft as tc
from tests.cross_targets import TARGETS
from tilecraft.autotune.candidates import static_check
from tilecraft.autotune.select import without_tuning
from tilecraft.config.spec import ConfigSpec
from tilecraft.errors import ConfigError
from tilecraft.runtime.kernel import BoundKernel
from tilecraft.tools.crosscompile import CompileJob
from tilecraft.tools.worker import run_compile_jobs

H200 = TARGETS[0]


@tc.kernel(static_shapes=True)
def top_p_mask(logits: torch.Tensor, top_p: torch.Tensor) -> torch.Tensor:
    b, vocab = logits.size()
    out = torch.empty_like(logits)
    for tb in tc.tile(b):
        vals, order = torch.sort(logits[tb, :], dim=1, descending=True)
        probs = torch.softmax(vals, dim=1)
        before = torch.cumsum(probs, dim=1) - probs
        keep = before < top_p[tb][:, None]
        out[tb.index[:, None], order] = torch.where(keep, vals, float("-inf"))
    return out


def _bound(vocab: int, rows: int = 64) -> BoundKernel:
    args = (torch.empty(rows, vocab, device="meta"), torch.empty(rows, device="meta"))
    return BoundKernel(top_p_mask, top_p_mask.bind_arguments(args, {}), target=H200)


def test_the_estimate_counts_the_sorted_keys_and_matches_what_triton_allocates() -> None:
    bound = _bound(3000)
    spec = bound.config_spec
    config = spec.resolve(tc.Config(block_sizes=[2], num_warps=8), warn=False).config
    assert spec.estimated_shared_bytes(config) == 2 * 4096 * 8
    _, _, traced, kernels = bound.generate(config)
    (report,) = run_compile_jobs([CompileJob.of(kernels[0], traced.loops[0], H200)], 300)
    assert report.ok, report.error
    assert report.shared_bytes == spec.estimated_shared_bytes(config)


def test_a_row_no_gpu_can_sort_whole_is_refused_naming_the_sort(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bound = _bound(32000)
    spec = bound.config_spec
    reason = static_check(spec, spec.resolve(spec.default(), warn=False).config)
    assert reason is not None
    assert "sort at test_sort_shared_memory.py:" in reason
    assert "32768 elements needs 262144 bytes" in reason and "at most 16384" in reason
    monkeypatch.setenv("TILECRAFT_NO_AUTOTUNE", "1")
    with pytest.warns(RuntimeWarning), pytest.raises(ConfigError, match="cannot run on cuda:90"):
        without_tuning(bound)


def test_a_row_that_fits_keeps_its_default_under_no_autotune(
    monkeypatch: pytest.MonkeyPatch, tmp_path: object
) -> None:
    monkeypatch.setenv("TILECRAFT_NO_AUTOTUNE", "1")
    monkeypatch.setenv("TILECRAFT_CACHE_DIR", str(tmp_path))
    bound = _bound(8000)
    config = without_tuning(bound)
    assert bound.config_spec.estimated_shared_bytes(config) <= H200.limits.max_shared_bytes


@tc.kernel(static_shapes=True)
def whole_row_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    bh, s, d = q.size()
    out = torch.empty_like(q)
    for tb, tq in tc.tile([bh, s], block_size=[1, None]):
        w = torch.softmax(q[tb.begin, tq, :] @ k[tb.begin, :, :].t(), dim=1)
        out[tb.begin, tq, :] = w @ v[tb.begin, :, :]
    return out


def test_dot_operands_loaded_whole_past_shared_memory_are_named_with_a_remedy() -> None:
    """Whole [1024, 64] fp32 keys and values no block size shrinks: the error said only "its
    staged loads need ... bytes" (a helper's stick-breaking attention)."""
    args = tuple(torch.empty(2, 1024, 64, device="meta") for _ in range(3))
    bound = BoundKernel(
        whole_row_attention, whole_row_attention.bind_arguments(args, {}), target=H200
    )
    spec = bound.config_spec
    reason = static_check(spec, spec.resolve(spec.default(), warn=False).config)
    assert reason is not None and "staged loads need" in reason
    assert "test_sort_shared_memory.py:" in reason and "[1024, 64] float32, 262144 B" in reason
    assert "loop over it in chunks" in reason


@tc.kernel(static_shapes=True)
def decayed_states(states: torch.Tensor, log_decay: torch.Tensor) -> torch.Tensor:
    """A [C, C] fp32 decay matrix computed in registers times the chunk states (state passing
    across C chunks); its rows are a cumsum's dim, so no config can loop them."""
    b, c, d = states.size()
    out = torch.empty([b, c, d], dtype=torch.float32, device=states.device)
    for tb, td in tc.tile([b, d], block_size=[1, None]):
        la = torch.cumsum(log_decay[tb.begin, :].to(torch.float32), dim=0)
        i = tc.arange(c)
        decay = torch.where(i[:, None] >= i[None, :], torch.exp(la[:, None] - la[None, :]), 0.0)
        out[tb.begin, :, td] = tc.dot(decay, states[tb.begin, :, td].to(torch.float32))
    return out


def test_a_computed_left_operand_of_an_fp32_fma_dot_takes_shared_memory() -> None:
    """An fp32 dot on the FMA units takes both operands through shared memory, a computed left
    one too: at 256 chunks the [256, 256] decay matrix alone is 256 KiB. The estimate missed
    it; ptxas refused every config, after 216 s at [32] columns. Now refused before compiling,
    naming the operand; at 64 chunks it fits."""

    def spec_at(chunks: int) -> ConfigSpec:
        args = (
            torch.empty(32, chunks, 1024, device="meta"),
            torch.empty(32, chunks, device="meta"),
        )
        return BoundKernel(
            decayed_states, decayed_states.bind_arguments(args, {}), target=H200
        ).config_spec

    spec = spec_at(256)
    reason = static_check(spec, spec.resolve(spec.default(), warn=False).config)
    assert reason is not None and "staged loads need" in reason, reason
    assert "[256, 256] float32, 262144 B" in reason, reason
    small = spec_at(64)
    assert static_check(small, small.resolve(small.default(), warn=False).config) is None
