"""The default L2 eviction policy of each load (stage: config; in: a ConfigSpec's device loops
and a config's chunks; out: one policy per load slot, for ``Config.load_eviction_policies``).

A program that reads data twice wants it in L2 the second time, while it streams the rest of
its row between the two reads. From the IR:

- **read again by its program**: a rolled reduction dim's load that two chunk loops read (RMSNorm
  over chunks: the sum of squares, then the normalization; ``ir/phases.py``), or a tensor loaded
  in two of the program's inner loops (a two-pass softmax or Welford norm written as two loops
  over the row): ``last``.
- in such a kernel, a load **every program reads** (indexed by none of its device loop's grid
  dims: a norm's weight and bias): ``last`` as well, so the rows do not push it out.
- everything else keeps the hardware's policy, and so does every load of a kernel that reads
  nothing twice.

Only where keeping can pay, by a model of the L2 (``Limits.l2_bytes``; unknown: no policies):
the rows the resident programs re-read at once (SMs x ``occupancy.resident_programs`` x bytes
re-read per program) must fit in L2, else they push each other out whatever the policy, and
all programs' re-read rows must not, else they stay in L2 anyway and ``last`` only holds lines
the next kernel wants.

Measured on an H200 (``default_change_s11a``, ``default_change_s11``, ``evict_default_s11``):
``last`` on re-read rows, cross entropy 32768x32000 0.666 -> 0.590 ms, 4096x32000 0.098 ->
0.0874 (16 MiB re-read at once); but 1000x50257 0.113 -> 0.121 (51 MiB at once), logsumexp
over the middle dim of 16x4096x1024 0.0892 -> 0.0945 (99 MiB at once) and a column softmax of
4096x4096 0.0509 -> 0.054 (32 MiB in all): the L2 check leaves those three alone. Quick tuning
had picked ``last`` on every load of Welford, the online softmax, KL and chunked RMSNorm
(sessions 9-10). ``first`` on data read once (quick's pick for the column sum) made streaming
kernels slower: add 4608x40920 0.31 -> 0.37 ms, softmax 32768x8192 0.265 -> 0.28, RMSNorm
32768x4096 0.135 -> 0.141; it is not set by default.

Kernels with a ``tl.dot`` keep the hardware's policy: their operands are re-read across
programs by tile (L2 grouping orders that), which neither label fits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tilecraft.config import occupancy
from tilecraft.config.config import Config
from tilecraft.config.plan import sym_block
from tilecraft.config.resolve import reduction_chunk
from tilecraft.ir.nodes import DeviceLoop, Node, Op, Sym, SymKind, walk
from tilecraft.ir.phases import chunk_loop_loads

if TYPE_CHECKING:
    from tilecraft.config.spec import ConfigSpec

KEEP = "last"


def default_policies(spec: ConfigSpec, config: Config) -> tuple[str, ...]:
    """One policy per load slot for ``config``'s chunks; ``()`` where the target has no
    eviction policies or no known L2 size, the kernel has a ``tl.dot`` or keeps nothing."""
    l2 = spec.target.limits.l2_bytes
    if KEEP not in spec.space.eviction_choices or spec.has_dot or not l2:
        return ()
    chunks = tuple(config.reduction_loops)
    policies = [""] * spec.space.n_loads
    for index, loop in enumerate(spec.loops):
        reread = _reread_slotted(loop, chunks)
        if not reread or not _worth_keeping(spec, config, index, reread, l2):
            continue
        grid = _GridDependence(loop)
        for node in loop.walk():
            if node.op is not Op.LOAD or "load_slot" not in node.attrs:
                continue
            if node in reread or (grid.grid and not grid.load(node)):
                policies[node.attrs["load_slot"]] = KEEP
    return tuple(policies) if KEEP in policies else ()


def _reread_slotted(loop: DeviceLoop, chunks: tuple[int | None, ...]) -> list[Node]:
    """The re-read loads that have a policy slot (the loads codegen emits)."""
    return [n for n in _reread_loads(loop, chunks) if "load_slot" in n.attrs]


def _reread_loads(loop: DeviceLoop, chunks: tuple[int | None, ...]) -> list[Node]:
    """The loads ``loop``'s programs read more than once (see the module docstring)."""
    reread: set[int] = set()
    blocks = [loop.body, *(n.body for n in loop.walk() if n.op is Op.LOOP and n.body)]
    for nodes in blocks:
        for sym in _rolled_syms(nodes, chunks):
            seen: set[int] = set()
            for loads in chunk_loop_loads(nodes, sym).values():
                ids = {n.id for n in loads}
                reread |= seen & ids
                seen |= ids
    innermost: dict[int, tuple[int, Node]] = {}  # load id -> (its innermost loop's id, it)
    for inner in (n for n in loop.walk() if n.op is Op.LOOP):  # outer loops first
        for node in walk(inner.body or []):
            if node.op is Op.LOAD:
                innermost[node.id] = (inner.id, node)
    by_tensor: dict[int, list[tuple[int, Node]]] = {}
    for loop_id, node in innermost.values():
        by_tensor.setdefault(id(node.attrs["tensor"]), []).append((loop_id, node))
    for placed in by_tensor.values():
        if len({loop_id for loop_id, _ in placed}) > 1:  # the same tensor in two inner loops
            reread.update(node.id for _, node in placed)
    return [n for n in loop.walk() if n.id in reread]


