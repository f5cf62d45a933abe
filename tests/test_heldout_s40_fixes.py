"""Fixes for what session 40's held-out kernels met: host ints that ``tc.static_range`` needs
under ``static_shapes=False`` are baked in (a call with other values compiles again), and torch
code's mask idioms in device code (``torch.ones(T, T)`` with ``T = x.size(-1)`` of a tile,
``device=x.device`` of a tile) build tiles."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import tilecraft as tc
from tests.cross_targets import assert_defaults_cross_compile
from tilecraft.errors import DeviceCodeError, UnsupportedOpError


@tc.kernel(static_shapes=False)
def window_sum(x: torch.Tensor) -> torch.Tensor:
    n = x.size(0)
    out = torch.empty_like(x)
    half = 2  # a host literal: a run-time int under static_shapes=False
    for tn in tc.tile(n):
        acc = tc.zeros([tn], dtype=torch.float32)
        for off in tc.static_range(-half, half + 1):
            pos = tn.index + off
            ok = (pos >= 0) & (pos < n)
            acc = acc + tc.load(x, [pos], extra_mask=ok)
        out[tn] = acc
    return out


@tc.kernel(static_shapes=False)
def window_sum_of(x: torch.Tensor, half: int) -> torch.Tensor:
    n = x.size(0)
    out = torch.empty_like(x)
    for tn in tc.tile(n):
        acc = tc.zeros([tn], dtype=torch.float32)
        for off in tc.static_range(-half, half + 1):
            pos = tn.index + off
            ok = (pos >= 0) & (pos < n)
            acc = acc + tc.load(x, [pos], extra_mask=ok)
        out[tn] = acc
    return out


def _window_reference(x: torch.Tensor, half: int) -> torch.Tensor:
    ones = torch.ones(1, 1, 2 * half + 1, device=x.device)
    return F.conv1d(x[None, None], ones, padding=half)[0, 0]


def test_a_host_int_static_range_needs_is_baked_in(device: str) -> None:
    x = torch.randn(37, device=device)
    torch.testing.assert_close(window_sum(x), _window_reference(x, 2))
    for n, half in ((37, 2), (50, 3), (41, 1), (37, 2)):  # another value compiles again
        y = torch.randn(n, device=device)
        torch.testing.assert_close(window_sum_of(y, half), _window_reference(y, half))


@tc.kernel(static_shapes=True)
def segsum_decay(a_chunk: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Mamba-2's segment sums as its reference writes them: a lower-triangular mask of ones."""
    b, c = a_chunk.size()
    out = torch.empty([b, c + 1, c + 1], dtype=torch.float32, device=a_chunk.device)
    out2 = torch.empty_like(out)
    for tb in tc.tile(b, block_size=1):
        x = F.pad(a_chunk[tb.begin, :], (1, 0))
        t = x.size(-1)
        cs = torch.cumsum(x, dim=-1)
        seg = cs[..., :, None] - cs[..., None, :]
        mask = torch.tril(torch.ones(t, t, dtype=torch.bool), diagonal=0)
        out[tb.begin, :, :] = torch.exp(seg.masked_fill(~mask, -torch.inf))
        mask2 = torch.ones(c + 1, c + 1, device=x.device, dtype=torch.bool).tril()
        out2[tb.begin, :, :] = torch.exp(seg.masked_fill(~mask2, -torch.inf))
    return out, out2


def test_masks_built_from_a_tiles_size_and_device(device: str) -> None:
    a = -torch.rand(3, 15, device=device)
    cs = F.pad(a, (1, 0)).cumsum(-1)
    seg = cs[..., :, None] - cs[..., None, :]
    mask = torch.tril(torch.ones(16, 16, dtype=torch.bool, device=device))
    want = torch.exp(seg.masked_fill(~mask, -torch.inf))
    got, got2 = segsum_decay(a)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(got2, want)


@tc.kernel(static_shapes=True)
def pooled_keys_t(k: torch.Tensor) -> torch.Tensor:
    """NSA's key compression, stored transposed: the mean over each block's 16 keys."""
    b, nb, _, d = k.size()
    out = torch.empty([b, d, nb], dtype=torch.float32, device=k.device)
    for tb in tc.tile(b, block_size=1):
        out[tb.begin, :, :] = k[tb.begin, :, :, :].to(torch.float32).mean(dim=1).t()
    return out


