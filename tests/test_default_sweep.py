"""benchmarks/default_sweep.py: every example default cross-compiled for real targets; a default
whose launch would fail (no compile, or more shared memory than the target has) fails the run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import default_sweep


@pytest.mark.crosscompile
def test_sweep_compiles_example_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OUT", str(tmp_path))
    code = default_sweep.main(
        ["--examples", "softmax", "--targets", "cuda:90", "hip:gfx942", "--shapes", "test",
         "--name", "sweep"]
    )  # fmt: skip
    rows = json.loads((tmp_path / "sweep.json").read_text())["rows"]
    assert code == 0 and rows
    assert {r["target"].rsplit(":", 1)[0] for r in rows} == {"cuda:90", "hip:gfx942"}
    assert all(r["ok"] and r["registers"] and r["predicted"] for r in rows)
    cuda = [r for r in rows if r["target"].startswith("cuda")]
    assert all("ld " in r["memory_ops"] and "st " in r["memory_ops"] for r in cuda), cuda


def test_memory_ops_count_widths_and_narrow_scalars() -> None:
    ptx = """
        ld.global.v4.b32 {%r1, %r2, %r3, %r4}, [%rd1];
        ld.global.L1::evict_last.b16 %rs1, [%rd2];
        @%p1 ld.global.nc.u8 %rs2, [%rd3];
        st.global.v2.b64 [%rd4], {%rd5, %rd6};
        st.global.b16 [%rd7], %rs3;
        st.global.b32 [%rd8], %r5;
        ld.shared.b16 %rs4, [%r6];
    """
    text, narrow = default_sweep.memory_ops(ptx)
    assert text == "ld 1B x1, ld 2B x1, ld 16B x1, st 2B x1, st 4B x1, st 16B x1"
    assert narrow == 3  # the 1- and 2-byte scalars, not the 4-byte store or shared memory


@pytest.mark.crosscompile
def test_every_generalization_case_default_compiles_for_gpus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kernels written as users write them, at their GPU shapes (bound on meta tensors): each
    default compiles for sm_90 and gfx942. The interpreter runs what a GPU compile rejects
    (an int32 ``ones_like`` emitted as ``tl.full(.., 1.0, tl.int32)`` passed every CPU test,
    and on the H200 every config of the kernel failed)."""
    monkeypatch.setenv("OUT", str(tmp_path))
    code = default_sweep.main(
        ["--examples", "--cases", "all", "--targets", "cuda:90", "hip:gfx942", "--name", "cases"]
    )
    rows = json.loads((tmp_path / "cases.json").read_text())["rows"]
    failed = [(r["target"], r["example"], r["error"]) for r in rows if not r["ok"]]
    assert code == 0 and not failed, failed
    assert {r["example"] for r in rows} >= {"moe_load_stats", "int8_weight_gemm", "bmm_3d"}


def test_a_default_over_shared_memory_fails_the_sweep(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reports of compiles that need more shared memory than the target has (their launches
    would fail): the rows say so and the sweep exits 1; a spill alone is reported, not failed."""
    from tilecraft.tools.crosscompile import CompileJob, CompileReport

    def reports(jobs: list[CompileJob], _timeout: float) -> list[CompileReport]:
        over = CompileReport(jobs[0].target, ok=True, shared_bytes=300_000, max_shared=232_448)
        spill = CompileReport(jobs[0].target, ok=True, shared_bytes=0, registers=255, spills=64)
        return [over] + [spill] * (len(jobs) - 1)

    monkeypatch.setattr(default_sweep, "run_compile_jobs", reports)
    monkeypatch.setenv("OUT", str(tmp_path))
    code = default_sweep.main(
        ["--examples", "softmax", "--targets", "cuda:90", "--shapes", "test", "--name", "sweep"]
    )
    rows = json.loads((tmp_path / "sweep.json").read_text())["rows"]
    assert code == 1 and not rows[0]["ok"] and rows[0]["shared"] == 300_000
    assert all(r["ok"] and r["spills"] == 64 for r in rows[1:])


def test_case_calls_bind_the_generalization_kernels_at_gpu_shapes() -> None:
    """``--cases``: each generalization case's kernel calls at its GPU shape, on meta tensors
    (scalars included, as the case's runner passes them)."""
    from benchmarks.gen_kernels import CASES, HELDOUT

    decode = HELDOUT["decode_attention"]
    ((kernel, args),) = default_sweep.case_calls(decode, decode.gpu_shapes[0])
    assert kernel is decode.kernels[0] and len(args) == 4 and isinstance(args[3], float)
    assert args[1].shape == (256, 8192, 128) and args[1].device.type == "meta"
    seed = CASES["layer_norm_bwd_seed"]
    ((kernel, args),) = default_sweep.case_calls(seed, seed.gpu_shapes[0])
    assert kernel is seed.kernels[0] and args[1].shape == (4608, 40920)
    sources = default_sweep.call_sources([], "heldout", "bench")
    assert len(sources) == sum(len(c.gpu_shapes) for c in HELDOUT.values())
    assert all(calls for _, _, calls in sources)
