"""Split reductions of an online softmax's running max and sum of exponentials
(``ir/split.softmax_pairs``, ``codegen/split.py``): attention statistics over a long key range
with one program per batch element (NSA's block scores, SnapKV's votes) ran on 64 programs of a
132-SM H100. Which loops pair up, the combine's code, interpreter numerics against eager
PyTorch with shares that see only masked keys, the default at a GPU shape, cross-compiles."""

from __future__ import annotations

import pytest
import torch

import tilecraft as tc
from tests.cross_targets import assert_defaults_cross_compile
from tilecraft.ir.split import SplitSite, split_site
from tilecraft.runtime.kernel import BoundKernel
from tilecraft.targets.target import Target


@tc.kernel(static_shapes=True)
def key_votes(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """W window queries attend causally (query i sits at position T - W + i) over T keys; each
    key's votes are its probabilities summed over the queries. One program per batch element."""
    b, w, d = q.size()
    t = k.size(1)
    votes = torch.empty([b, t], dtype=torch.float32, device=q.device)
    for tb in tc.tile(b, block_size=1):
        qt = q[tb.begin, :, :].to(torch.float32)
        qpos = t - w + tc.arange(w)
        m_i = tc.full([w], float("-inf"), dtype=torch.float32)
        l_i = tc.zeros([w], dtype=torch.float32)
        for tk in tc.tile(t):
            s = qt @ k[tb.begin, tk, :].to(torch.float32).t()
            s = torch.where(tk.index[None, :] <= qpos[:, None], s, float("-inf"))
            m_new = torch.maximum(m_i, s.amax(dim=1))
            l_i = l_i * torch.exp(m_i - m_new) + torch.exp(s - m_new[:, None]).sum(dim=1)
            m_i = m_new
        for tk in tc.tile(t):
            s = qt @ k[tb.begin, tk, :].to(torch.float32).t()
            s = torch.where(tk.index[None, :] <= qpos[:, None], s, float("-inf"))
            votes[tb.begin, tk] = (torch.exp(s - m_i[:, None]) / l_i[:, None]).sum(dim=0)
    return votes


@tc.kernel(static_shapes=True)
def unscaled_sum(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """The sum forgets to rescale by exp(m - m_new): not a softmax's sum, never split."""
    b, w, d = q.size()
    out = torch.empty([b, w], dtype=torch.float32, device=q.device)
    for tb in tc.tile(b, block_size=1):
        qt = q[tb.begin, :, :].to(torch.float32)
        m_i = tc.full([w], float("-inf"), dtype=torch.float32)
        l_i = tc.zeros([w], dtype=torch.float32)
        for tk in tc.tile(k.size(1)):
            s = qt @ k[tb.begin, tk, :].to(torch.float32).t()
            m_new = torch.maximum(m_i, s.amax(dim=1))
            l_i = l_i + torch.exp(s - m_new[:, None]).sum(dim=1)
            m_i = m_new
        out[tb.begin, :] = l_i / m_i
    return out


@tc.kernel(static_shapes=True)
def decode_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Flash decoding as users write it: G query heads share a key head (the dot's M), one
    program per (batch, key head), the accumulator rescaled with the running max."""
    b, g, d = q.size()
    out = torch.empty([b, g, d], dtype=torch.float32, device=q.device)
    for tb in tc.tile(b, block_size=1):
        qt = q[tb.begin, :, :].to(torch.float32)
        m_i = tc.full([g], float("-inf"), dtype=torch.float32)
        l_i = tc.zeros([g], dtype=torch.float32)
        acc = tc.zeros([g, d], dtype=torch.float32)
        for tk in tc.tile(k.size(1)):
            s = qt @ k[tb.begin, tk, :].to(torch.float32).t()
            m_new = torch.maximum(m_i, s.amax(dim=-1))
            alpha = torch.exp(m_i - m_new)
            p = torch.exp(s - m_new[:, None])
            l_i = l_i * alpha + p.sum(dim=-1)
            acc = acc * alpha[:, None] + p @ v[tb.begin, tk, :].to(torch.float32)
            m_i = m_new
        out[tb.begin, :, :] = acc / l_i[:, None]
    return out


def key_votes_reference(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    w, t = q.size(1), k.size(1)
    s = q.float() @ k.float().transpose(1, 2)
    keys, queries = torch.arange(t, device=q.device), t - w + torch.arange(w, device=q.device)
    s = s.masked_fill(keys[None, None, :] > queries[None, :, None], float("-inf"))
    return s.softmax(-1).sum(1)


def _bind(kernel: tc.Kernel, *args: torch.Tensor, target: str = "cuda:90") -> BoundKernel:
    return BoundKernel(kernel, kernel.bind_arguments(args, {}), target=Target.parse(target))


def _meta(*shape: int) -> torch.Tensor:
    return torch.empty(*shape, dtype=torch.bfloat16, device="meta")


def test_the_running_max_and_its_sum_of_exponentials_pair_up() -> None:
    bound = _bind(key_votes, _meta(2, 16, 32), _meta(2, 100, 32))
    site, why = split_site(bound.traced.loops[0])
    assert isinstance(site, SplitSite), why
    kinds = {a.carry.hint: (a.kind, a.relative_to) for a in site.accumulators}
    assert kinds["m_i"] == ("max", None)
    assert kinds["l_i"][0] == "sum" and kinds["l_i"][1] is not None
    assert kinds["l_i"][1].hint == "m_i"
    assert len(site.shared) == 1  # the probabilities' pass: each share writes its own keys
    bound = _bind(unscaled_sum, _meta(2, 16, 32), _meta(2, 100, 32))
    site, why = split_site(bound.traced.loops[0])
    assert site is None and "'l_i' is updated with a value that depends on" in why, why


def test_the_combine_rescales_each_share_by_its_own_max() -> None:
    bound = _bind(key_votes, _meta(2, 16, 32), _meta(2, 100, 32))
    config = tc.Config(block_sizes=[16, 16], split_reductions=[3])
    kernels = bound.generate(config)[3]
    combine = kernels[0].companions[0].device_source
    assert combine.count("* tl.exp(m_i_share") == 4, combine  # the init and three shares
    assert combine.count("m_i_all = tl.maximum(m_i_all, tl.load(") == 3, combine


@pytest.mark.parametrize("split", [1, 2, 3, 7])
def test_split_softmax_statistics_match_eager(split: int, device: str) -> None:
    """100 keys in blocks of 16: at 7 shares the last holds keys 96-99, which the first 12
    queries never see (its running max stays -inf, its sum 0 * nan)."""
    g = torch.Generator().manual_seed(0)
    q = torch.randn(3, 16, 32, generator=g).to(device)
    k = torch.randn(3, 100, 32, generator=g).to(device)
    config = tc.Config(block_sizes=[16, 16], split_reductions=[split])
    kernel = tc.kernel(key_votes.fn, static_shapes=True, config=config)
    got = kernel(q, k)
    assert not got.isnan().any()
    torch.testing.assert_close(got, key_votes_reference(q, k), rtol=1e-4, atol=1e-5)


def test_flash_decodings_accumulator_splits_with_its_max(device: str) -> None:
    """``acc = acc * alpha[:, None] + p @ v`` (traced as ``tc.dot(p, v, acc=acc * alpha)``)
    combines like the sum: sum_s acc_s * exp(m_s - M) along the max's dims."""
    bound = _bind(decode_attention, _meta(2, 16, 64), _meta(2, 300, 64), _meta(2, 300, 64))
    site, why = split_site(bound.traced.loops[0])
    assert isinstance(site, SplitSite), why
    relative = {a.carry.hint: a.relative_to.hint for a in site.accumulators if a.relative_to}
    assert relative == {"l_i": "m_i", "acc": "m_i"}, relative
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, n, 64, generator=g).to(device) for n in (16, 300, 300))
    want = torch.softmax(q @ k.transpose(1, 2), -1) @ v
    for split in (1, 3, 5, 10):  # 10 shares: the combine loops over them
        config = tc.Config(block_sizes=[32], split_reductions=[split])
        kernel = tc.kernel(decode_attention.fn, static_shapes=True, config=config)
        torch.testing.assert_close(kernel(q, k, v), want, rtol=1e-4, atol=1e-5)
    args = (_meta(4, 16, 128), _meta(4, 32768, 128), _meta(4, 32768, 128))
    assert _bind(decode_attention, *args).config_spec.default().split_reductions[0] > 1
    assert_defaults_cross_compile(decode_attention, args)


def test_few_programs_over_long_keys_split_by_default() -> None:
    """16 programs over 32768 keys on a 132-SM H100: the default splits the statistics pass
    and shares the probabilities' pass."""
    args = (_meta(16, 16, 128), _meta(16, 32768, 128))
    default = _bind(key_votes, *args).config_spec.default()
    assert default.split_reductions[0] > 1, default
    assert_defaults_cross_compile(key_votes, args)


# -- a rolled row's two passes: max, then sums of exponentials relative to it -------------------


@tc.kernel(static_shapes=True)
def row_lse_and_probs(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A few long rows (sampling over a vocabulary): torch.logsumexp and torch.softmax of the
    whole row, each a max over the row and then a sum of exp(x - max)."""
    r, v = logits.size()
    lse = torch.empty([r], dtype=torch.float32, device=logits.device)
    probs = torch.empty([r, v], dtype=torch.float32, device=logits.device)
    for tr in tc.tile(r):
        x = logits[tr, :].to(torch.float32)
        lse[tr] = torch.logsumexp(x, dim=-1)
        probs[tr, :] = torch.softmax(x, dim=-1)
    return lse, probs


@tc.kernel(static_shapes=True)
def row_variance(x: torch.Tensor) -> torch.Tensor:
    """A second pass that is no sum of exponentials: sum((x - mean)^2) cannot combine."""
    r, v = x.size()
    out = torch.empty([r], dtype=torch.float32, device=x.device)
    for tr in tc.tile(r):
        xt = x[tr, :].to(torch.float32)
        out[tr] = ((xt - xt.mean(dim=-1, keepdim=True)) ** 2).sum(dim=-1)
    return out


def _vocab(rows: int, n: int, device: str) -> torch.Tensor:
    x = (torch.randn(rows, n, generator=torch.Generator().manual_seed(3)) * 4).bfloat16()
    x[1, :] = float("-inf")  # a row of -inf: logsumexp -inf, softmax NaN (as torch)
    x[2, 100:] = float("-inf")  # most shares of this row see only -inf
    return x.to(device)


def test_logsumexp_and_softmax_rows_are_rolled_sites_with_relative_sums() -> None:
    bound = row_lse_and_probs.bind((_vocab(3, 5000, "cpu"),))
    ((site, why),) = bound.config_spec.split_sites
    assert site is not None and site.passes == 2, why
    assert len(site.relative) == 2 and {r.m.attrs["kind"] for r in site.relative} == {"max"}
    assert all(r.total.attrs["kind"] == "sum" for r in site.relative)
    ((variance, why),) = row_variance.bind((torch.randn(3, 5000),)).config_spec.split_sites
    assert variance is None and "depend on each other (2 passes" in why, why


@pytest.mark.parametrize("split", [1, 3, 4, 7, 12])
def test_two_pass_rolled_split_matches_eager(split: int, device: str) -> None:
    """Past 8 shares the combine is a loop over them (unrolled, 62 shares held 225
    registers)."""
    x = _vocab(3, 5000, device)
    bound = row_lse_and_probs.bind((x,))
    config = tc.Config(block_sizes=[1], reduction_loops=[256], split_reductions=[split])
    code = bound.to_triton_code(config)
    if split > 1:  # each share's max, shift and sum; the combine rescales by exp(shift_s - shift)
        unrolled = split <= 8
        assert code.count("tl.exp(") >= (3 + 2 * split if unrolled else 4), code
        assert "_partials" in code and ("in tl.range(0, 12)" in code) != unrolled, code
    lse, probs = bound.run(bound.compile_config(config), x)
    want_lse, want_probs = torch.logsumexp(x.float(), -1), torch.softmax(x.float(), -1)
    torch.testing.assert_close(lse, want_lse, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(probs, want_probs, rtol=1e-5, atol=1e-7, equal_nan=True)


def test_few_long_rows_split_their_two_passes_by_default() -> None:
    """4 rows of a 128256-entry vocabulary: 4 programs unsplit on a 132-SM H100; the chunk
    shrinks so that the row splits into tens of shares."""
    x = torch.empty(4, 128256, dtype=torch.bfloat16, device="meta")
    args = row_lse_and_probs.bind_arguments((x,), {})
    bound = BoundKernel(row_lse_and_probs, args, target=Target.parse("cuda:90"))
    default = bound.config_spec.default()
    programs = bound.config_spec.resolve(default).resources.programs[0]
    assert default.split_reductions[0] >= 16 and programs >= 64, (default, programs)


@pytest.mark.crosscompile
def test_two_pass_split_cross_compiles() -> None:
    assert_defaults_cross_compile(row_lse_and_probs, (torch.randn(4, 128256).bfloat16(),))


def test_a_split_dropped_leaves_the_chunk_it_shrank() -> None:
    """16 rows of 32000: too little work a row to split, so the default is the chunk and
    warps an unsplittable kernel over the same rows gets (the shrink for the planned split
    stayed: 1024-element chunks at 4 warps where 8192 at 16 were due)."""
    x = torch.empty(16, 32000, dtype=torch.bfloat16, device="meta")
    target = Target.parse("cuda:90")
    defaults = []
    for kernel in (row_lse_and_probs, row_variance):
        bound = BoundKernel(kernel, kernel.bind_arguments((x,), {}), target=target)
        defaults.append(bound.config_spec.default())
    split, unsplittable = defaults
    assert split.split_reductions in ((), (1,)), split
    assert split.reduction_loops == unsplittable.reduction_loops, defaults
    assert split.num_warps == unsplittable.num_warps, defaults
