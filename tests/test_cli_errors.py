"""``tilecraft`` CLI rough edges: modules found from the current folder, one-line errors for a
missing module, bad JSON and a module without TEST_SHAPES, a dead compile worker reported as a
crash (not a timeout), no temporary folders left, ``cache ls`` rows that tell shapes apart."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch

import tilecraft as tc
from tilecraft.autotune import cache
from tilecraft.cli import main
from tilecraft.targets.target import Target
from tilecraft.tools.crosscompile import CompileJob
from tilecraft.tools.worker import run_compile_jobs

KERNEL_MODULE = """
import torch
import tilecraft as tc


@tc.kernel
def double(x: torch.Tensor) -> torch.Tensor:
    (n,) = x.size()
    out = torch.empty_like(x)
    for t in tc.tile(n):
        out[t] = x[t] * 2
    return out


def make_inputs(shape, dtype, device, seed):
    return (torch.randn(shape, dtype=dtype, device=device),)


def run(inputs, call):
    return call(double, *inputs)
"""


@pytest.fixture
def kernel_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A package in the current folder only (not on sys.path), like `examples` at a repo root."""
    package = tmp_path / "cli_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "with_shapes.py").write_text(KERNEL_MODULE + "\nTEST_SHAPES = [(100,)]\n")
    (package / "no_shapes.py").write_text(KERNEL_MODULE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    for name in [m for m in sys.modules if m.startswith("cli_pkg")]:
        monkeypatch.delitem(sys.modules, name)
    return tmp_path


def _exit_text(argv: list[str]) -> str:
    with pytest.raises(SystemExit) as info:
        main(argv)
    return str(info.value.code)


@pytest.mark.crosscompile
def test_check_finds_modules_in_the_current_folder_and_leaves_no_temp_folders(
    kernel_folder: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    own_tmp = kernel_folder / "tmp"  # this test's temp folder (others share the system one)
    own_tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(own_tmp))  # the compile workers inherit it
    monkeypatch.setattr(tempfile, "tempdir", None)
    config = json.dumps({"block_sizes": [32]})
    assert main(["check", "cli_pkg.with_shapes:double", "--config", config, "--strict"]) == 0
    assert "1 ok, 0 failed" in capsys.readouterr().out
    assert list(own_tmp.glob("tc_xc_*")) == []


def test_missing_module_is_one_line() -> None:
    text = _exit_text(["check", "no_such_module_here:k"])
    assert "cannot import 'no_such_module_here'" in text and "PYTHONPATH" in text


def test_bad_json_config_is_one_line(kernel_folder: Path) -> None:
    text = _exit_text(["check", "cli_pkg.with_shapes:double", "--config", "{block_sizes: [4]"])
    assert "is not JSON" in text


def test_check_of_a_plain_function_is_one_line(kernel_folder: Path) -> None:
    """A module attribute that is not a @tc.kernel ended in an AttributeError traceback."""
    text = _exit_text(["check", "cli_pkg.with_shapes:make_inputs"])
    assert "is a function, not a kernel" in text and "@tc.kernel" in text


def test_a_file_path_for_module_says_to_use_a_dotted_name(kernel_folder: Path) -> None:
    text = _exit_text(["check", "cli_pkg/with_shapes.py:double"])
    assert "names a file" in text and "cli_pkg.with_shapes:double" in text, text


def test_check_for_the_interpreter_says_there_is_nothing_to_compile(kernel_folder: Path) -> None:
    """Every config failed with Triton's '0 compatible backends' and the command exited 0."""
    text = _exit_text(["check", "cli_pkg.with_shapes:double", "--target", "interpret"])
    assert "interpreter compiles nothing" in text and "TRITON_INTERPRET=1" in text, text


def test_check_for_a_target_triton_lacks_names_the_backends_it_has(kernel_folder: Path) -> None:
    from triton.backends import backends

    if "intel" in backends:
        pytest.skip("this Triton has the xpu backend")  # never the case with the pinned wheel
    text = _exit_text(["check", "cli_pkg.with_shapes:double", "--target", "xpu"])
    assert "no 'intel' backend" in text and "nvidia" in text, text


def test_negative_samples_is_a_usage_error(
    kernel_folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _exit_text(["check", "cli_pkg.with_shapes:double", "--samples", "-3"]) == "2"
    assert "-3 is negative" in capsys.readouterr().err


@pytest.mark.crosscompile
def test_check_where_every_config_fails_exits_1_without_strict(
    kernel_folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = json.dumps({"block_sizes": [32], "num_warps": 32})  # 2048 threads of wave64
    argv = ["check", "cli_pkg.with_shapes:double", "--config", config, "--target", "hip:gfx942"]
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert "does not fit: 2048 threads > 1024 a block" in out and "0 ok, 1 failed" in out, out


def test_python_dash_m_tilecraft_runs_the_command_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tilecraft", "--help"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "usage: tilecraft" in done.stdout and "check" in done.stdout


def test_module_without_test_shapes_says_what_to_pass(kernel_folder: Path) -> None:
    text = _exit_text(["check", "cli_pkg.no_shapes:double"])
    assert "no TEST_SHAPES" in text and "--shape" in text and "--inputs" in text


def test_dead_compile_worker_is_a_crash_not_a_timeout() -> None:
    job = CompileJob("import os\nos._exit(3)\n", "k", {}, {}, {}, Target.parse("cuda:90"))
    (report,) = run_compile_jobs([job], timeout_s=300)
    assert report.error_class == "compile_crash"
    assert "died (exit 3)" in report.error and "timed out" not in report.error


@tc.kernel(config=tc.Config(block_sizes=[16]))
def triple(x: torch.Tensor) -> torch.Tensor:
    (n,) = x.size()
    out = torch.empty_like(x)
    for t in tc.tile(n):
        out[t] = x[t] * 3
    return out


def test_cache_ls_tells_shapes_apart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILECRAFT_CACHE_DIR", str(tmp_path))
    for n in (100, 200):
        cache.store(triple.bind((torch.randn(n),)), "default", tc.Config(block_sizes=[16]))
    rows = [e.describe() for e in cache.ls("triple")]
    assert len(rows) == 2 and rows[0] != rows[1]
    assert any("float32[100]" in r for r in rows) and any("float32[200]" in r for r in rows)


def test_compile_job_fields_match_the_dead_worker_test() -> None:
    names = [f.name for f in dataclasses.fields(CompileJob)]
    assert names[:6] == ["source", "kernel_name", "signature", "constexprs", "options", "target"]


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["check", "cli_pkg.with_shapes:double", "--shape", "4,abc"], "is not a shape"),
        (["check", "cli_pkg.with_shapes:double", "--dtype", "floaty"], "is not a torch dtype"),
        (["check", "cli_pkg.with_shapes:double", "--target", "cuda:0"], "unknown CUDA arch"),
        (["tune", "plan.json", "--devices", "-3"], "a count of 1 or more"),
    ],
)
def test_bad_argument_values_are_one_line(
    kernel_folder: Path, capsys: pytest.CaptureFixture[str], argv: list[str], said: str
) -> None:
    """A raw traceback from cli.py (--shape, --dtype), or nothing run and exit 0 (--devices
    -3); a device index as a target compiled every config and failed (fuzz round 55c)."""
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    text = capsys.readouterr().err
    assert code not in (0, None) and said in text and "Traceback" not in text, (code, text)
