"""Generate one Triton kernel and its launcher for a device loop (stage: codegen).

In: a :class:`DeviceLoop` and the :class:`Plan` resolved for it (rendered as given: codegen decides
nothing the plan has not).
Out: :class:`GeneratedKernel` — Python source of a module holding the ``@triton.jit`` function and a
``launch_<i>(env)`` function that the runtime calls with the host code's local variables.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import torch

from tilecraft.codegen import grid
from tilecraft.codegen.context import EmitContext
from tilecraft.codegen.emitter import emit_device_loop
from tilecraft.codegen.guards import arg_expr, launch_guards
from tilecraft.codegen.homes import Homes
from tilecraft.codegen.reduce import HELPER_IMPORT
from tilecraft.codegen.split import COMBINE, COUNTERS, PARTIALS, SplitPass
from tilecraft.config.plan import Plan
from tilecraft.ir.index_width import needs_int64
from tilecraft.ir.nodes import DeviceLoop, Op
from tilecraft.ir.split import Site, SplitSite, split_site

HEADER = (
    "from __future__ import annotations\n\n"
    "import torch\nimport triton\nimport triton.language as tl\n\n"
    "from tilecraft.errors import ShapeError\n"
    "from tilecraft.runtime.device import ensure_allocator, interpreted_quietly, sm_count, "
    "split_counters\n" + HELPER_IMPORT
)
TYPE_NAMES = {
    torch.float32: "fp32",
    torch.float16: "fp16",
    torch.bfloat16: "bf16",
    torch.float64: "fp64",
    torch.int8: "i8",
    torch.int16: "i16",
    torch.int32: "i32",
    torch.int64: "i64",
    torch.uint8: "u8",
    torch.bool: "i1",
    torch.float8_e4m3fn: "fp8e4nv",
    torch.float8_e5m2: "fp8e5",
}


@dataclasses.dataclass
class GeneratedKernel:
    kernel_name: str
    launcher_name: str
    device_source: str  # the @triton.jit function
    launcher_source: str  # the host launch function
    params: list[str]  # the device function's parameters in order (binder names renamed)
    param_types: dict[str, str]  # Triton signature types: "*bf16", "i32", "fp32"
    constexprs: dict[str, int]
    grid: str
    launch_options: dict[str, Any]
    # further kernels the launcher runs (a split loop's combine kernel), for cross-compiling
    companions: list[GeneratedKernel] = dataclasses.field(default_factory=list)
    # the value each int parameter had in the traced call (the launcher's arguments for it), so
    # a cross-compile specializes them as Triton's launch does (``tools/crosscompile.py``)
    traced_ints: dict[str, int] = dataclasses.field(default_factory=dict)

    @property
    def module_source(self) -> str:
        return HEADER + "\n\n" + self.device_source + "\n\n" + self.launcher_source


# Triton binds a launch's arguments in generated Python whose own locals have these names: a
# kernel parameter so named is shadowed there — SGD's ``params`` tensor reached the specializer
# as the binder's dict ("failed to specialize argument of type: dict", every config on the
# H200). The launcher still passes ``env['params']``, positionally.
_BINDER_NAMES = frozenset(
    {"params", "specialization", "options", "specialize_impl", "backend", "JITCallable"}
)


def _rename_binder_names(source: str, params: list[str]) -> tuple[str, dict[str, str]]:
    """``source`` with each parameter Triton's binder would shadow renamed (``params_arg``),
    and the renames; the ``# src[...]`` lines keep the user's own text."""
    renames: dict[str, str] = {}
    for name in params:
        if name in _BINDER_NAMES:
            new = f"{name}_arg"
            while new in params or re.search(rf"\b{new}\b", source):
                new += "_"
            renames[name] = new
            source = "\n".join(
                line if line.lstrip().startswith("# src[") else re.sub(rf"\b{name}\b", new, line)
                for line in source.split("\n")
            )
    return source, renames


def _needs_int64(loop: DeviceLoop, plan: Plan) -> bool:
    tensors = [*loop.tensors.values(), *Homes(plan, loop).scratch]  # scratch rows too
    return any(needs_int64(t.shape, t.stride) for t in tensors)


@dataclasses.dataclass
class _Emitted:
    kernel_name: str
    device_source: str
    params: list[str]
    param_types: dict[str, str]
    constexprs: dict[str, int]
    call_args: list[str]
    em: EmitContext
    tiles: grid.GridLayout
    arguments: list[str]  # the function's parameters in order, constexprs included
    local: set[str]  # parameters the launcher allocates (scratch buffers)
    traced_ints: dict[str, int]  # int parameter -> its value in the traced call
    renames: dict[str, str]  # parameters named otherwise in the device source (binder names)


