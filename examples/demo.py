"""A tour of tilecraft on two kernels: ``python -m examples.demo``.

Runs RMSNorm (forward + backward) and LayerNorm (forward + the two-level backward) on the GPU if
there is one, else on the CPU through Triton's interpreter with small shapes. For every kernel it
prints the config it uses, the generated Triton (first lines), and on a GPU a timing; then the
largest error of each output against the eager PyTorch reference.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import torch

if torch.cuda.is_available():
    DEVICE = "cuda"
else:  # the interpreter must be chosen before triton is imported
    if os.environ.get("TRITON_INTERPRET") != "1":
        os.environ["TRITON_INTERPRET"] = "1"
        if "triton" in sys.modules:  # `python -m examples.demo` imports the examples package first
            os.execv(sys.executable, [sys.executable, "-m", "examples.demo", *sys.argv[1:]])
    DEVICE = "cpu"

import tilecraft as tc  # noqa: E402
from examples import layer_norm, rms_norm  # noqa: E402

SHAPE = (8192, 4096) if DEVICE == "cuda" else (64, 300)
DTYPE = torch.bfloat16 if DEVICE == "cuda" else torch.float32
TOLERANCE = {torch.bfloat16: 2e-2}.get(DTYPE, 1e-4)  # largest error / largest |reference|
CODE_LINES = 30
SHOW_CODE_FOR = {"layer_norm_bwd", "rms_norm_fwd"}


def pick_config(bound: tc.BoundKernel, args: tuple[Any, ...]) -> tc.Config:
    """The config to run ``bound`` with: discovered by the autotuner on the real inputs (candidates
    compiled and run in worker processes on a GPU, checked against ref mode; cached on disk)."""
    from tilecraft.autotune import run_discovery

    found = run_discovery(bound, args, isolate=DEVICE == "cuda")
    how = "cached" if found.cached else f"candidate {found.rank + 1} of {len(found.attempts)} tried"
    print(f"discovered a working config for {bound.kernel.__name__} ({how})")
    return found.config


def bench_ms(fn: Any) -> float | None:
    if DEVICE != "cuda":
        return None
    import triton.testing

    return float(triton.testing.do_bench(fn))


def make_call(names: dict[int, str]) -> Any:
    """A ``call`` hook for ``module.run`` that reports on each kernel it launches."""

    def call(kernel: tc.Kernel, *args: Any) -> Any:
        name = names[id(kernel)]
        bound = kernel.bind(args)
        config = pick_config(bound, args)
        start = time.perf_counter()
        program = bound.compile_config(config)
        print(f"\n== {name}: {config}  (generated in {time.perf_counter() - start:.2f}s)")
        if name in SHOW_CODE_FOR:
            lines = bound.to_triton_code(config).splitlines()
            start_at = next((i for i, line in enumerate(lines) if "@triton.jit" in line), 0)
            print("\n".join(lines[start_at : start_at + CODE_LINES]))
            print(f"... ({len(lines)} lines of generated code in all)")
        out = bound.run(program, *args)
        ms = bench_ms(lambda: bound.run(program, *args))
        if ms is not None:
            print(f"time: {ms:.3f} ms")
        return out

    return call


def main() -> None:
    print(
        f"tilecraft demo on {DEVICE} ({'GPU' if DEVICE == 'cuda' else 'Triton interpreter'}), "
        f"shape {SHAPE}, {DTYPE}"
    )
    for module in (rms_norm, layer_norm):
        inputs = module.make_inputs(SHAPE, DTYPE, DEVICE, seed=0)
        names = {id(k): n for n, k in module.KERNELS.items()}
        outputs = module.run(inputs, make_call(names))
        expected = module.reference(*inputs)
        worst = 0.0
        report = []
        for a, e in zip(outputs, expected, strict=True):
            err = (a.float() - e.float()).abs().max().item()
            rel = err / max(e.float().abs().max().item(), 1e-6)
            worst = max(worst, rel)
            report.append(f"{err:.2e} ({rel:.1e} rel.)")
        verdict = "OK" if worst <= TOLERANCE else "MISMATCH"
        print(f"\n{module.__name__}: {verdict}; max abs error per output: {', '.join(report)}")


if __name__ == "__main__":
    main()
