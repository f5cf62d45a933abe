"""An object passed to a kernel (a config object, an ``nn.Module``) whose values device code
reads is keyed by those values (runtime/signature.py): its key was its repr, which for a plain
class holds only its address, so a changed ``cfg.scale`` kept the first call's value baked in
(2.5 off, silently; found in session 55)."""

from __future__ import annotations

import types

import torch

import tilecraft as tc
from tilecraft.runtime.signature import value_key


class Scale:
    def __init__(self, scale: float) -> None:
        self.scale = scale
        self.opt = types.SimpleNamespace(shift=0.0)
        self.inner = _Inner()


class _Inner:
    def __init__(self) -> None:
        self.bias = 0.0


class ScaledModule(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.alpha = 2.0
        self.lin = torch.nn.Linear(4, 4)


@tc.kernel
def scaled_by(x: torch.Tensor, cfg: Scale) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in tc.tile(x.size(0)):
        out[t] = x[t] * cfg.scale + cfg.opt.shift + cfg.inner.bias
    return out


def _times(x: torch.Tensor, m: ScaledModule) -> torch.Tensor:
    return x * m.alpha  # a helper: the module's public attribute is in its key


@tc.kernel
def module_alpha(x: torch.Tensor, m: ScaledModule) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in tc.tile(x.size(0)):
        out[t] = _times(x[t], m)
    return out


def test_a_changed_attribute_of_a_config_object_is_read_again(device: str) -> None:
    x = torch.randn(48, device=device)
    cfg = Scale(2.0)
    torch.testing.assert_close(scaled_by(x, cfg), x * 2.0)
    cfg.scale = 3.0  # the object's own attribute
    torch.testing.assert_close(scaled_by(x, cfg), x * 3.0)
    cfg.opt.shift = 1.5  # a namespace it holds
    torch.testing.assert_close(scaled_by(x, cfg), x * 3.0 + 1.5)
    cfg.inner.bias = -4.0  # an object it holds: keyed by the chain device code reads
    torch.testing.assert_close(scaled_by(x, cfg), x * 3.0 + 1.5 - 4.0)
    torch.testing.assert_close(scaled_by(x, Scale(3.0)), x * 3.0)  # an equal object: no retrace
    assert len(scaled_by._bound) == 4


def test_a_module_attribute_a_helper_reads_is_keyed(device: str) -> None:
    x = torch.randn(24, device=device)
    m = ScaledModule()
    torch.testing.assert_close(module_alpha(x, m), x * 2.0)
    m.alpha = -1.0
    torch.testing.assert_close(module_alpha(x, m), -x)


def test_object_keys_hold_constants_not_addresses() -> None:
    """Two objects of one class with equal attributes share a key (its text holds no address:
    a cached config serves the next process); a module's parameters and children are not in
    it (host code reads them live)."""
    a, b = Scale(1.0), Scale(1.0)
    assert value_key(a, True) == value_key(b, True)
    assert "0x" not in repr(value_key(a, True))
    assert value_key(a, True) != value_key(Scale(1.5), True)
    names = [name for name, _ in value_key(ScaledModule(), True)[1]]
    assert "alpha" in names and "training" in names and not any(n.startswith("_") for n in names)
