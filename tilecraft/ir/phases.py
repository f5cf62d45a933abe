"""Phases of a rolled reduction dim (stage: ir analysis; in: a block of nodes and a reduction
dim R; out: each node's phase, and whether R can be rolled at all: ``rdim_loopable``).

With R processed in chunks, a node's *phase* is how many reductions over R must finish before it
can be computed. Codegen (``codegen/schedule.py``) recomputes the values on R of phase p inside
chunk loop p and emits the other values of phase p between chunk loops p-1 and p; split
reductions (``ir/split.py``) split the chunk loops across programs.
"""

from __future__ import annotations

from tilecraft.ir.nodes import DeviceLoop, Node, Op, Sym, dot_roles, walk


def free_inputs(loop: Node) -> list[Node]:
    """Nodes used inside a LOOP's, IF's or WHILE's body (or as its bounds, condition, carried
    inits and carried results) defined outside it."""
    body = list(walk(loop.body or []))
    if loop.op is Op.IF:
        body += walk(loop.attrs["orelse"])
    if loop.op is Op.WHILE:
        body += walk(loop.attrs["cond_body"])
    inside = {n.id for n in body}
    inside.update(c.id for c in loop.attrs.get("carried", []))
    out: list[Node] = list(loop.inputs)
    for carry in loop.attrs.get("carried", []):
        out.append(carry.inputs[0])
        out += [v for k in ("then", "else", "next") if (v := carry.attrs.get(k)) is not None]
    for n in body:
        for i in n.inputs:
            if i.id not in inside:
                out.append(i)
    return [n for n in out if n.id not in inside]


def phases(nodes: list[Node], sym: Sym) -> tuple[dict[int, int], int]:
    """Each node's phase (by id) and the largest phase."""
    in_block = {n.id for n in nodes}
    phase: dict[int, int] = {}

    def of(n: Node) -> int:
        return phase.get(n.id, 0) if n.id in in_block else 0

    stored: dict[str, int] = {}  # tensor name -> latest phase of a store or atomic to it
    loaded: dict[str, int] = {}  # tensor name -> latest phase of a load of it
    for n in nodes:
        deps = free_inputs(n) if n.op in (Op.LOOP, Op.IF, Op.WHILE) else n.inputs
        p = max((of(i) for i in deps), default=0)
        if rolled_reduce(n, sym):
            p = of(n.inputs[0]) + 1
        p = _after_memory_order(n, p, stored, loaded)
        phase[n.id] = p
    return phase, max(phase.values(), default=0)


def _after_memory_order(n: Node, p: int, stored: dict[str, int], loaded: dict[str, int]) -> int:
    """``n``'s phase ``p`` raised so that it stays after the earlier accesses to the tensors it
    touches that it must follow: a load after a store (``s[tm] = x.sum(1); y = s[tm]`` reads
    the sum, so with the sum rolled the load cannot hoist above the store), a store after a
    load or a store. Updates ``stored`` / ``loaded``."""
    accesses = [n] if n.body is None else [a for a in walk(_bodies(n))]
    accesses = [a for a in accesses if a.op in (Op.LOAD, Op.STORE, Op.ATOMIC)]
    for a in accesses:
        name = a.attrs["tensor"].name
        p = max(p, stored.get(name, 0))
        if a.op is not Op.LOAD:
            p = max(p, loaded.get(name, 0))
    for a in accesses:
        name = a.attrs["tensor"].name
        table = loaded if a.op is Op.LOAD else stored
        table[name] = max(table.get(name, 0), p)
    return p


def _bodies(n: Node) -> list[Node]:
    out = list(n.body or [])
    if n.op is Op.IF:
        out += n.attrs["orelse"]
    if n.op is Op.WHILE:
        out += n.attrs["cond_body"]
    return out


