"""Philox 4x32-10 in eager PyTorch, bit-exact with Triton's ``tl.rand(seed, offset)`` (stage: ir;
the eager meaning of the ``philox_rand`` pointwise op, used by ref mode and references).

Values are kept in int64 tensors holding unsigned 32-bit numbers; a 32x32-bit product is split
into 16-bit halves so that nothing overflows int64.
"""

from __future__ import annotations

import torch

MASK = 0xFFFFFFFF
KEY_A, KEY_B = 0x9E3779B9, 0xBB67AE85
ROUND_A, ROUND_B = 0xD2511F53, 0xCD9E8D57
ROUNDS = 10
SCALE = 4.6566127342e-10  # tl.rand's int32 -> [0, 1) scale


def _mul_hi_lo(a: int, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(high, low) 32-bit words of ``a * b`` for a 32-bit constant ``a``."""
    b_hi, b_lo = b >> 16, b & 0xFFFF
    p_hi, p_lo = a * b_hi, a * b_lo  # each < 2**48
    high = (p_hi + (p_lo >> 16)) >> 16
    low = (((p_hi & 0xFFFF) << 16) + p_lo) & MASK
    return high & MASK, low


def philox_uint32(seed: int, offset: torch.Tensor) -> torch.Tensor:
    """The first Philox output word for counters ``(offset, 0, 0, 0)`` and key ``seed``."""
    c0 = offset.to(torch.int64) & MASK
    c1 = (offset.to(torch.int64) >> 32) & MASK
    c2 = torch.zeros_like(c0)
    c3 = torch.zeros_like(c0)
    k0, k1 = int(seed) & MASK, (int(seed) >> 32) & MASK
    for _ in range(ROUNDS):
        hi_b, lo_b = _mul_hi_lo(ROUND_B, c2)
        hi_a, lo_a = _mul_hi_lo(ROUND_A, c0)
        c0, c2 = hi_b ^ c1 ^ k0, hi_a ^ c3 ^ k1
        c1, c3 = lo_b, lo_a
        k0, k1 = (k0 + KEY_A) & MASK, (k1 + KEY_B) & MASK
    return c0


def rand(seed: int, offset: torch.Tensor) -> torch.Tensor:
    """``tl.rand(seed, offset)``: uniform fp32 in [0, 1)."""
    x = philox_uint32(seed, offset)
    x = torch.where(x >= 2**31, x - 2**32, x)  # bitcast to int32
    x = torch.where(x < 0, -x - 1, x)
    return x.to(torch.float32) * torch.tensor(SCALE, dtype=torch.float32)
