"""Gathers into a longer line than their source's (fuzz round 52b): group statistics expanded to
channels with ``repeat_interleave`` by a group size that is not a power of two, a ``torch.cat``
or ``F.pad`` of short rows. Triton 3.6 fails to compile such a ``tl.gather``
(TritonGPUOptimizeThreadLocality, sm_90 and gfx942, every config discovery tried); they go
through a scratch row in memory, or where no row exists (a run-time grid, a split loop) a
one-hot select. Interpreter numerics against eager, cross-compiles for cuda:90 / gfx942."""

from __future__ import annotations

import pytest
import torch

import tilecraft as tc
from tilecraft.autotune.candidates import candidates
from tilecraft.codegen import homes
from tilecraft.targets.target import Target
from tilecraft.tools.check import check_kernel

TARGETS = [Target.parse("cuda:90"), Target.parse("hip:gfx942")]


@tc.kernel(static_shapes=True)
def center_by_group(x: torch.Tensor, groups: int) -> torch.Tensor:
    n, c, hw = x.size()
    cg = c // groups
    xv = x.view(n, groups, cg, hw)
    out = torch.empty_like(x)
    for tn in tc.tile(n):
        m = xv[tn, :, :, :].float().mean(dim=[2, 3])  # [tn, G]
        mc = m.repeat_interleave(cg, dim=1)  # [tn, C]
        out[tn, :, :] = (x[tn, :, :].float() - mc[:, :, None]).to(out.dtype)
    return out


@tc.kernel(static_shapes=True)
def packed_stats(x: torch.Tensor, groups: int) -> torch.Tensor:
    n, _, _ = x.size()
    xv = x.view(n, groups, -1)
    stats = torch.empty([n, 2 * groups], dtype=torch.float32, device=x.device)
    for tn in tc.tile(n):
        var, mean = torch.var_mean(xv[tn, :, :].float(), dim=-1, correction=0)
        stats[tn, :] = torch.cat([mean, torch.rsqrt(var + 1e-5)], dim=1)
    return stats


def _centered(x: torch.Tensor, groups: int) -> torch.Tensor:
    n, c, hw = x.shape
    means = x.view(n, groups, c // groups, hw).mean(dim=[2, 3])
    return x - means.repeat_interleave(c // groups, dim=1)[:, :, None]


def _stats(x: torch.Tensor, groups: int) -> torch.Tensor:
    var, mean = torch.var_mean(x.view(x.shape[0], groups, -1), dim=-1, correction=0)
    return torch.cat([mean, torch.rsqrt(var + 1e-5)], dim=1)


@pytest.mark.parametrize("rows", ["memory", "one_hot"])
def test_widening_gathers_match_eager(
    device: str, rows: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if rows == "one_hot":  # as where no scratch row exists (a run-time grid, a split loop)
        monkeypatch.setattr(homes, "gathers_through_memory", lambda loop, plan: [])
    x = torch.randn(3, 320, 5, device=device)
    center_by_group.reset()
    torch.testing.assert_close(center_by_group(x, 32), _centered(x, 32), atol=1e-5, rtol=1e-5)
    y = torch.randn(4, 15, 7, device=device)
    packed_stats.reset()
    torch.testing.assert_close(packed_stats(y, 5), _stats(y, 5), atol=1e-4, rtol=1e-4)


@pytest.mark.crosscompile
@pytest.mark.parametrize("rows", ["memory", "one_hot"])
def test_widening_gathers_compile_for_gpus(rows: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every discovery candidate compiles (none did: 'PassManager::run failed')."""
    if rows == "one_hot":
        monkeypatch.setattr(homes, "gathers_through_memory", lambda loop, plan: [])
    for kernel, args in (
        (center_by_group, (torch.randn(4, 320, 5), 32)),
        (packed_stats, (torch.randn(4, 15, 7), 5)),
    ):
        code = kernel.bind(args).to_triton_code(kernel.bind(args).config_spec.default())
        assert "tl.gather" not in code, code
        assert ("one-hot select" in code) == (rows == "one_hot"), code
        assert ("gather_row" in code) == (rows == "memory"), code
        found = check_kernel(kernel, args, TARGETS, lambda b: candidates(b.config_spec)[0])
        assert found and all(r.report is not None and r.report.ok for r in found), [
            (r.config, r.status) for r in found
        ]