def _worth_keeping(
    spec: ConfigSpec, config: Config, index: int, reread: list[Node], l2: int
) -> bool:
    """Whether re-read rows gain from ``last``: what the resident programs re-read at once fits
    in L2 (else their rows push each other out whatever the policy), and all the programs'
    re-read data does not (else it stays in L2 anyway, and lines kept ``last`` only delay
    the next kernel's)."""
    programs = spec.programs(index, config)
    if programs is None:
        return False
    per_program = reread_bytes(spec, config, index, reread)
    resident = min(programs, spec.target.limits.num_sms * occupancy.resident_programs(spec, config))
    return resident * per_program <= l2 < programs * per_program


def reread_bytes(
    spec: ConfigSpec, config: Config, index: int, reread: list[Node] | None = None
) -> int:
    """Bytes one program of device loop ``index`` reads more than once under ``config`` (its
    loads ``reread``, default: :func:`_reread_loads`'s), each tensor counted once."""
    if reread is None:
        reread = _reread_slotted(spec.loops[index], tuple(config.reduction_loops))
    grid = spec.loops[index].grid_syms
    return sum(bytes_per_program(n, config, grid) for n in _one_per_tensor(reread))


def _one_per_tensor(loads: list[Node]) -> list[Node]:
    """One load of each tensor (two loops reading one row count the row once)."""
    return list({id(n.attrs["tensor"]): n for n in loads}.values())


def bytes_per_program(load: Node, config: Config, grid: list[Sym]) -> int:
    """Bytes of ``load``'s tensor one program reads over all its chunks and loop steps: its own
    tile of the grid dims, the whole extent of the others."""
    elements = 1
    for d in load.shape:
        if isinstance(d, Sym) and (d in grid or not isinstance(d.extent, int)):
            elements *= sym_block(d, tuple(config.block_sizes), tuple(config.reduction_loops))
        else:
            elements *= d.extent if isinstance(d, Sym) else d
    return elements * load.dtype.itemsize


def _rolled_syms(nodes: list[Node], chunks: tuple[int | None, ...]) -> list[Sym]:
    """The reduction dims ``nodes`` reduce over that ``chunks`` processes in chunks."""
    out: list[Sym] = []
    for node in nodes:
        if node.op is not Op.REDUCE:
            continue
        sym = node.inputs[0].shape[node.attrs["axis"]]
        if not isinstance(sym, Sym) or sym.kind is not SymKind.RDIM or sym in out:
            continue
        chunk = reduction_chunk(sym, chunks)
        if chunk is not None and chunk < int(sym.extent):
            out.append(sym)
    return out


class _GridDependence:
    """Whether a value or a dim differs between ``loop``'s programs: a grid dim, a dim whose
    bounds are computed from one (a loop over ``tile.begin:tile.end``), a value computed from
    such (memoized per node)."""

    def __init__(self, loop: DeviceLoop):
        self.grid = frozenset(map(id, loop.grid_syms))
        self.memo: dict[int, bool] = {}

    def dim(self, d: object) -> bool:
        if not isinstance(d, Sym):
            return False
        bounds = [b for b in (d.begin, d.extent) if isinstance(b, Node)]
        return id(d) in self.grid or any(map(self.value, bounds))

    def value(self, node: Node) -> bool:
        found = self.memo.get(node.id)
        if found is None:
            self.memo[node.id] = False  # (a cycle through a loop-carried value)
            found = node.op is not Op.ARG and (
                any(map(self.dim, [*node.shape, node.attrs.get("sym")]))
                or any(map(self.value, node.inputs))
            )
            self.memo[node.id] = found
        return found

    def load(self, node: Node) -> bool:
        try:
            return self.value(node) or any(map(self.dim, node.attrs.get("index", ())))
        except RecursionError:  # an index computed through thousands of ops: assume it does
            return True


__all__ = ["default_policies", "reread_bytes"]
