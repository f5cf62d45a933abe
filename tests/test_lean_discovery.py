"""Discovery prefers a config that does not spill hard (``autotune/discover.py``,
``Attempt.lean``): the heuristic default of Mamba-2 SSD's state passing compiled to 32 registers
and 10 KB of local memory a thread on sm_90 (its fp32 FMA dot at K = 64) and ran 49 ms where
torch.compile took 1.55; a smaller tile that fits was a later candidate. A runner that reports
made-up resources drives the choice on the CPU; on the GPU the real kernel must come out lean.
"""

from __future__ import annotations

import io
from typing import Any

import pytest
import torch

import tilecraft as tc
from benchmarks.gen_kernels import HELDOUT
from tilecraft.autotune.classify import HEAVY_SPILL_WORDS, Attempt, Category
from tilecraft.autotune.discover import run_discovery
from tilecraft.autotune.progress import Reporter
from tilecraft.autotune.runner import LEAN_LOOKAHEAD, prefix_has_ok


@tc.kernel
def scaled_rows(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        out[tm, :] = x[tm, :] * 3.0
    return out


class SpillingRunner:
    """Every config works; the first ``spilling`` of them report heavy spills."""

    def __init__(self, spilling: int):
        self.spilling = spilling
        self.options: dict[str, Any] = {}
        self.checked = 0

    def check(self, configs: list[tc.Config], **options: Any) -> list[Attempt | None]:
        self.options = options
        out: list[Attempt | None] = []
        for i, config in enumerate(configs):
            words = 2542 if i < self.spilling else 0
            attempt = Attempt(config, None, "", 0.1, resources={"spills": words})
            options["on_result"](attempt)
            out.append(attempt)
            if options.get("first_ok") and prefix_has_ok(out, options.get("lean", False)):
                break
        self.checked = len(out)
        return out + [None] * (len(configs) - len(out))


def _discover(runner: SpillingRunner, stream: io.StringIO) -> Any:
    x = torch.randn(40, 64)
    bound = scaled_rows.bind((x,))
    reporter = Reporter("scaled_rows", stream=stream)
    return run_discovery(bound, (x,), use_cache=False, runner=runner, reporter=reporter)  # type: ignore[arg-type]


def test_a_spilling_default_gives_way_to_the_first_lean_candidate() -> None:
    stream = io.StringIO()
    runner = SpillingRunner(spilling=2)
    found = _discover(runner, stream)
    assert runner.options["lean"] and runner.options["first_ok"]
    assert found.rank == 2 and not found.heuristic_ok
    assert found.config == found.attempts[2].config
    assert "2 spilling hard (10168 bytes a thread)" in stream.getvalue(), stream.getvalue()


def test_when_every_candidate_spills_the_first_that_works_wins() -> None:
    runner = SpillingRunner(spilling=99)
    found = _discover(runner, io.StringIO())
    assert found.rank == 0 and found.heuristic_ok
    assert runner.checked <= 1 + LEAN_LOOKAHEAD  # not every candidate: a few past the first


def test_a_lean_prefix_is_what_stops_a_lean_check() -> None:
    spilled = Attempt(tc.Config(), None, resources={"spills": HEAVY_SPILL_WORDS + 1})
    fits = Attempt(tc.Config(), None, resources={"spills": HEAVY_SPILL_WORDS})
    assert prefix_has_ok([spilled, None]) and not prefix_has_ok([spilled, None], lean=True)
    assert prefix_has_ok([spilled, fits], lean=True)
    failed = Attempt(tc.Config(), Category.COMPILE_ERROR)
    looked = [failed, spilled, *[spilled] * LEAN_LOOKAHEAD]  # enough past the first that works
    assert not prefix_has_ok(looked[:-1], lean=True) and prefix_has_ok(looked, lean=True)
    assert Attempt(tc.Config(), None).lean  # the interpreter reports no resources


@pytest.mark.gpu
def test_mamba2_state_passing_discovers_a_config_that_fits() -> None:
    case = HELDOUT["ssd_segsum_state_passing"]
    args = case.make_inputs(case.gpu_shapes[0], "cuda", 0)
    kernel = tc.kernel(case.kernels[0].fn, static_shapes=True)
    found = run_discovery(kernel.bind(args), args, use_cache=False)
    winner = next(a for a in found.attempts if a.config == found.config)
    assert winner.resources.get("spills", 0) <= HEAVY_SPILL_WORDS, found.attempts
    want = case.reference(*args)
    for got, expected in zip(kernel(*args), want, strict=True):
        torch.testing.assert_close(got, expected, atol=case.atol, rtol=1e-4)
