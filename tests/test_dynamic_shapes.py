"""Dynamic shapes (static_shapes=False): run-time sizes as kernel parameters."""

from __future__ import annotations

import torch

import tilecraft as tc


def _shift_rows(x: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
    n, v = x.size()  # `v`, as a temporary of the generated code might be named
    out = torch.empty_like(x)
    for tn in tc.tile(n):
        s = shift[tn]
        for tv in tc.tile(v):
            out[tn, tv] = x[tn, tv] - s[:, None]
    return out


def test_a_run_time_size_keeps_its_name_from_the_generated_temporaries() -> None:
    """With dynamic shapes the inner loop's bound ``v`` is a kernel parameter, met only when
    the loop is emitted: a temporary ``v = s[:, None]`` had taken the name (interpreter shape
    error, or garbage from the second chunk on)."""
    kernel = tc.kernel(static_shapes=False, config=tc.Config(block_sizes=[2, 16]))(_shift_rows)
    x, shift = torch.randn(7, 50), torch.randn(7)
    torch.testing.assert_close(kernel(x, shift), x - shift[:, None])
