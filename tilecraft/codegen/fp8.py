"""Casts to and from fp8 tiles (stage: codegen; in: a cast's source text and dtypes; out: the
Triton expression).

Casts to ``float8_e4m3fn`` / ``float8_e5m2`` go through helpers in
:mod:`tilecraft.runtime.triton_helpers` that compute the fp8 bits as PyTorch does on the same
device (round to nearest even; e5m2 overflows to inf; NaN stays NaN; e4m3fn overflow saturates to
+-448 on the CPU, i.e. in the interpreter, and on a GPU becomes NaN past 464 - what rounds to
480 or more - as torch.cuda's conversion does), so results are bit-identical to
``tensor.to(float8)`` there. On NVIDIA sm_89+ the hardware conversion does the rounding and a
select gives torch's overflow patterns (the bit arithmetic is ~25 integer ops an element, more
than a memory-bound quantization can hide). Casts from fp8 are exact in hardware; Triton's
interpreter decodes NaN and inf patterns as numbers, so there a helper fixes those up.
"""

from __future__ import annotations

import torch

from tilecraft.ir import dtypes
from tilecraft.ir.dtypes import FP8

_TO = {torch.float8_e4m3fn: "_tc_to_fp8e4nv", torch.float8_e5m2: "_tc_to_fp8e5"}
_INF_BITS = {torch.float8_e4m3fn: 0, torch.float8_e5m2: 0x7C}  # e4m3fn has no inf


_FP8_WIDENS_TO = (torch.float16, torch.bfloat16, torch.float32)


def cast_expr(
    text: str, src: torch.dtype, dst: torch.dtype, interpret: bool, hardware: bool = False
) -> str:
    """The cast of ``text`` from ``src`` to ``dst``, one of them fp8; ``hardware``: the target
    converts to fp8 rounding to nearest even (``Target.fp8_conversions``)."""
    if dst in FP8:
        if src in FP8:  # between the two formats: through fp32, which holds both exactly
            text = cast_expr(text, src, torch.float32, interpret)
        if hardware and not interpret:
            return f"{_TO[dst]}_cvt({text})"
        helper = "_tc_to_fp8e4nv_gpu" if dst == torch.float8_e4m3fn and not interpret else _TO[dst]
        return f"{helper}({text})"
    if interpret:
        text = f"_tc_from_fp8({text}, {_INF_BITS[src]})"
        src = torch.float32
    elif dst not in _FP8_WIDENS_TO:
        # Triton converts fp8 to 16- and 32-bit floats only: to an int it failed ("cannot cast
        # fp8e4nv to int32"), to fp64 in its pass manager, for sm_90 and gfx942
        text, src = f"{text}.to(tl.float32)", torch.float32
    if dst == torch.bool:
        return f"({text} != 0)"
    return text if dst == src else f"{text}.to({dtypes.triton_dtype(dst)})"