def _emit(
    loop: DeviceLoop,
    plan: Plan,
    kernel_name: str,
    split: SplitPass | None = None,
    calls: _Emitted | None = None,
    noinline: bool = False,
) -> _Emitted:
    """One ``@triton.jit`` function for ``loop`` (or one pass of its split inner loop). A kernel
    that ``calls`` another emitted function (a split's combine, in one launch) takes that
    function's parameters too, and the split's arrival counters; ``noinline``: a function
    Triton calls rather than inlines."""
    interpret = plan.target.backend == "interpret"
    em, tiles = emit_device_loop(loop, plan, _needs_int64(loop, plan), interpret, split)
    scratch = split.buffers if split is not None else []
    params = list(em.tensors) + [name for name in em.scalars if name not in em.tensors]
    params += [b.name for b in scratch]
    param_types = {name: "*" + TYPE_NAMES[t.dtype] for name, t in em.tensors.items()}
    param_types.update({b.name: "*" + TYPE_NAMES[b.dtype] for b in scratch})
    param_types.update(
        {name: TYPE_NAMES[em.scalar_types[name]] for name in params if name not in param_types}
    )
    constexprs, computed = dict(em.constexprs), dict(em.launch_constexprs)
    scalars = dict(em.scalars)
    traced_ints = dict(em.scalar_values)
    local = {s.name for s in scratch} | {rows.name for rows in em.homes.scratch}
    if calls is not None:
        extra = [name for name in calls.params if name not in params]
        params += [*extra, COUNTERS]
        param_types.update({name: calls.param_types[name] for name in extra})
        param_types[COUNTERS] = "*" + TYPE_NAMES[torch.int32]
        constexprs.update(calls.constexprs)
        computed.update(calls.em.launch_constexprs)
        scalars = {**calls.em.scalars, **scalars}
        traced_ints = {**calls.traced_ints, **traced_ints}
        local |= calls.local | {COUNTERS}
    constexprs = dict(sorted(constexprs.items()))
    arguments = params + [*constexprs, *computed]
    # a double is annotated: Triton's launcher types a Python float fp32 otherwise
    typed = [f"{p}: tl.float64" if param_types.get(p) == "fp64" else p for p in params]
    signature = ", ".join(typed + [f"{name}: tl.constexpr" for name in [*constexprs, *computed]])
    helpers = "".join(h + "\n\n" for h in em.helpers)
    jit = "@triton.jit(noinline=True)" if noinline else "@triton.jit"
    device_source = f"{helpers}{jit}\ndef {kernel_name}({signature}):\n{em.w.text()}"
    device_source, renames = _rename_binder_names(device_source, params)
    call_args = [b if b in local else arg_expr(b, scalars.get(b)) for b in params]
    call_args += [f"{k}={v}" for k, v in constexprs.items()]
    call_args += [f"{k}={v}" for k, v in computed.items()]
    call_args += [f"{k}={v!r}" for k, v in plan.options.items()]
    return _Emitted(
        kernel_name,
        device_source,
        params,
        param_types,
        constexprs,
        call_args,
        em,
        tiles,
        arguments,
        local,
        {name: traced_ints[name] for name in params if name in traced_ints},
        renames,
    )


def _prologue(
    loop: DeviceLoop, plan: Plan, emitted: list[_Emitted], prepasses: tuple[DeviceLoop, ...]
) -> list[str]:
    """A launcher's first lines: the pre-passes of its hoisted operands (or, in a pre-pass, the
    buffers it fills), the launch guards, the persistent grid's size, the TMA allocator."""
    prologue = _scratch_allocations(loop)
    if prepasses:  # a copy: the scratch buffers stay out of the host code's variables
        prologue = ["    env = dict(env)\n"] + [
            f"    launch_{p.index}(env, spec)\n" for p in prepasses
        ]
    prologue += launch_guards(loop)
    if any("num_programs" in e.em.scalars for e in emitted):
        first = next(iter(emitted[0].em.tensors))
        prologue.append(f"    num_programs = sm_count(env[{first!r}]) * {plan.num_sm_multiplier}\n")
    if any(e.em.descriptors for e in emitted):
        prologue.append("    ensure_allocator()\n")
    return prologue


