"""The catalog of what device code supports, rendered as ``docs/ops.md`` (stage: frontend; in: the
lowering registry, the pointwise table and the ``tc.*`` names; out: Markdown).

``python -m tilecraft.frontend.catalog > docs/ops.md`` regenerates the page; a test checks that
the committed page matches, so it cannot drift from the registry. A lowering's constraint is the
first line of its builder's docstring.
"""

from __future__ import annotations

import inspect
from typing import Any

HEADER = """# Supported operations

Generated from the lowering registry by `python -m tilecraft.frontend.catalog > docs/ops.md`;
do not edit by hand. Anything not listed fails at compile time with an `UnsupportedOpError`
naming the op and your file:line.

Indexing a host tensor in device code loads (assigning to it stores) with, per dim: a tile, `:`
(the whole dim), an int, `None` (a new dim), a tensor of indices, or a slice with compile-time
bounds and a positive step (`x[t, :half]`, `x[t, half:]`, `x[t, a:b]`, `x[t, 1::2]`). Tiles
themselves take `[:, None]`-style views (`...` for the dims in between: `scale[..., None]`),
constant slices and ints along whole dims, the first and last valid element along a tile
loop's dim (`v[:, 0]`, `v[:, -1]`, a partial last tile's too), and the view functions below.

For a Triton feature that is not listed, call your own `@triton.jit` function on tiles with
`tc.triton_call` (see `docs/escape_hatch.md`). fp8 tensors (`torch.float8_e4m3fn`,
`torch.float8_e5m2`) load, store and cast as PyTorch does (bit for bit), and feed `tl.dot` on
targets with fp8 dots (sm_89+ on NVIDIA).

Control flow: `if` and `while` on a scalar device value (a loaded element, `tile.begin < t.end`,
`tile.id`, a counter the loop changes) compile to Triton's `if` / `while`; names assigned in them
keep their dtype and shape. An `if` on a whole tile is an error (use `torch.where`), and so is a
`while` whose condition nothing in the loop can change.
"""


def torch_name(fn: Any) -> str:
    """A stable, readable name: ``torch.add``, ``Tensor.add``, ``operator.add``."""
    qual = str(getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn))
    module = str(getattr(fn, "__module__", None) or "")
    if qual.startswith("TensorBase.") or module == "" and "." in qual:
        return "Tensor." + qual.split(".", 1)[1]
    if module == "_operator":
        return f"operator.{qual}"
    if qual.startswith("_VariableFunctionsClass."):
        return "torch." + qual.split(".", 1)[1]
    if module == "torch._C._nn":  # F.gelu and friends: bindings the user reaches through F
        return f"torch.nn.functional.{qual}"
    if module.startswith("torch._C._"):
        return f"torch.{module.removeprefix('torch._C._')}.{qual.split('_', 1)[-1]}"
    if "<locals>" in qual and module == "torch.nn.functional":  # F.max_pool1d's dispatcher
        import torch.nn.functional as F

        named = next((n for n, v in vars(F).items() if v is fn and not n.startswith("_")), None)
        if named:
            return f"torch.nn.functional.{named}"
    return f"{module}.{qual}" if module else qual


def _doc(obj: Any) -> str:
    """The first paragraph of ``obj``'s docstring, on one line."""
    doc = (inspect.getdoc(obj) or "").strip()
    return " ".join(doc.split("\n\n")[0].split()) if doc else ""


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _dsl_section() -> list[str]:
    from tilecraft import language

    rows = ["## `tc.*` names", "", "| name | meaning |", "|---|---|"]
    for name in sorted(language.__all__):
        obj = getattr(language, name)
        if inspect.isclass(obj):
            continue
        rows.append(f"| `tc.{name}` | {_cell(_doc(obj))} |")
    return rows


def _pointwise_section() -> list[str]:
    from tilecraft.ir.pointwise import POINTWISE

    rows = ["## Pointwise ops", "", "| op | torch names | Triton | notes |", "|---|---|---|---|"]
    for name, op in sorted(POINTWISE.items()):
        names = ", ".join(sorted({f"`{torch_name(f)}`" for f in op.torch_fns}))
        names = names or op.reached_by or "(internal)"
        notes = []
        if op.float_only:
            notes.append("integer inputs compute in float32")
        if op.bool_result:
            notes.append("returns bool")
        template = op.template.format(*("x", "y", "z")[: op.arity])
        if op.device_template:
            gpu = op.device_template.format(*("x", "y", "z")[: op.arity])
            notes.append(f"GPUs: `{_cell(gpu)}` (the interpreter has no libdevice)")
        rows.append(f"| {name} | {names} | `{_cell(template)}` | {'; '.join(notes)} |")
    return rows


def _lowering_section() -> list[str]:
    from tilecraft.frontend.lowerings import pointwise_handlers, registry_items

    groups: dict[Any, list[str]] = {}
    skip = pointwise_handlers()
    for fn, handler in registry_items():
        if handler not in skip:
            groups.setdefault(handler, []).append(torch_name(fn))
    rows = ["## Other torch functions", "", "| torch names | constraints |", "|---|---|"]
    for handler, names in sorted(groups.items(), key=lambda kv: sorted(kv[1])[0]):
        listed = ", ".join(f"`{n}`" for n in sorted(set(names)))
        rows.append(f"| {listed} | {_cell(_doc(handler))} |")
    return rows


def render() -> str:
    sections = [_dsl_section(), _lowering_section(), _pointwise_section()]
    return HEADER + "".join("\n" + "\n".join(s) + "\n" for s in sections)


if __name__ == "__main__":
    print(render(), end="")
