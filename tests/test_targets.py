"""Targets and capabilities (seed 003): options come from Triton's backend options dataclasses,
and launch options never include one the target did not declare."""

from __future__ import annotations

import dataclasses
import importlib
import re
import sys
import types
import warnings
from collections.abc import Iterator

import pytest
import torch
from kernels import rms_norm

import tilecraft as tc
from tilecraft.errors import ConfigError
from tilecraft.runtime.kernel import BoundKernel
from tilecraft.targets import target as target_mod
from tilecraft.targets.target import (
    Capabilities,
    Target,
    capabilities_for,
    filter_launch_options,
)


@pytest.fixture(autouse=True)
def _fresh_capabilities() -> Iterator[None]:
    capabilities_for.cache_clear()
    yield
    capabilities_for.cache_clear()


@pytest.fixture(autouse=True)
def _not_strict(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TILECRAFT_STRICT", raising=False)
    monkeypatch.delenv("TILECRAFT_TARGET", raising=False)


# ----------------------------------------------------------------------------------------------
# Target.parse
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "backend", "arch", "warp"),
    [
        ("cuda:90", "cuda", 90, 32),
        ("cuda:80", "cuda", 80, 32),
        ("cuda", "cuda", 90, 32),
        ("hip:gfx942", "hip", "gfx942", 64),
        ("hip:gfx90a", "hip", "gfx90a", 64),
        ("hip:gfx1100", "hip", "gfx1100", 32),
        ("xpu", "xpu", None, 32),
        ("interpret", "interpret", None, 32),
    ],
)
def test_target_parse(name: str, backend: str, arch: object, warp: int) -> None:
    t = Target.parse(name)
    assert (t.backend, t.arch, t.warp_size) == (backend, arch, warp)
    assert t.key == f"{backend}:{arch}:{warp}"
    assert Target.parse(name) == t  # frozen, comparable, hashable
    assert hash(Target.parse(name)) == hash(t)


@pytest.mark.parametrize(
    "name",
    [
        "metal",
        "",
        "tpu:v5",
        "cuda:abc",
        "cuda:0",  # a device index, not an arch (fuzz round 55c: every config then "failed")
        "cuda:999",
        "hip:gfx1",
        "hip:mi300",
    ],
)
def test_target_parse_rejects_unknown(name: str) -> None:
    with pytest.raises(ConfigError, match="target"):
        Target.parse(name)


def test_detect_on_cpu_is_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    assert target_mod.detect("cpu").backend == "interpret"
    monkeypatch.setenv("TILECRAFT_TARGET", "hip:gfx942")
    assert target_mod.detect("cpu") == Target.parse("hip:gfx942")


# ----------------------------------------------------------------------------------------------
# capabilities from the backends' options dataclasses
# ----------------------------------------------------------------------------------------------


def _option_fields(module: str, cls: str) -> set[str]:
    options = getattr(importlib.import_module(module), cls)
    return {f.name for f in dataclasses.fields(options)}


def test_cuda_capabilities_from_cuda_options() -> None:
    caps = Target.parse("cuda:90").capabilities
    expected = _option_fields("triton.backends.nvidia.compiler", "CUDAOptions")
    assert caps.launch_options == frozenset(expected)
    assert {"num_warps", "num_stages", "maxnreg"} <= caps.launch_options


def test_hip_capabilities_from_hip_options() -> None:
    caps = Target.parse("hip:gfx942").capabilities
    expected = _option_fields("triton.backends.amd.compiler", "HIPOptions")
    assert caps.launch_options == frozenset(expected)
    assert {"num_warps", "num_stages"} <= caps.launch_options
    assert "maxnreg" not in caps.launch_options
    assert "waves_per_eu" in caps.launch_options  # a HIP-only option really comes from HIPOptions


def test_interpret_capabilities_are_minimal() -> None:
    assert Target.parse("interpret").capabilities.launch_options == frozenset(
        {"num_warps", "num_stages"}
    )


def test_xpu_without_intel_backend_has_only_common_options() -> None:
    if importlib.util.find_spec("triton.backends.intel") is not None:
        pytest.skip("an Intel Triton backend is installed here")
    caps = Target.parse("xpu").capabilities
    assert caps.launch_options == frozenset({"num_warps", "num_stages"})


def test_capabilities_are_cached() -> None:
    assert capabilities_for("cuda") is capabilities_for("cuda")


def test_unknown_backend_gets_common_options() -> None:
    # e.g. a third-party Triton backend reported by driver.active.get_current_target()
    assert capabilities_for("musa").launch_options == frozenset({"num_warps", "num_stages"})


# ----------------------------------------------------------------------------------------------
# launch options
# ----------------------------------------------------------------------------------------------

CFG = tc.Config(block_sizes=[32], num_warps=8, num_stages=3, maxnreg=128)