def _launch(e: _Emitted, grid_text: str) -> str:
    return (
        f"    {e.kernel_name}[({grid_text},)](\n"
        + "".join(f"        {a},\n" for a in e.call_args)
        + "    )\n"
    )


def generate(
    loop: DeviceLoop, plan: Plan, fn_name: str, prepasses: tuple[DeviceLoop, ...] = ()
) -> GeneratedKernel:
    """The kernel and launcher of ``loop`` under ``plan`` (for the interpreter target: code that
    Triton's CPU interpreter runs, e.g. bf16/fp16 dots upcast). ``prepasses``: the loops that
    compute its hoisted operands (``ir/hoist.py``), which its launcher launches first."""
    if plan.split(loop.grid_slot) > 1:
        return _generate_split(loop, plan, fn_name, prepasses)
    main = _emit(loop, plan, f"_tc_{fn_name}_{loop.index}")
    launch_grid = grid.host_grid(main.em, main.tiles)
    launcher_name = f"launch_{loop.index}"
    launcher_source = (
        f"def {launcher_name}(env, spec):\n"
        + "".join(_prologue(loop, plan, [main], prepasses))
        + "".join(_home_rows(main))
        + _launch(main, launch_grid)
    )
    return _generated(main, launcher_name, launcher_source, launch_grid, plan)


def _scratch_allocations(loop: DeviceLoop) -> list[str]:
    """A pre-pass launcher's lines allocating the buffers it fills, into the launch's ``env``."""
    if loop.prepass_for is None:
        return []
    stored = {n.attrs["tensor"].name: n.attrs["tensor"] for n in loop.walk() if n.op is Op.STORE}
    inputs = [name for name in loop.tensors if name not in stored]
    device = f"env[{inputs[0]!r}].device" if inputs else "None"
    return [
        f"    env[{name!r}] = torch.empty({list(t.shape)!r}, dtype={t.dtype}, device={device})\n"
        for name, t in stored.items()
    ]


def _home_rows(e: _Emitted) -> list[str]:
    """Launcher lines allocating the scratch rows of carried accumulators (``homes.py``)."""
    if not e.em.homes.scratch:
        return []
    device = f"env[{next(n for n in e.em.tensors if n in e.em.loop.tensors)!r}].device"
    return [
        f"    {rows.name} = torch.empty({rows.numel}, dtype={rows.dtype}, device={device})\n"
        for rows in e.em.homes.scratch
    ]


def _generated(
    e: _Emitted, launcher_name: str, launcher_source: str, launch_grid: str, plan: Plan
) -> GeneratedKernel:
    if launcher_source and plan.target.backend == "interpret":
        launcher_source = "@interpreted_quietly\n" + launcher_source
    return GeneratedKernel(
        e.kernel_name,
        launcher_name,
        e.device_source,
        launcher_source,
        [e.renames.get(p, p) for p in e.params],  # as the device source names them
        {e.renames.get(p, p): t for p, t in e.param_types.items()},
        e.constexprs,
        launch_grid,
        dict(plan.options),
        traced_ints={e.renames.get(p, p): v for p, v in e.traced_ints.items()},
    )


