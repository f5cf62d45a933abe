"""Held-out kernels rewritten with a feature built after they were timed (the ``rewritten``
set of ``benchmarks.generalize``). Each keeps its held-out case's inputs, reference and shapes,
so the two rows compare the formulations: what the kernel as first written costs, and what the
documented idiom (``docs/patterns.md``) costs.

* ``ctc_loss_forward_gather``: ``ctc_loss_forward_nll`` (``heldout_s22b``) computed each step
  as a masked ``[L, L]`` logsumexp over (source, destination) states because device code could
  not shift a register tile; with ``torch.gather`` (``tl.gather``) a step is ``O(L)``.
* ``ctc_loss_forward_pads``: the same with torch's shift idiom, ``F.pad(alpha[:-1], (1, 0))``
  (constant slices and pads of register tiles, also gathers).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

import tilecraft as tc
from benchmarks.gen_kernels import heldout_s22b
from benchmarks.gen_kernels.case import Case, one_kernel_case

NEG = float("-inf")


def ctc_states(targets: torch.Tensor, row: Any, n_states: int) -> tuple[Any, Any, Any]:
    """Device helper: the extended labels' positions, which are labels (odd) and the label of
    each (blank 0 between them)."""
    pos = tc.arange(n_states)
    is_label = (pos % 2) == 1
    lab = torch.where(is_label, targets[row, torch.clamp((pos - 1) // 2, min=0)], 0)
    return pos, is_label, lab


def ctc_step(alpha: Any, a1: Any, a2: Any, emitted: Any) -> Any:
    """Device helper: one step, alpha_t[s] = logsumexp(alpha[s], alpha[s - 1], alpha[s - 2]) +
    lp[t, l'[s]] from the shifted states (a state not reachable yet stays -inf)."""
    top = torch.maximum(torch.maximum(alpha, a1), a2)
    top = torch.where(top == NEG, 0.0, top)
    total = torch.exp(alpha - top) + torch.exp(a1 - top) + torch.exp(a2 - top)
    return top + torch.log(total) + emitted


def ctc_nll(alpha: Any, pos: Any, n_s: Any) -> Any:
    """Device helper: -logsumexp of the last two states of a target of ``n_s`` labels."""
    last = (pos == 2 * n_s) | (pos == 2 * n_s - 1)
    return -torch.logsumexp(torch.where(last, alpha, NEG), dim=0)


@tc.kernel(static_shapes=True)
def ctc_loss_forward_gather(
    log_probs: torch.Tensor,
    targets: torch.Tensor,
    input_lengths: torch.Tensor,
    target_lengths: torch.Tensor,
) -> torch.Tensor:
    """CTC negative log likelihood per sample, blank 0 (as ``heldout_s22b.ctc_loss_forward``):
    alpha over the L = 2S + 1 extended labels, its s - 1 and s - 2 neighbours gathered from
    registers each step. Returns fp32 [B]."""
    _, b, _ = log_probs.size()
    nll = torch.empty([b], dtype=torch.float32, device=log_probs.device)
    for tb in tc.tile(b, block_size=1):
        pos, is_label, lab = ctc_states(targets, tb.begin, 2 * targets.size(1) + 1)
        back1, back2 = torch.clamp(pos - 1, min=0), torch.clamp(pos - 2, min=0)
        skip = is_label & (pos >= 3) & (lab != torch.gather(lab, 0, back2))
        alpha = torch.where(pos < 2, log_probs[0, tb.begin, lab], NEG)
        for t in tc.grid(1, input_lengths[tb.begin]):
            a1 = torch.where(pos >= 1, torch.gather(alpha, 0, back1), NEG)
            a2 = torch.where(skip, torch.gather(alpha, 0, back2), NEG)
            alpha = ctc_step(alpha, a1, a2, log_probs[t, tb.begin, lab])
        nll[tb.begin] = ctc_nll(alpha, pos, target_lengths[tb.begin])
    return nll


@tc.kernel(static_shapes=True)
def ctc_loss_forward_pads(
    log_probs: torch.Tensor,
    targets: torch.Tensor,
    input_lengths: torch.Tensor,
    target_lengths: torch.Tensor,
) -> torch.Tensor:
    """The same CTC forward with torch's shift idiom: alpha[s - 1] is ``F.pad(alpha[:-1], (1,
    0), value=-inf)`` (a slice and a pad of the register tile: ``frontend/tile_shifts.py``)."""
    _, b, _ = log_probs.size()
    nll = torch.empty([b], dtype=torch.float32, device=log_probs.device)
    for tb in tc.tile(b, block_size=1):
        pos, is_label, lab = ctc_states(targets, tb.begin, 2 * targets.size(1) + 1)
        skip = is_label & (pos >= 3) & (lab != F.pad(lab[:-2], (2, 0), value=-1))
        alpha = torch.where(pos < 2, log_probs[0, tb.begin, lab], NEG)
        for t in tc.grid(1, input_lengths[tb.begin]):
            a1 = F.pad(alpha[:-1], (1, 0), value=NEG)
            a2 = torch.where(skip, F.pad(alpha[:-2], (2, 0), value=NEG), NEG)
            alpha = ctc_step(alpha, a1, a2, log_probs[t, tb.begin, lab])
        nll[tb.begin] = ctc_nll(alpha, pos, target_lengths[tb.begin])
    return nll


def _rewrite(name: str, kernel: tc.Kernel, heldout: str) -> Case:
    """A case of ``kernel`` with the held-out case ``heldout``'s inputs, reference, shapes and
    tolerance (the two rows then compare formulations)."""
    case = next(c for c in heldout_s22b.CASES if c.name == heldout)
    return one_kernel_case(
        name, kernel, case.make_inputs, case.reference, case.gpu_shapes, case.cpu_shapes, case.atol
    )


CASES: list[Case] = [
    _rewrite("ctc_loss_forward_gather", ctc_loss_forward_gather, "ctc_loss_forward_nll"),
    _rewrite("ctc_loss_forward_pads", ctc_loss_forward_pads, "ctc_loss_forward_nll"),
]