@tc.kernel
def _double(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in tc.tile(x.size(0)):
        out[t] = x[t] * 2
    return out


def launch_options(target: Target, config: tc.Config) -> dict[str, object]:
    """The launch keywords of ``config``'s plan for ``_double`` on ``target``."""
    args = (torch.randn(1000),)
    bound = BoundKernel(_double, _double.bind_arguments(args, {}), target=target)
    return dict(bound.config_spec.resolve(config).options)


def test_filter_keeps_declared_options_only() -> None:
    kept, dropped = filter_launch_options(
        Target.parse("hip:gfx942"), {"num_warps": 8, "maxnreg": 128, "num_stages": None}
    )
    assert kept == {"num_warps": 8}
    assert len(dropped) == 1 and "maxnreg=128" in dropped[0] and "hip" in dropped[0]


def test_cuda_keeps_maxnreg() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        opts = launch_options(Target.parse("cuda:90"), CFG)
    assert opts == {"num_warps": 8, "num_stages": 3, "maxnreg": 128}


def test_hip_drops_maxnreg_with_one_warning() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        opts = launch_options(Target.parse("hip:gfx942"), CFG)
    assert opts == {"num_warps": 8, "num_stages": 3}
    assert len(caught) == 1, [str(w.message) for w in caught]
    message = str(caught[0].message)
    assert "maxnreg" in message and "hip" in message


def test_hip_strict_rejects_maxnreg(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILECRAFT_STRICT", "1")
    with pytest.raises(ConfigError) as info:
        launch_options(Target.parse("hip:gfx942"), CFG)
    text = str(info.value)
    assert "maxnreg" in text and "hip" in text
    # strict mode does not reject what the target supports
    assert launch_options(Target.parse("cuda:90"), CFG)["maxnreg"] == 128


def test_no_maxnreg_no_warning() -> None:
    cfg = tc.Config(block_sizes=[32], num_warps=4, num_stages=1)
    for name in ("cuda:90", "hip:gfx942", "xpu", "interpret"):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert launch_options(Target.parse(name), cfg) == {"num_warps": 4, "num_stages": 1}


def test_interpreter_drops_maxnreg_silently() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert launch_options(Target.parse("interpret"), CFG) == {"num_warps": 8, "num_stages": 3}


def test_unset_options_get_the_resolved_defaults() -> None:
    """A config that leaves warps/stages unset gets the heuristic's values in the plan (so the
    launcher always passes both, and a cache key names what ran)."""
    opts = launch_options(Target.parse("cuda:90"), tc.Config(block_sizes=[32]))
    assert set(opts) == {"num_warps", "num_stages"}


# ----------------------------------------------------------------------------------------------
# a fake XPU backend (the seed-003 report): no maxnreg in its options dataclass
# ----------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class FakeXPUOptions:
    num_warps: int = 4
    num_stages: int = 2
    num_ctas: int = 1
    grf_mode: str = "default"
    debug: bool = False
    backend_name: str = "intel"


def test_fake_xpu_capabilities_patched(monkeypatch: pytest.MonkeyPatch) -> None:
    caps = Capabilities(frozenset(f.name for f in dataclasses.fields(FakeXPUOptions)))
    monkeypatch.setattr(target_mod, "capabilities_for", lambda backend: caps)
    xpu = Target.parse("xpu")
    assert xpu.capabilities is caps
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        opts = launch_options(xpu, CFG)
    assert "maxnreg" not in opts
    assert opts == {"num_warps": 8, "num_stages": 3}
    assert len(caught) == 1 and "xpu" in str(caught[0].message)


def test_fake_xpu_backend_module(monkeypatch: pytest.MonkeyPatch) -> None:
    """Capabilities are read from the installed backend's own options dataclass."""
    intel = types.ModuleType("triton.backends.intel")
    compiler = types.ModuleType("triton.backends.intel.compiler")
    compiler.XPUOptions = FakeXPUOptions  # type: ignore[attr-defined]
    intel.compiler = compiler  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "triton.backends.intel", intel)
    monkeypatch.setitem(sys.modules, "triton.backends.intel.compiler", compiler)
    capabilities_for.cache_clear()
    caps = Target.parse("xpu").capabilities
    assert caps.launch_options == frozenset(f.name for f in dataclasses.fields(FakeXPUOptions))
    assert "grf_mode" in caps.launch_options and "maxnreg" not in caps.launch_options
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        assert "maxnreg" not in launch_options(Target.parse("xpu"), CFG)


# ----------------------------------------------------------------------------------------------
# generated launchers for named targets (no GPU needed: code generation only)
# ----------------------------------------------------------------------------------------------


def _launcher_for(target: str, monkeypatch: pytest.MonkeyPatch, shape: tuple[int, int]) -> str:
    monkeypatch.setenv("TILECRAFT_TARGET", target)
    x, w = torch.ones(*shape, dtype=torch.bfloat16), torch.ones(shape[1], dtype=torch.bfloat16)
    bound = rms_norm.bind((x, w))
    assert bound.target == Target.parse(target)
    code = bound.to_triton_code(tc.Config(block_sizes=[4], maxnreg=128, num_warps=4))
    return re.split(r"\ndef launch_0\(", code, maxsplit=1)[1]


def test_cuda_launcher_passes_maxnreg(monkeypatch: pytest.MonkeyPatch) -> None:
    launcher = _launcher_for("cuda:90", monkeypatch, (37, 101))
    assert "maxnreg=128" in launcher and "num_warps=4" in launcher


def test_hip_launcher_never_passes_maxnreg(monkeypatch: pytest.MonkeyPatch) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        launcher = _launcher_for("hip:gfx942", monkeypatch, (37, 102))
    assert "maxnreg" not in launcher and "num_warps=4" in launcher
    assert any("maxnreg" in str(w.message) for w in caught)


def test_xpu_launcher_never_passes_maxnreg(monkeypatch: pytest.MonkeyPatch) -> None:
    caps = Capabilities(frozenset(f.name for f in dataclasses.fields(FakeXPUOptions)))
    monkeypatch.setattr(target_mod, "capabilities_for", lambda backend: caps)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        launcher = _launcher_for("xpu", monkeypatch, (37, 103))
    assert "maxnreg" not in launcher


def test_target_is_part_of_specialization(monkeypatch: pytest.MonkeyPatch) -> None:
    x, w = torch.ones(37, 104), torch.ones(104)
    assert rms_norm.bind((x, w)).target == Target.parse("interpret")
    monkeypatch.setenv("TILECRAFT_TARGET", "cuda:90")
    assert rms_norm.bind((x, w)).target == Target.parse("cuda:90")