def _generate_split(
    loop: DeviceLoop, plan: Plan, fn_name: str, prepasses: tuple[DeviceLoop, ...]
) -> GeneratedKernel:
    """A split inner loop (or rolled reduction dim): partials kernels on a ``(tiles, S)`` grid
    write each share's partial results to scratch buffers, one per loop of a chain
    (``ir/split.chained_sites``), each combining the earlier loops' partials first; the combine
    kernel reduces them in a fixed order and runs the code after them, its programs sharing the
    carry-free loops after the split ones (see ``codegen/split.py``)."""
    site, _ = split_site(loop)
    assert site is not None, "the plan splits a loop that has no split site"
    factor = plan.split(loop.grid_slot)
    # one launch: a rolled site's combine runs every share (all S programs need all partials),
    # and so does a split loop's whose later loops the shares divide or split in turn
    if plan.split_one_launch and isinstance(site, SplitSite) and not (site.shared or site.chained):
        first = dataclasses.replace(loop, body=loop.body[: site.position + 1])
        return _generate_one_launch(loop, first, plan, fn_name, site, factor, prepasses)
    sites: tuple[Site, ...] = (site, *site.chained) if isinstance(site, SplitSite) else (site,)
    # partial sums added atomically (opt-in) where normalize_atomics allowed them: it checks the
    # first loop's accumulators, and a chain's later loops may hold maxima
    atomic = plan.split_atomics and len(sites) == 1

    def combines(upto: int) -> tuple[SplitPass, ...]:
        return tuple(
            SplitPass(s, factor, COMBINE, atomic, link=j) for j, s in enumerate(sites[:upto])
        )

    partials = []
    for j, s in enumerate(sites):
        passed = SplitPass(s, factor, PARTIALS, atomic, combined=combines(j), link=j)
        # a split loop's partials kernel ends with the loop; a rolled dim's runs the whole body
        first = loop
        if isinstance(s, SplitSite):
            first = dataclasses.replace(loop, body=loop.body[: s.position + 1])
        name = f"_tc_{fn_name}_{loop.index}_partials{j or ''}"
        partials.append((_emit(first, plan, name, passed), passed))
    last = len(sites) - 1
    final_pass = SplitPass(sites[last], factor, COMBINE, atomic, combined=combines(last), link=last)
    final = _emit(loop, plan, f"_tc_{fn_name}_{loop.index}", final_pass)
    lines = _split_buffers(partials[0][0], final_pass, grid.host_grid(final.em, final.tiles))
    emitted = [e for e, _ in partials] + [final]
    launcher_name = f"launch_{loop.index}"
    launcher_source = (
        f"def {launcher_name}(env, spec):\n"
        + "".join(_prologue(loop, plan, emitted, prepasses))
        + "".join(lines)
        + "".join(_launch(e, p.grid("split_tiles")) for e, p in partials)
        + _launch(final, final_pass.grid("split_tiles"))
    )
    first_kernel, first_pass = partials[0]
    out = _generated(
        first_kernel, launcher_name, launcher_source, first_pass.grid("split_tiles"), plan
    )
    out.device_source = "\n\n".join(e.device_source for e in emitted)
    out.companions = [
        _generated(e, launcher_name, "", p.grid("split_tiles"), plan) for e, p in partials[1:]
    ] + [_generated(final, launcher_name, "", final_pass.grid("split_tiles"), plan)]
    return out


def _split_buffers(partials: _Emitted, combine_pass: SplitPass, tiles: str) -> list[str]:
    """Launcher lines: the split's tile count, its partials buffers and, in one launch, its
    arrival counters."""
    tensor = f"env[{next(iter(partials.em.tensors))!r}]"
    lines = [f"    split_tiles = {tiles}\n"]
    lines += [combine_pass.allocation(b, tensor) for b in combine_pass.buffers]
    if combine_pass.one_launch:
        lines.append(f"    {COUNTERS} = split_counters({tensor}, split_tiles)\n")
    return lines


def _generate_one_launch(
    loop: DeviceLoop,
    first: DeviceLoop,
    plan: Plan,
    fn_name: str,
    site: SplitSite,
    factor: int,
    prepasses: tuple[DeviceLoop, ...],
) -> GeneratedKernel:
    """A split inner loop in one launch: the combine is a function the partials kernel's last
    program per tile calls (``codegen/split.py``)."""
    combine_pass = SplitPass(site, factor, COMBINE, one_launch=True)
    # not inlined: inlined, ptxas schedules the partials loop around the combine's registers
    # and issues its loads one at a time (H200, a column sum: 0.0557 ms vs 0.0479 for two
    # launches); called, the loop compiles as the partials kernel alone does
    combine = _emit(loop, plan, f"_tc_{fn_name}_{loop.index}_combine", combine_pass, noinline=True)
    call = f"{combine.kernel_name}({', '.join(combine.arguments)})"
    partial_pass = SplitPass(site, factor, PARTIALS, one_launch=True, then_call=call)
    partials = _emit(
        first, plan, f"_tc_{fn_name}_{loop.index}_partials", partial_pass, calls=combine
    )
    lines = _split_buffers(partials, combine_pass, grid.host_grid(combine.em, combine.tiles))
    launch_grid = partial_pass.grid("split_tiles")
    launcher_name = f"launch_{loop.index}"
    launcher_source = (
        f"def {launcher_name}(env, spec):\n"
        + "".join(_prologue(loop, plan, [partials, combine], prepasses))
        + "".join(lines)
        + _launch(partials, launch_grid)
    )
    out = _generated(partials, launcher_name, launcher_source, launch_grid, plan)
    out.device_source = combine.device_source + "\n\n" + partials.device_source
    return out