def chunk_loop_loads(nodes: list[Node], sym: Sym) -> dict[int, list[Node]]:
    """For each phase, the loads on ``sym`` its chunk loop reads: those a value on ``sym`` of
    that phase is computed from (a load used in several phases is read by each chunk loop)."""
    phase, _ = phases(nodes, sym)
    sources: dict[int, set[int]] = {}  # node id -> ids of the loads on sym it is computed from
    by_id: dict[int, Node] = {}
    found: dict[int, dict[int, Node]] = {}
    for node in nodes:
        if not any(d is sym for d in node.shape):
            continue
        sources[node.id] = set().union(*(sources.get(i.id, set()) for i in node.inputs))
        if node.op is Op.LOAD:
            sources[node.id].add(node.id)
            by_id[node.id] = node
            continue  # read by the chunk loops of its users, not of its own (earliest) phase
        for load_id in sources[node.id]:
            found.setdefault(phase.get(node.id, 0), {})[load_id] = by_id[load_id]
    return {p: list(loads.values()) for p, loads in found.items()}


def rolled_reduce(node: Node, sym: Sym) -> bool:
    """Whether ``node`` reduces over ``sym``."""
    return node.op is Op.REDUCE and node.inputs[0].shape[node.attrs["axis"]] is sym


def rdim_loopable(loop: DeviceLoop, sym: Sym) -> tuple[bool, str]:
    """A reduction dim can be processed in chunks if every value on it is consumed by stores,
    pointwise ops, views, dots that keep it (an M, N or batch dim: each chunk loop computes its
    chunk of the product; tl.dot's K is summed inside the dot) or sum/max/min/argmax/argmin
    reductions (loop-carried values on it need homes in memory: ``ir/carried_homes.py``) and no
    pass re-reads what an earlier one stored."""
    for node in walk(loop.body):
        if (
            node.op is Op.REDUCE
            and rolled_reduce(node, sym)
            and node.attrs["kind"] not in ("sum", "max", "min", "argmax", "argmin")
        ):
            return False, f"{node.attrs['kind']} over it needs the whole dim"
        if node.op is Op.SCAN and node.inputs[0].shape[node.attrs["axis"]] is sym:
            return False, "a scan along it needs the whole dim"
        if node.op is Op.GATHER and sym in (
            node.inputs[0].shape[node.attrs["axis"]],
            node.shape[node.attrs["axis"]],
        ):
            return False, "a torch.gather along it needs the whole dim"
        if node.op is Op.DOT and any(d is sym and r == "k" for d, r in dot_roles(node)):
            return False, "tl.dot sums over it (its K dim)"
        if node.op in (Op.IF, Op.WHILE) and any(sym in n.shape for n in walk([node])):
            return False, f"{'an' if node.op is Op.IF else 'a'} `{node.op.value}` on data uses it"
        if node.op is Op.EXTERN and any(sym in i.shape for i in [node, *node.inputs]):
            return False, f"{node.attrs.get('what', 'tc.triton_call')} uses it"
        if (
            node.op is Op.VIEW
            and node.attrs.get("reshape")
            and sym in [*node.shape, *node.inputs[0].shape]
        ):
            return False, "a reshape or torch.cat regroups it"
    reread = _reread_after_store(loop, sym)
    if reread:
        return False, reread
    return True, ""


def _reread_after_store(loop: DeviceLoop, sym: Sym) -> str:
    """Why chunk loops would read a tensor after an earlier chunk loop stored into it (an
    in-place residual update ``r[tt, :] = x + r`` before a statistics pass: the recompute pass
    would re-load the stored values), or ''. A load and store of a tensor in the same chunk
    loop read each chunk before writing it, and stay legal (``x[tt, :] = f(x[tt, :])``)."""
    phase, _ = phases(loop.body, sym)
    reads = chunk_loop_loads(loop.body, sym)
    for node in walk(loop.body):
        if node.op is not Op.STORE or sym not in node.inputs[0].shape:
            continue
        stored_in = phase.get(node.id, 0)  # a store nested in a branch or inner loop: phase 0
        tensor = node.attrs["tensor"]
        for later, loads in reads.items():
            if later > stored_in and any(n.attrs["tensor"].name == tensor.name for n in loads):
                return f"{tensor.name} is stored along it and read again by a later pass"
    return ""


__all__ = ["free_inputs", "phases", "rdim_loopable", "rolled_reduce"]
