"""Host glue after device loops run as one device program (``frontend/glue.py``,
``frontend/glue_trace.py``, ``runtime/glue.py``): which statements form a run, the numerics
against eager PyTorch in the interpreter, every reason a run stays eager (and that it then still
gives eager's results), the first-call check against eager, and the programs' code for sm_90
and gfx942."""

from __future__ import annotations

import ast
import math

import pytest
import torch

import tilecraft as tc
from benchmarks.gen_kernels import heldout_s31b
from tests.cross_targets import TARGETS
from tilecraft.frontend.glue import find_glue_runs
from tilecraft.frontend.source import launch_tree
from tilecraft.runtime.glue import GlueRunner, generate_glue
from tilecraft.runtime.kernel import BoundKernel
from tilecraft.tools.crosscompile import CompileJob
from tilecraft.tools.worker import run_compile_jobs

F32 = torch.float32
# a held-out kernel: per-row norms, then the clip coefficient (six eager ops), then scaling
norm_clip = heldout_s31b.multi_tensor_l2norm_clip
norm_clip_eager = heldout_s31b.multi_tensor_l2norm_clip_reference


@tc.kernel(static_shapes=True)
def masked_mean_loss(x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A loss's sums per program, then the returned mean over kept rows: a tuple return whose
    second part computes."""
    n, d = x.size()
    bn = tc.register_block_size(n)
    totals = torch.zeros([2, tc.cdiv(n, bn)], dtype=F32, device=x.device)
    rows = torch.empty([n], dtype=F32, device=x.device)
    for tn in tc.tile(n, block_size=bn):
        keep = mask[tn].to(F32)
        row = torch.sum(x[tn, :].to(F32) ** 2, dim=1) * keep
        rows[tn] = row
        totals[0, tn.id] = torch.sum(row)
        totals[1, tn.id] = torch.sum(keep)
    return rows, totals[0].sum() / torch.clamp(totals[1].sum(), min=1.0)


@tc.kernel(static_shapes=True)
def block_starts(labels: torch.Tensor, e: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-block counts (blocks of 16), an exclusive cumsum over blocks on the host."""
    t = labels.size(0)
    counts = torch.empty([tc.cdiv(t, 16), e], dtype=torch.int32, device=labels.device)
    for tt in tc.tile(t, block_size=16):
        onehot = (labels[tt][:, None] == tc.arange(e)[None, :]).to(torch.int32)
        counts[tt.id, :] = torch.sum(onehot, dim=0)
    starts = (torch.cumsum(counts, dim=0) - counts).to(torch.int32)
    return counts, starts


def _bound(kernel: tc.Kernel, *args: object) -> BoundKernel:
    return kernel.bind(args)


def _runner(kernel: tc.Kernel, *args: object) -> GlueRunner:
    """The glue programs of the call's trace (one per block size the host code registers)."""
    (runner,) = _bound(kernel, *args)._glue.values()
    return runner


def test_glue_runs_are_the_computing_statements_after_a_loop() -> None:
    src = norm_clip.source
    (run,) = src.glue
    assert run.outputs == ("total", "coef") and run.inputs[:2] == ("torch", "norms")
    assert [ast.unparse(s).split(" =")[0] for s in run.stmts] == ["total", "coef"]
    (ret,) = masked_mean_loss.source.glue
    assert ret.outputs == ("__tc_ret_0_1",) and ast.unparse(ret.returned) == "(rows, __tc_ret_0_1)"
    text = ast.unparse(launch_tree(src))
    assert "__tc_glue__(0, locals())" in text and "__tc_glue_done__(0, locals())" in text
    assert "__tc_glue__" not in ast.unparse(launch_tree(src, glue=False))


@pytest.mark.parametrize(
    ("statement", "glue"),
    [
        ("y = torch.sqrt(x.sum()) + 1", True),
        ("y = x.view(-1)", False),  # a view: nothing computes
        ("y = x.view(b, 2 * h)", False),  # nor do its sizes
        ("y = (x * 2).view(-1)", True),  # the viewed value does
        ("y = x.add_(1)", False),  # in place
        ("y = torch.rand_like(x) * x", False),  # random numbers
        ("y = x.sum().item() * 2", False),  # reads data into Python
        ("y = helper(x) + 1", False),  # a call of a user function
        ("y = x @ x", False),  # tl.dot's minimum sizes
        ("y = torch.sum(x, out=z)", False),
    ],
)
def test_what_a_glue_statement_may_hold(statement: str, glue: bool) -> None:
    tree = ast.parse(f"def k(x):\n    for t in tc.tile(4):\n        pass\n    {statement}\n")
    fn = tree.body[0]
    assert isinstance(fn, ast.FunctionDef) and isinstance(fn.body[0], ast.For)
    runs = find_glue_runs(fn, [fn.body[0]], lambda node: None)  # type: ignore[arg-type,return-value]
    assert bool(runs) == glue


@pytest.mark.parametrize("shape", [(64, 48), (37, 5), (1, 1)])
def test_norm_clip_glue_is_one_program_and_matches_eager(
    shape: tuple[int, int], device: str
) -> None:
    grad = (torch.randn(*shape, generator=torch.Generator().manual_seed(shape[0])) * 3).to(device)
    for _ in range(2):  # the first call checks the program against eager; the second runs it
        out, norms = norm_clip(grad)
        want_out, want_norms = norm_clip_eager(grad)
        torch.testing.assert_close(out, want_out)
        torch.testing.assert_close(norms, want_norms)
    runner = _runner(norm_clip, grad)
    assert _bound(norm_clip, grad).traced.glue_problems == {0: None}
    assert runner.checked == {0} and not runner.eager


def test_a_tuple_return_and_an_int_cumsum_run_on_the_device(device: str) -> None:
    g = torch.Generator().manual_seed(5)
    x = torch.randn(45, 7, generator=g).to(device)
    mask = (torch.rand(45, generator=g) > 0.3).to(device)
    for _ in range(2):
        rows, loss = masked_mean_loss(x, mask)
        want_rows = (x * x).sum(1) * mask
        torch.testing.assert_close(rows, want_rows)
        torch.testing.assert_close(loss, want_rows.sum() / mask.sum().clamp(min=1))
    assert _runner(masked_mean_loss, x, mask).checked == {0}
    labels = torch.randint(0, 6, (53,), generator=g).to(device)
    for _ in range(2):
        counts, starts = block_starts(labels, 6)
        assert starts.dtype == torch.int32
        assert torch.equal(starts, torch.cumsum(counts, 0) - counts)
        assert int(counts.sum()) == 53
    assert _runner(block_starts, labels, 6).checked == {0}


@tc.kernel(static_shapes=True)
def big_mean(x: torch.Tensor) -> torch.Tensor:
    rows = torch.empty([x.size(0)], dtype=F32, device=x.device)
    for t in tc.tile(x.size(0)):
        rows[t] = torch.sum(x[t, :], dim=1)
    return torch.sqrt(rows.mean()) * 2


@tc.kernel(static_shapes=True)
def one_op_tail(x: torch.Tensor) -> torch.Tensor:
    rows = torch.empty([x.size(0)], dtype=F32, device=x.device)
    for t in tc.tile(x.size(0)):
        rows[t] = torch.sum(x[t, :], dim=1)
    return rows.mean()


@tc.kernel(static_shapes=True)
def math_tail(x: torch.Tensor) -> torch.Tensor:
    rows = torch.empty([x.size(0)], dtype=F32, device=x.device)
    for t in tc.tile(x.size(0)):
        rows[t] = torch.sum(x[t, :], dim=1)
    return math.sqrt(x.size(1)) * rows.abs()  # a call on a module other than torch


@tc.kernel(static_shapes=False)
def dynamic_tail(x: torch.Tensor) -> torch.Tensor:
    rows = torch.empty([x.size(0)], dtype=F32, device=x.device)
    for t in tc.tile(x.size(0)):
        rows[t] = torch.sum(x[t, :], dim=1)
    return torch.sqrt(rows.abs()) + 1


@pytest.mark.parametrize(
    ("kernel", "rows", "eager", "problem"),
    [
        (big_mean, 9000, lambda x: torch.sqrt(x.sum(1).mean()) * 2, "9000 elements"),
        (one_op_tail, 20, lambda x: x.sum(1).mean(), "1 eager op"),
        (math_tail, 20, lambda x: math.sqrt(3) * x.sum(1).abs(), "a call on 'math' (module)"),
        (dynamic_tail, 20, lambda x: torch.sqrt(x.sum(1).abs()) + 1, "static_shapes=False"),
    ],
)
def test_a_run_stays_eager_and_says_why(
    kernel: tc.Kernel,
    rows: int,
    eager: object,
    problem: str,
    monkeypatch: pytest.MonkeyPatch,
    device: str,
) -> None:
    """... and its calls run the statements as written, not through the glue hooks."""
    calls: list[int] = []
    real = GlueRunner.glue
    monkeypatch.setattr(
        GlueRunner, "glue", lambda self, i, env: calls.append(i) or real(self, i, env)
    )
    x = torch.rand(rows, 3, generator=torch.Generator().manual_seed(rows)).to(device) + 0.5
    torch.testing.assert_close(kernel(x), eager(x))  # type: ignore[operator]
    assert not calls
    (why,) = _bound(kernel, x).traced.glue_problems.values()
    assert why is not None and problem in why
    assert not _bound(kernel, x).traced.glue


@tc.kernel(static_shapes=True)
def unsupported_tail(x: torch.Tensor) -> torch.Tensor:
    rows = torch.empty([x.size(0)], dtype=F32, device=x.device)
    for t in tc.tile(x.size(0)):
        rows[t] = torch.sum(x[t, :], dim=1)
    return torch.linalg.vector_norm(rows, ord=3) + torch.special.i0(rows).sum()


def test_a_run_that_device_code_cannot_trace_stays_eager(device: str) -> None:
    x = torch.rand(20, 3, generator=torch.Generator().manual_seed(1)).to(device)
    rows = x.sum(1)
    want = torch.linalg.vector_norm(rows, ord=3) + torch.special.i0(rows).sum()
    torch.testing.assert_close(unsupported_tail(x), want)
    (why,) = _bound(unsupported_tail, x).traced.glue_problems.values()
    assert why is not None and "Error" in why


@tc.kernel(static_shapes=True)
def scaled_norms(x: torch.Tensor) -> torch.Tensor:
    rows = torch.empty([x.size(0)], dtype=F32, device=x.device)
    for t in tc.tile(x.size(0)):
        rows[t] = torch.sum(x[t, :] * x[t, :], dim=1)
    return torch.sqrt(rows) / torch.sqrt(rows.sum())


def test_a_program_that_disagrees_with_eager_is_dropped(
    monkeypatch: pytest.MonkeyPatch, device: str
) -> None:
    """The first call compares the program's outputs with the statements run as written; a
    wrong program (simulated: it returns zeros) is dropped and eager's results are used."""
    real_run = GlueRunner._run

    def wrong(self: GlueRunner, index: int, env: dict[str, object]) -> tuple[torch.Tensor, ...]:
        return tuple(torch.zeros_like(o) for o in real_run(self, index, env))

    monkeypatch.setattr(GlueRunner, "_run", wrong)
    x = (torch.rand(30, 4, generator=torch.Generator().manual_seed(2)) + 0.1).to(device)
    want = torch.sqrt((x * x).sum(1)) / torch.sqrt((x * x).sum())
    for _ in range(2):
        torch.testing.assert_close(scaled_norms(x), want)
    runner = _runner(scaled_norms, x)
    assert not runner.checked and "differs from eager" in runner.eager[0]


def test_glue_programs_cross_compile() -> None:
    args = (torch.empty(2048, 4096, device="meta"),)
    jobs = []
    for target in TARGETS:
        bound = BoundKernel(norm_clip, norm_clip.bind_arguments(args, {}), target=target)
        (glue,) = bound.traced.glue.values()
        kernel = generate_glue(glue.loop, target, "norm_clip")
        assert "tl.sum" in kernel.device_source and "tl.sqrt" in kernel.device_source
        jobs += [CompileJob.of(k, glue.loop, target) for k in (kernel, *kernel.companions)]
    for job, report in zip(jobs, run_compile_jobs(jobs, 300), strict=True):
        assert report.ok, f"{job.kernel_name} for {job.target.key}: {report.error}"


LOSS_SCALE = 2.0  # a module global a glue run reads (changed by the test below)


@tc.kernel(static_shapes=True)
def scaled_mean(x: torch.Tensor, frac: float) -> torch.Tensor:
    n = x.size(0)
    rows = torch.empty([n], dtype=F32, device=x.device)
    for t in tc.tile(n):
        rows[t] = x[t] * 1
    keep = max(1, int(frac * n))  # an int from a float: not in the specialization key
    return torch.sum(rows) / keep * LOSS_SCALE + 1


def test_numbers_a_run_reads_are_passed_at_each_call(
    monkeypatch: pytest.MonkeyPatch, device: str
) -> None:
    """A host int derived from a float argument and a module global were baked into the
    program at the first call: later calls reused them (fuzzing the glue, session 34)."""
    x = torch.arange(30, dtype=F32, device=device)
    for frac, scale in ((0.5, 2.0), (0.1, 2.0), (0.9, 8.0)):
        monkeypatch.setattr(f"{__name__}.LOSS_SCALE", scale)
        want = x.sum() / max(1, int(frac * 30)) * scale + 1
        torch.testing.assert_close(scaled_mean(x, frac), want)
    assert _runner(scaled_mean, x, 0.5).checked == {0}


class Scaler:
    def __init__(self, k: float):
        self.k = k

    def apply(self, t: torch.Tensor) -> torch.Tensor:
        return t * self.k


@tc.kernel(static_shapes=True)
def aliasing_tails(
    x: torch.Tensor, scaler: Scaler
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    n = x.size(0)
    rows = torch.empty([n], dtype=F32, device=x.device)
    for t in tc.tile(n):
        rows[t] = x[t] * 1
    same = rows.to(torch.float32) * 1.0
    acc = rows.to(torch.float32)  # eager's .to of fp32 is rows itself
    _gap1 = torch.empty([1], device=x.device)  # (an allocation ends a run)
    relu = torch.nn.functional.relu(rows, inplace=True) * 2
    _gap2 = torch.empty([1], device=x.device)
    scaled = scaler.apply(rows) + 1
    for t in tc.tile(n):
        rows[t] = rows[t] + 10  # seen through acc (the same tensor) when eager
    return acc, same, relu, scaled


def test_runs_keep_aliasing_in_place_ops_and_object_calls_eager(device: str) -> None:
    """A run whose output is an input itself (``rows.to(torch.float32)`` of fp32 rows), one
    that writes in place (``inplace=True``) or calls a method of a user object stayed fused and
    lost what eager does."""
    x = torch.tensor([1.0, -2.0, 3.0], device=device)
    scaler = Scaler(5.0)
    acc, same, relu, scaled = aliasing_tails(x, scaler)
    rows = torch.relu(x)
    torch.testing.assert_close(acc, rows + 10)
    torch.testing.assert_close(same, x)
    torch.testing.assert_close(relu, rows * 2)
    torch.testing.assert_close(scaled, rows * 5 + 1)
    problems = _bound(aliasing_tails, x, scaler).traced.glue_problems
    assert "'acc' shares memory with 'rows'" in str(problems[0])
    assert "in-place op (relu)" in str(problems[1])
    assert "a call on 'scaler' (Scaler)" in str(problems[2])


@tc.kernel(static_shapes=True)
def sum_and_view(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    n = x.size(0)
    rows = torch.empty([n], dtype=F32, device=x.device)
    for t in tc.tile(n):
        rows[t] = x[t] * 1
    return rows, torch.sqrt(torch.sum(rows)) * 2, rows[0:2]


def test_a_returned_view_stays_a_view(device: str) -> None:
    x = torch.tensor([1.0, 2.0, 3.0, 4.0], device=device)
    for _ in range(2):
        rows, total, head = sum_and_view(x)
        torch.testing.assert_close(total, torch.sqrt(x.sum()) * 2)
        assert head._base is rows or head.data_ptr() == rows.data_ptr()
    assert _bound(sum_and_view, x).traced.glue_problems == {0: None}


SCALE = 2.0  # read by host code after a loop (one op: stays eager) and by a fused run


@tc.kernel(static_shapes=True)
def scaled_rows(x: torch.Tensor, frac: float) -> tuple[torch.Tensor, torch.Tensor]:
    rows = torch.empty([x.size(0)], dtype=F32, device=x.device)
    for t in tc.tile(x.size(0)):
        rows[t] = x[t] * 1
    k = 2 if frac < 0.5 else 0.5  # an int or a float, by a float argument
    dtype = torch.float16 if frac > 0.8 else F32
    fused = (torch.sum(rows) * k + SCALE).to(dtype) * 2
    return rows * SCALE, fused


def test_host_values_are_read_live_and_a_changed_one_runs_the_run_eagerly(
    monkeypatch: pytest.MonkeyPatch,
    device: str,
) -> None:
    """Host code read globals from a snapshot taken when it was compiled (a changed SCALE was
    never seen); a fused run baked an int that became a float (int32 math kept) and a dtype
    chosen from a float argument (fuzzing the glue, round 2)."""
    x = torch.arange(4, dtype=F32, device=device)
    for frac, scale in ((0.2, 2.0), (0.6, 8.0), (0.9, 8.0), (0.2, 3.0)):
        monkeypatch.setattr(f"{__name__}.SCALE", scale)
        rows, fused = scaled_rows(x, frac)
        k = 2 if frac < 0.5 else 0.5
        dtype = torch.float16 if frac > 0.8 else F32
        torch.testing.assert_close(rows, x * scale)
        torch.testing.assert_close(fused, (x.sum() * k + scale).to(dtype) * 2)
    assert _runner(scaled_rows, x, 0.2).checked == {0}


class Config:
    SCALE = 2.0


@tc.kernel(static_shapes=True)
def attribute_tail(x: torch.Tensor) -> torch.Tensor:
    rows = torch.empty([x.size(0)], dtype=F32, device=x.device)
    for t in tc.tile(x.size(0)):
        rows[t] = x[t] * 1
    return torch.sum(rows) * Config.SCALE + 1


def test_a_run_reading_an_objects_attribute_stays_eager(
    monkeypatch: pytest.MonkeyPatch, device: str
) -> None:
    x = torch.arange(4, dtype=F32, device=device)
    for scale in (2.0, 5.0):
        monkeypatch.setattr(Config, "SCALE", scale)
        torch.testing.assert_close(attribute_tail(x), x.sum() * scale + 1)
    (why,) = _bound(attribute_tail, x).traced.glue_problems.values()
    assert why is not None and "reads an attribute of 'Config'" in why


def test_glue_off_runs_every_run_as_written(monkeypatch: pytest.MonkeyPatch, device: str) -> None:
    """``TILECRAFT_GLUE=0`` (to compare, or to rule glue out): a run that fuses stays eager."""
    x = torch.rand(20, 3, generator=torch.Generator().manual_seed(3)).to(device) + 0.5
    fused = tc.kernel(static_shapes=True)(big_mean.fn)
    torch.testing.assert_close(fused(x), torch.sqrt(x.sum(1).mean()) * 2)
    assert _bound(fused, x).traced.glue
    monkeypatch.setenv("TILECRAFT_GLUE", "0")
    eager = tc.kernel(static_shapes=True)(big_mean.fn)
    torch.testing.assert_close(eager(x), torch.sqrt(x.sum(1).mean()) * 2)
    assert not _bound(eager, x).traced.glue
    assert list(_bound(eager, x).traced.glue_problems.values()) == ["TILECRAFT_GLUE=0"]