def test_a_short_dim_loops_when_nothing_else_can_shrink(device: str) -> None:
    """[1024 blocks, 16 keys, 128] is past Triton's tile limit with every dim whole: the
    default loops one of them (it refused every config)."""
    k = torch.randn(2, 1024, 16, 128, device="meta").to(torch.bfloat16)
    spec = pooled_keys_t.bind((k,)).config_spec
    assert any(chunk is not None for chunk in spec.default().reduction_loops)
    assert_defaults_cross_compile(pooled_keys_t, (k,))
    small = torch.randn(2, 24, 16, 32, device=device).to(torch.bfloat16)
    want = small.float().mean(dim=2).transpose(1, 2)
    torch.testing.assert_close(pooled_keys_t(small), want)
    for chunks in ([16, None, None], [None, None, 16]):  # the transposed dims, in chunks
        config = tc.Config(reduction_loops=chunks)
        looped = tc.kernel(pooled_keys_t.fn, static_shapes=True, config=config)
        torch.testing.assert_close(looped(small), want)


@tc.kernel(static_shapes=True)
def diagonal_and_first(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A grid index compared with ==, != and to an arange (a wavefront's start condition)."""
    b, n = x.size()
    first = torch.zeros([b, n], dtype=x.dtype, device=x.device)
    diag = torch.zeros([b, n], dtype=x.dtype, device=x.device)
    branch = torch.zeros([b, n], dtype=x.dtype, device=x.device)
    for tb in tc.tile(b, block_size=1):
        i = torch.arange(n)
        for d in tc.grid(n):
            first[tb.begin, :] = first[tb.begin, :] + torch.where((i == 0) & (d == 0), 1.0, 0.0)
            diag[tb.begin, :] = diag[tb.begin, :] + torch.where(i == d, 1.0, 0.0) * (-d + n)
            if d == 0:
                branch[tb.begin, d] = 1.0
            if d != 0:
                branch[tb.begin, d] = 2.0 + (d & 1) + (d >> 1) + (1 << d) + d**2
    return first, diag, branch


def test_a_grid_index_compares_as_its_int(device: str) -> None:
    """``d == 0`` of a grid index was identity (always False) in compiled code and ref mode."""
    x = torch.randn(2, 5, device=device)
    first = torch.zeros(2, 5, device=device)
    first[:, 0] = 1.0
    d = torch.arange(5, device=device, dtype=torch.float32)
    diag = (5 - d).expand(2, 5)
    dd = torch.arange(5, device=device)
    branch = (2 + (dd & 1) + (dd >> 1) + (1 << dd) + dd**2).float().expand(2, 5).clone()
    branch[:, 0] = 1.0
    for run in (diagonal_and_first, diagonal_and_first.run_ref):
        got = run(x)
        for g, w in zip(got, (first, diag, branch), strict=True):
            torch.testing.assert_close(g, w)


@tc.kernel(static_shapes=True)
def bucket_slots(bucket: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Slot allocation: each element's place in its bucket from the counter's old value."""
    n = bucket.size(0)
    count = torch.zeros([7], dtype=torch.int32, device=bucket.device)
    slot = torch.empty([n], dtype=torch.int32, device=bucket.device)
    for t in tc.tile(n):
        slot[t] = tc.atomic_add(count, [bucket[t]], 1)
    return count, slot


def test_ref_mode_atomic_add_returns_each_lanes_own_previous_value() -> None:
    """Ref mode gave every lane of one address the value before the whole tile's adds (slot 0
    for all), so the accuracy check rejected every config of a slot allocator."""
    bucket = torch.randint(0, 7, (100,), generator=torch.Generator().manual_seed(0))
    count, slot = bucket_slots.run_ref(bucket)
    assert torch.equal(count, torch.bincount(bucket, minlength=7).int())
    assert slot.dtype == torch.int32
    for s in range(7):
        assert sorted(slot[bucket == s].tolist()) == list(range(int((bucket == s).sum())))


@tc.kernel(static_shapes=True)
def csr_row_sums_plus_self(x: torch.Tensor, off: torch.Tensor) -> torch.Tensor:
    """One row per program (block_size=1): an accumulator made by tc.zeros([tp])."""
    n = x.size(0)
    out = torch.empty([n], dtype=x.dtype, device=x.device)
    for tp in tc.tile(n, block_size=1):
        acc = tc.zeros([tp], dtype=torch.float32)
        for tj in tc.tile(off[tp.begin], off[tp.begin + 1]):
            acc = acc + torch.sum(x[tj])
        out[tp] = acc + x[tp]
    return out


def test_a_block_of_one_builds_what_it_indexes(device: str) -> None:
    """tc.zeros([tp]) of a block of one was a [1] tile while x[tp] is one element: storing
    their sum through out[tp] was a shape error."""
    x = torch.randn(5, device=device)
    off = torch.tensor([0, 1, 3, 3, 4, 5], dtype=torch.int32, device=device)
    want = torch.stack([x[off[i] : off[i + 1]].sum() + x[i] for i in range(5)])
    torch.testing.assert_close(csr_row_sums_plus_self(x, off), want)


@tc.kernel(static_shapes=True)
def kalman_predict(x: torch.Tensor, p: torch.Tensor, f: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """x' = x F^T, P' = F P F^T for a batch of 4-state filters, written with @."""
    b, n = x.size()
    xo, po = torch.empty_like(x), torch.empty_like(p)
    for tb in tc.tile(b):
        fm = f[:, :]
        xo[tb, :] = x[tb, :] @ fm.T
        po[tb, :, :] = fm @ p[tb, :, :] @ fm.T
    return xo, po


@tc.kernel(static_shapes=True)
def dct_blocks(img: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """JPEG's 8x8 DCT of [rows, cols] blocks: c @ blk @ c.T on a 4-D tile of blocks."""
    r, w, _, _ = img.size()
    out = torch.empty_like(img, dtype=torch.float32)
    for tr, tw in tc.tile([r, w]):
        cm = c[:, :]
        blk = img[tr, tw, :, :].to(torch.float32)
        out[tr, tw, :, :] = cm @ blk @ cm.T
    return out


def test_matmul_with_a_short_inner_dim_or_two_batch_dims(device: str) -> None:
    """@ with K = 4 (fp64) or on a 4-D tile was refused (tl.dot needs K >= 16, 2-D or 3-D
    tiles); it is the product summed over K, as einsum writes it."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(6, 4, generator=g, dtype=torch.float64).to(device)
    p = torch.randn(6, 4, 4, generator=g, dtype=torch.float64).to(device)
    f = torch.randn(4, 4, generator=g, dtype=torch.float64).to(device)
    xo, po = kalman_predict(x, p, f)
    torch.testing.assert_close(xo, x @ f.T)
    torch.testing.assert_close(po, f @ p @ f.T)
    img = torch.randn(3, 5, 8, 8, generator=g).to(device).to(torch.bfloat16)
    c = torch.randn(8, 8, generator=g).to(device)
    want = c @ img.float() @ c.T
    torch.testing.assert_close(dct_blocks(img, c), want, rtol=1e-4, atol=1e-4)


def test_summed_products_cross_compile() -> None:
    g = torch.Generator().manual_seed(1)
    img = torch.randn(64, 64, 8, 8, generator=g).to(torch.bfloat16)
    assert_defaults_cross_compile(dct_blocks, (img, torch.randn(8, 8, generator=g)))
    f64 = torch.float64
    x, p, f = torch.randn(4096, 4, dtype=f64), torch.randn(4096, 4, 4, dtype=f64), torch.eye(4)
    assert_defaults_cross_compile(kalman_predict, (x, p, f.to(f64)))


@tc.kernel(static_shapes=False)
def transform_batch(p: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
    """F @ P for a batch of run-time n x n matrices, written as einsum."""
    out = torch.empty_like(p)
    for tb in tc.tile(p.size(0)):
        out[tb, :, :] = torch.einsum("ij,bjk->bik", f[:, :], p[tb, :, :])
    return out


def test_einsum_names_a_subscripts_run_time_dims_once(device: str) -> None:
    """Two run-time n x n operands whose dims tilecraft had named crosswise ("shapes ... do
    not broadcast", a hint no user could follow); another n compiles again."""
    for n in (4, 6):
        p = torch.randn(37, n, n, dtype=torch.float64, device=device)
        f = torch.randn(n, n, dtype=torch.float64, device=device)
        torch.testing.assert_close(transform_batch(p, f), f @ p)


@tc.kernel(static_shapes=True)
def scatter_by_edges(src: torch.Tensor, dst: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
    out = torch.zeros([src.size(0)], dtype=f.dtype, device=f.device)
    for t in tc.tile(dst.size(0)):
        out[dst[t]] += f[t]  # two edges into one node lose an update
        out[t] += f[t] * 0.0  # the tile's own positions: no warning
    return out


def test_an_update_at_loaded_indices_names_atomic_add() -> None:
    dst = torch.tensor([0, 1, 1, 2, 0, 3])
    with pytest.warns(UserWarning, match=r"out\[dst\[t\]\] \+= .*tc\.atomic_add") as record:
        scatter_by_edges.bind((torch.zeros(6), dst, torch.ones(6)))
    assert len([w for w in record if "atomic_add" in str(w.message)]) == 1
    assert all(w.filename.endswith("test_heldout_s40_fixes.py") for w in record)


@tc.kernel(static_shapes=True)
def spring_forces(pos: torch.Tensor, edges: torch.Tensor) -> torch.Tensor:
    """Per-edge forces scattered into both vertices with index_add_ (a cloth solver)."""
    force = torch.zeros_like(pos)
    for te in tc.tile(edges.size(0)):
        i, j = edges[te, 0], edges[te, 1]
        f = pos[j, :] - pos[i, :]
        force.index_add_(0, i, f)
        force.index_add_(0, j, f, alpha=-1)
    return force


def test_index_add_on_a_host_tensor_is_an_atomic_add(device: str) -> None:
    g = torch.Generator().manual_seed(3)
    pos = torch.randn(10, 3, generator=g).to(device)
    edges = torch.randint(0, 10, (40, 2), generator=g).to(device)
    d = pos[edges[:, 1]] - pos[edges[:, 0]]
    want = torch.zeros_like(pos).index_add_(0, edges[:, 0], d).index_add_(0, edges[:, 1], -d)
    torch.testing.assert_close(spring_forces(pos, edges), want, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(spring_forces.run_ref(pos, edges), want, rtol=1e-5, atol=1e-5)


@tc.kernel(static_shapes=True)
def pooled_max(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tr in tc.tile(x.size(0)):
        out[tr, :] = F.max_pool1d(x[tr, :], 3, stride=1, padding=1)
    return out


def test_an_unsupported_functional_op_is_named_as_the_user_wrote_it(device: str) -> None:
    """F.max_pool1d was named 'torch.nn.functional.boolean_dispatch.<locals>.fn'."""
    with pytest.raises(UnsupportedOpError) as info:
        pooled_max(torch.randn(4, 16, device=device))
    assert "torch.nn.functional.max_pool1d" in str(info.value), str(info.value)


@tc.kernel(static_shapes=True)
def top_blocks_in_order(scores: torch.Tensor, k: int) -> torch.Tensor:
    """NSA's block selection: the top-k block ids, sorted ascending (as its code sorts them)."""
    out = torch.empty([scores.size(0), k], dtype=torch.int64, device=scores.device)
    for tr in tc.tile(scores.size(0)):
        ids = torch.topk(scores[tr, :], k, dim=-1).indices
        out[tr, :] = ids.sort(dim=-1).values
    return out


def test_topk_indices_sort_as_int64(device: str) -> None:
    """int64 keys were refused (keys hold 32 bits); topk's positions fit int32 exactly."""
    scores = torch.randn(6, 40, device=device)
    want = torch.topk(scores, 8, dim=-1).indices.sort(dim=-1).values
    torch.testing.assert_close(top_blocks_in_order(scores, 8), want)


ORDER = [0, 4, 1, 5, 2, 6, 3, 7]


@tc.kernel(static_shapes=True)
def reorder_in_device_code(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tr in tc.tile(x.size(0)):
        col = tc.arange(x.size(1))
        out[tr, :] = x[tr, :] + torch.tensor(ORDER, device=x.device)[col % 8]
    return out


def test_a_table_made_in_device_code_says_to_make_it_in_host_code(device: str) -> None:
    """It said 'a host tensor inside a Python list, tuple or dict': there was none."""
    with pytest.raises(DeviceCodeError) as info:
        reorder_in_device_code(torch.randn(4, 16, device=device))
    text = str(info.value)
    assert "made in device code" in text and "host code before the loop" in text, text
    assert "test_heldout_s40_fixes.py" in text, text


@tc.kernel(static_shapes=True)
def euler_trajectory(u0: torch.Tensor, steps: int) -> torch.Tensor:
    """Explicit Euler for du/dt = -u, storing every step, with a Python range."""
    n = u0.size(0)
    traj = torch.empty([n, steps], dtype=u0.dtype, device=u0.device)
    for tn in tc.tile(n):
        u = u0[tn]
        for s in range(steps):
            u = u - 0.01 * u
            traj[tn, s] = u
    return traj


def test_a_long_python_range_warns_that_it_unrolls(device: str) -> None:
    u0 = torch.rand(8, device=device)
    with pytest.warns(
        UserWarning,
        match=r"range\(\.\.\.\) in device code unrolls its body 40 "
        r"times.*tc\.grid\(40\)",
    ) as record:
        euler_trajectory.bind((u0, 40))
    assert any(w.filename.endswith("test_heldout_s40_fixes.py") for w in record)
    torch.testing.assert_close(euler_trajectory(u0, 40)[:, -1], u0 * 0.99**40)


@tc.kernel(static_shapes=True)
def bf16_scatter(ids: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    out = torch.zeros([7], dtype=torch.bfloat16, device=v.device)
    for t in tc.tile(ids.size(0)):
        tc.atomic_add(out, [ids[t]], v[t])
    return out


def test_a_half_precision_atomic_in_the_interpreter_is_one_clear_error(device: str) -> None:
    """Triton's interpreter has no bf16 atomics: every config failed with its raw
    'Unsupported data type'; on a GPU the kernel runs."""
    ids = torch.randint(0, 7, (40,), generator=torch.Generator().manual_seed(0)).to(device)
    v = torch.randn(40, generator=torch.Generator().manual_seed(1)).to(device).to(torch.bfloat16)
    want = torch.zeros(7, device=device).index_add_(0, ids, v.float())
    if device == "cuda":
        torch.testing.assert_close(bf16_scatter(ids, v).float(), want, rtol=2e-2, atol=5e-2)
        return
    with pytest.raises(Exception) as info:  # the error itself, or the tuner's table of it
        bf16_scatter(ids, v)
    text = str(info.value)
    assert "interpreter (CPU tensors) has no half-precision atomics" in text, text
    assert "float32" in text and "test_heldout_s40_fixes.py" in text, text


@pytest.mark.interpreter
def test_one_error_every_config_raised_is_the_tuners_cause() -> None:
    """Configs that each failed with the same tilecraft error gave a table of truncated
    copies and a hint to report a tilecraft bug; the message is now the error once, whole (its
    line and what to do)."""
    from tilecraft.autotune.classify import NoWorkingConfigError

    ids = torch.randint(0, 7, (40,), generator=torch.Generator().manual_seed(0))
    with pytest.raises(NoWorkingConfigError) as info:
        bf16_scatter(ids, torch.randn(40).to(torch.bfloat16))
    text = str(info.value)
    assert "no half-precision atomics" in text and "accumulate into a float32" in text, text
    assert text.count("no half-precision atomics") == 1, text
    assert "no config changes" in text and "tilecraft bug" not in text, text
    assert len(info.value.attempts) > 1


def test_the_baseline_leaves_out_what_an_atomics_lane_order_decides(device: str) -> None:
    """A GPU orders one address's lanes as it likes: the slots a slot allocator hands out may
    differ from ref mode's (lane order), its counts may not. The baseline runs ref mode once
    more, marking the returns an order decides, and compares only what the marks do not
    reach."""
    from tilecraft.autotune.baseline import compute_baseline, restrict

    bucket = torch.randint(0, 7, (100,), generator=torch.Generator().manual_seed(0)).to(device)
    base = compute_baseline(bucket_slots, (bucket,))
    assert base.written is not None and "order" in base.source
    (count_mask, slot_mask), _, _ = base.written
    assert bool(count_mask.all())
    alone = torch.bincount(bucket, minlength=7)[bucket] == 1  # a bucket of one: one order
    assert torch.equal(slot_mask, alone)  # a middle lane's slot too: any order may move it
    count, slot = base.outputs
    shuffled = slot.clone()  # another valid order: each bucket's slots reversed
    for s in range(7):
        at = (bucket == s).nonzero().flatten()
        shuffled[at] = slot[at].flip(0)
    got, want = restrict((count, shuffled), base.outputs, base.written[0])
    assert all(torch.equal(g, w) for g, w in zip(got, want, strict=True))
    assert bucket_slots(bucket)[0].equal(torch.bincount(bucket, minlength=7).int())


def test_a_histogram_baseline_runs_ref_mode_once() -> None:
    """Repeated addresses whose returned values nothing reads: no second ref-mode run."""
    from tilecraft.autotune.baseline import compute_baseline

    ids = torch.randint(0, 7, (40,), generator=torch.Generator().manual_seed(0))
    base = compute_baseline(spring_forces, (torch.randn(10, 3), torch.randint(0, 10, (40, 2))))
    assert base.written is None and base.source == "ref mode", base.source
    assert compute_baseline(bucket_slots, (ids,)).written is not None
