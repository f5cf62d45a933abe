"""User-style reduction kernels: a two-pass online softmax looped over the row, a column sum of a
tall-skinny input with a 2-D accumulator reduced once at the end, and a per-row KL divergence
between two logit tensors. Each comes with its eager reference (see :mod:`.case`)."""

from __future__ import annotations

import torch

import tilecraft as tc
from benchmarks.gen_kernels.case import Case, Inputs, gen, randn


@tc.kernel(static_shapes=True)
def online_softmax(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        run_max = tc.full([tm], float("-inf"), dtype=torch.float32)
        run_sum = tc.zeros([tm], dtype=torch.float32)
        for tn in tc.tile(n):
            chunk = x[tm, tn].to(torch.float32)
            chunk = torch.where(tn.index[None, :] < n, chunk, float("-inf"))
            new_max = torch.maximum(run_max, torch.amax(chunk, dim=-1))
            rescale = torch.exp(run_max - new_max)
            run_sum = run_sum * rescale + torch.sum(torch.exp(chunk - new_max[:, None]), dim=-1)
            run_max = new_max
        for tn in tc.tile(n):
            e = torch.exp(x[tm, tn].to(torch.float32) - run_max[:, None])
            out[tm, tn] = (e / run_sum[:, None]).to(out.dtype)
    return out


def _logits(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    return (randn(shape, torch.bfloat16, device, gen(seed)) * 4,)


def softmax_reference(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x.float(), dim=-1).to(x.dtype)


@tc.kernel(static_shapes=True)
def column_sum(x: torch.Tensor) -> torch.Tensor:
    rows_block = tc.register_block_size(x.size(0))
    m, n = x.size()
    out = torch.empty([n], dtype=torch.float32, device=x.device)
    for tn in tc.tile(n):
        acc = tc.zeros([tn], dtype=torch.float32)
        for tm in tc.tile(m, block_size=rows_block):
            acc = acc + x[tm, tn].to(torch.float32).sum(dim=0)
        out[tn] = acc
    return out


def column_sum_reference(x: torch.Tensor) -> torch.Tensor:
    return x.float().sum(0)


@tc.kernel(static_shapes=True)
def kl_div_rows(p_logits: torch.Tensor, q_logits: torch.Tensor) -> torch.Tensor:
    m, n = p_logits.size()
    out = torch.empty([m], dtype=torch.float32, device=p_logits.device)
    for tm in tc.tile(m):
        a = p_logits[tm, :].to(torch.float32)
        b = q_logits[tm, :].to(torch.float32)
        log_p = a - torch.logsumexp(a, dim=-1)[:, None]
        log_q = b - torch.logsumexp(b, dim=-1)[:, None]
        out[tm] = torch.sum(torch.exp(log_p) * (log_p - log_q), dim=-1)
    return out


def _two_logits(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    g = gen(seed)
    p = randn(shape, torch.bfloat16, device, g) * 2
    # q near p, as between a model and its distilled student: the KL stays small but non-zero
    return p, (p.float() + 0.5 * randn(shape, torch.float32, device, g)).to(torch.bfloat16)


def kl_reference(p_logits: torch.Tensor, q_logits: torch.Tensor) -> torch.Tensor:
    """KL(p || q) per row, as ``F.kl_div`` computes it from log-probabilities."""
    log_p = torch.log_softmax(p_logits.float(), dim=-1)
    log_q = torch.log_softmax(q_logits.float(), dim=-1)
    kl = torch.nn.functional.kl_div(log_q, log_p, reduction="none", log_target=True)
    return kl.sum(-1)


CASES = [
    Case(
        name="online_softmax_two_pass",
        kernels=(online_softmax,),
        make_inputs=_logits,
        reference=softmax_reference,
        run=lambda k, inp: k["online_softmax"](*inp),
        gpu_shapes=((8192, 8192), (4096, 131072)),
        cpu_shapes=((11, 700),),
        atol=0.01,
    ),
    Case(
        name="column_sum_tall",
        kernels=(column_sum,),
        make_inputs=lambda shape, device, seed: (randn(shape, torch.bfloat16, device, gen(seed)),),
        reference=column_sum_reference,
        run=lambda k, inp: k["column_sum"](*inp),
        gpu_shapes=((65536, 1024),),
        cpu_shapes=((700, 40),),
        atol=1e-3,
    ),
    Case(
        name="kl_div_rows",
        kernels=(kl_div_rows,),
        make_inputs=_two_logits,
        reference=kl_reference,
        run=lambda k, inp: k["kl_div_rows"](*inp),
        gpu_shapes=((4096, 32000),),
        cpu_shapes=((9, 500),),
        atol=1e-3,
    ),
]
