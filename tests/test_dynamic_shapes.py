"""Dynamic shapes (static_shapes=False): run-time sizes as kernel parameters."""

from __future__ import annotations

import pytest
import torch

import tilecraft as tc
from tilecraft.errors import ShapeError, UnsupportedOpError


def _shift_rows(x: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
    n, v = x.size()  # `v`, as a temporary of the generated code might be named
    out = torch.empty_like(x)
    for tn in tc.tile(n):
        s = shift[tn]
        for tv in tc.tile(v):
            out[tn, tv] = x[tn, tv] - s[:, None]
    return out


def test_a_run_time_size_keeps_its_name_from_the_generated_temporaries(device: str) -> None:
    """With dynamic shapes the inner loop's bound ``v`` is a kernel parameter, met only when
    the loop is emitted: a temporary ``v = s[:, None]`` had taken the name (interpreter shape
    error, or garbage from the second chunk on)."""
    kernel = tc.kernel(static_shapes=False, config=tc.Config(block_sizes=[2, 16]))(_shift_rows)
    x, shift = torch.randn(7, 50, device=device), torch.randn(7, device=device)
    torch.testing.assert_close(kernel(x, shift), x - shift[:, None])


@tc.kernel(static_shapes=False)
def specialized_head_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """docs/patterns.md's attention with the head dim specialized and the sequence dynamic:
    the accumulator's [tq, d] is static, k[tk, :] and v[tk, :] keep their run-time dim."""
    s, d = q.size()
    d = tc.specialize(d)
    out = torch.empty_like(q)
    for tq in tc.tile(s):
        qt = q[tq, :] * (1.0 / d**0.5)
        m_i = tc.full([tq], float("-inf"), dtype=torch.float32)
        l_i = tc.zeros([tq], dtype=torch.float32)
        acc = tc.zeros([tq, d], dtype=torch.float32)
        for tk in tc.tile(s):
            scores = tc.dot(qt, k[tk, :].t())
            m_new = torch.maximum(m_i, scores.amax(dim=1))
            p = torch.exp(scores - m_new[:, None])
            alpha = torch.exp(m_i - m_new)
            l_i = l_i * alpha + p.sum(dim=1)
            acc = acc * alpha[:, None] + tc.dot(p, v[tk, :])
            m_i = m_new
        out[tq, :] = acc / l_i[:, None]
    return out


def _attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return torch.softmax(q @ k.t() / q.size(1) ** 0.5, -1) @ v


def test_a_run_time_dim_stands_where_its_specialized_extent_is_wanted(device: str) -> None:
    """v[tk, :] (a run-time head dim) beside tc.zeros([tq, d]) with d specialized: the run-time
    dim takes the static one's place, the launch checking its extent (a ShapeError for
    another size, not a read of other positions); other head sizes compile again."""
    for s, d in ((40, 16), (70, 16), (33, 32)):
        q, k, v = (torch.randn(s, d, device=device) for _ in range(3))
        got = specialized_head_attention(q, k, v)
        torch.testing.assert_close(got, _attention(q, k, v), rtol=1e-4, atol=1e-4)
    q, k = torch.randn(40, 16, device=device), torch.randn(40, 16, device=device)
    with pytest.raises(ShapeError, match=r"v\.shape\[1\]"):  # (same size bucket: launch check)
        specialized_head_attention(q, k, torch.randn(40, 15, device=device))
    with pytest.raises(ShapeError, match="do not broadcast"):  # (another bucket: traced again)
        specialized_head_attention(q, k, torch.randn(40, 32, device=device))


def test_an_open_ended_slice_of_a_run_time_dim_says_the_end_is_the_size() -> None:
    """The hint said 'tc.specialize the size' to a user who had specialized the start."""

    @tc.kernel(static_shapes=False)
    def second_half(x: torch.Tensor) -> torch.Tensor:
        m, d = x.size()
        half = tc.specialize(d // 2)
        out = torch.empty([m, half], dtype=x.dtype, device=x.device)
        for tm in tc.tile(m):
            out[tm, :] = x[tm, half:]
        return out

    with pytest.raises(UnsupportedOpError, match="depends on its size") as info:
        second_half(torch.randn(4, 16))
    assert "give the end as an int too (8:8 + n" in str(info.value)


@tc.kernel(static_shapes=False)
def first_half(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    n = tc.specialize(n)
    h = n // 2 - 1 + 1  # host arithmetic on a specialized int: still baked
    out = torch.empty([m, h], dtype=x.dtype, device=x.device)
    for tm in tc.tile(m):
        out[tm, :] = x[tm, :h]
    return out


def test_host_arithmetic_on_a_specialized_int_stays_specialized(device: str) -> None:
    """``h = n // 2`` of ``n = tc.specialize(n)`` became a plain (run-time) int: its slice
    was refused with a hint to use tc.specialize, which the code did (fuzzing, session 48)."""
    for n in (1000, 64):
        x = torch.randn(37, n, device=device)
        assert torch.equal(first_half(x), x[:, : n // 2])
    n = tc.specialize(10)
    assert isinstance(n // 2 + 1, tc.Specialized) and not isinstance(n / 2, tc.Specialized)
