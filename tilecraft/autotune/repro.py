"""Standalone repro scripts for failed configs (stage: autotune; see docs/architecture.md).

The script imports the user's module (by module name from its root folder, else by file path),
rebuilds arguments with the same shapes, dtypes, strides and devices (random data, seed 0; integer
tensors are zeros: edit them if they are indices), compiles the chosen failing config with
``bound.compile_config`` and runs it with ``bound.run``, then compares with the baseline.
"""

from __future__ import annotations

import inspect
import os
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from tilecraft.autotune.classify import Attempt
from tilecraft.runtime.cache_dir import writable_subdir
from tilecraft.runtime.kernel import BoundKernel

_TEMPLATE = '''"""tilecraft repro: {name} ({when}).

{summary}
Configs (index: category: reason):
{table}
Run: python {filename} [INDEX]   (default 0)
"""

import importlib
import importlib.util
import os
import sys

{interpret}import torch

import tilecraft as tc
from tilecraft.autotune.baseline import compute_baseline
from tilecraft.autotune.compare import compare
from tilecraft.autotune.decisions import float_decisions

MODULE = {module!r}
FILE = {file!r}
ROOT = {root!r}
ATTR = {attr!r}{local_note}
CONFIGS = [
{configs}
]


def load_kernel():
    sys.path.insert(0, ROOT)
    if MODULE != "__main__":
        try:
            return getattr(importlib.import_module(MODULE), ATTR)
        except ImportError:
            pass
    spec = importlib.util.spec_from_file_location("tilecraft_repro_module", FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, ATTR)


def rand_strided(shape, stride, dtype, device):
    size = 1 + sum((n - 1) * s for n, s in zip(shape, stride) if n > 0)
    if dtype.is_floating_point or dtype.is_complex:
        storage = torch.randn(size, dtype=torch.float32, device=device).to(dtype)
    else:
        storage = torch.zeros(size, dtype=dtype, device=device)
    return torch.as_strided(storage, shape, stride)


def make_args():
    torch.manual_seed(0)
    args = [
{args}
    ]
    kwargs = {{{kwargs}}}
    return args, kwargs


def main(index=0):
    kernel = load_kernel()
    args, kwargs = make_args()
    baseline = compute_baseline(kernel, args, kwargs)
    bound = kernel.bind(tuple(args), kwargs)
    config = tc.Config(**CONFIGS[index])
    print("config:", config)
    program = bound.compile_config(config)
    out = bound.run(program, *args, **kwargs)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    result = compare(
        out, baseline.outputs, actual_args=args, expected_args=baseline.args_after,
        decides_on_floats=bool(float_decisions(bound.traced.loops)),
    )
    print("result:", result.summary())
    return result.ok


if __name__ == "__main__":
    sys.exit(0 if main(int(sys.argv[1]) if len(sys.argv) > 1 else 0) else 1)
'''


def _value_expr(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return (
            f"rand_strided({tuple(value.shape)!r}, {tuple(value.stride())!r}, {value.dtype}, "
            f"{str(value.device)!r})"
        )
    if value is None or isinstance(value, (bool, int, float, str, torch.dtype)):
        text = repr(value)
        return text if text not in ("inf", "-inf", "nan") else f"float({text!r})"
    if isinstance(value, (tuple, list)):
        inner = ", ".join(_value_expr(v) for v in value)
        return f"({inner},)" if isinstance(value, tuple) else f"[{inner}]"
    return f"None  # could not rebuild: {type(value).__name__} {repr(value)[:60]!r}"


def _doc(text: str) -> str:
    """Text that is safe inside the script's docstring."""
    return text.replace("\\", "/").replace('"""', "'''")


def _module_root(module: str, file: str) -> str:
    path = Path(file).resolve()
    parts = module.split(".")
    if module != "__main__" and path.with_suffix("").parts[-len(parts) :] == tuple(parts):
        return str(path.parents[len(parts) - 1])
    return str(path.parent)


def write_repro(
    bound: BoundKernel,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    attempts: Sequence[Attempt],
    summary: str = "",
) -> Path | None:
    """The repro script's path, or None: writing it never raises (it must not hide the failure
    it reports)."""
    try:
        return _write_repro(bound, args, kwargs, attempts, summary)
    except Exception:
        return None


def _write_repro(
    bound: BoundKernel,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    attempts: Sequence[Attempt],
    summary: str = "",
) -> Path | None:
    """Write the script under ``settings.cache_dir()/repros/`` (or the system temp folder);
    returns its path, or None when it cannot be written anywhere."""
    kernel = bound.kernel
    fn = kernel.fn
    file = os.path.abspath(inspect.getsourcefile(fn) or kernel.source.filename)
    module = fn.__module__
    local_note = ""
    if "<locals>" in fn.__qualname__:
        local_note = "  # defined inside a function: move it to module level (or paste it here)"
    # an unwritable cache: the system's temporary folder (a repro must outlive the process)
    out_dir = writable_subdir("repros") or Path(tempfile.gettempdir())
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = out_dir / f"{kernel.__name__}-{stamp}-{os.getpid()}.py"
    table = "\n".join(
        f"  {i}: {a.category}: {a.reason}  {a.config!r}" for i, a in enumerate(attempts)
    )
    configs = "\n".join(f"    {a.config.to_dict()!r}," for a in attempts)
    text = _TEMPLATE.format(
        name=kernel.__name__,
        when=time.strftime("%Y-%m-%d %H:%M:%S"),
        summary=_doc(summary),
        table=_doc(table),
        filename=path.name,
        interpret='os.environ.setdefault("TRITON_INTERPRET", "1")  # CPU tensors: interpreter\n'
        if bound.device_type == "cpu"
        else "",
        module=module,
        file=file,
        root=_module_root(module, file),
        attr=kernel.__name__,
        local_note=local_note,
        configs=configs,
        args="\n".join(f"        {_value_expr(a)}," for a in args),
        kwargs="".join(f"\n        {k!r}: {_value_expr(v)}," for k, v in kwargs.items())
        + ("\n    " if kwargs else ""),
    )
    try:
        path.write_text(text)
    except OSError:  # the repro is a help, never a new failure that hides the real one
        return None
    return path
