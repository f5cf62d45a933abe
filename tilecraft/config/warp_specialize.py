"""Warp specialization and operand provenance of dot loops (stage: config; in: a target, a
config's warps and a dot loop's IR; out: whether and how a loop may be warp-specialized on it,
the threads and registers that hold its tiles, and which loads must stay pointers).

Triton 3.6 can warp-specialize an sm_90 dot loop (a producer warpgroup issuing TMA copies, two
consumer warpgroups doing wgmma), with rules and failures measured on the H200 that each
function names. ``config/pipelines.py`` builds the Hopper pipelines on these; the config space
(``config/space.py``) and the resource model (``config/resolve.py``) apply them too.
"""

from __future__ import annotations

from tilecraft.ir.nodes import Node, Op, walk
from tilecraft.targets.target import Target

HOPPER_WS_WARPS = 4  # Triton 3.6 warp-specializes an sm_90 loop only at num_warps=4 (runs 12)
WS_WARPGROUPS = 3  # one producer and two consumer warpgroups per warp-specialized program
WS_MAX_STAGES_SM9X = 4  # Triton 3.6: 5+ stages in a specialized sm_9x loop gave NaN
PRODUCER_REGISTERS = 40  # a specialized producer warpgroup gives its registers up (setmaxnreg)


def warp_specialize_problem(target: Target, num_warps: int | None) -> str | None:
    """Why a warp-specialized loop cannot be one with ``num_warps`` on ``target`` (None if it
    can): cross-compiled for sm_90, Triton 3.6 partitions only 4-warp programs (an 8-warp
    program with ``warp_specialize=True`` compiles without specializing)."""
    if target.backend != "cuda" or int(target.arch) // 10 != 9 or num_warps is None:
        return None
    if num_warps != HOPPER_WS_WARPS:
        return f"needs num_warps={HOPPER_WS_WARPS} on sm_9x (Triton 3.6 specializes only those)"
    return None


def warp_specialize_stage_cap(target: Target) -> int | None:
    """The most stages a warp-specialized loop may have on ``target`` (None: no cap). On sm_9x
    Triton 3.6 computed NaN with 5 or more: bmm 16x1024^3 at 128x128x64 with 5 and 6 stages,
    128x256x32 with 6 and 8, while 3 and 4 stages were exact at every tile
    (benchmarks/results/cc_bmm_s6.md, bmm_tiles_s8.md)."""
    if target.backend != "cuda" or int(target.arch) // 10 != 9:
        return None
    return WS_MAX_STAGES_SM9X


def fit_specialized_stages(
    target: Target, stages: int | None, specialized: bool, repairs: list[str]
) -> int | None:
    """``stages`` within :func:`warp_specialize_stage_cap` where a loop is specialized."""
    cap = warp_specialize_stage_cap(target)
    if cap is None or stages is None or stages <= cap or not specialized:
        return stages
    repairs.append(
        f"num_stages={stages} with a warp-specialized loop on {target.key}: Triton 3.6 computes "
        f"wrong results (NaN) there with more than {cap} stages; using {cap}"
    )
    return cap


def warp_specialize_carry_problem(target: Target, loop: Node) -> str | None:
    """Why ``loop`` must not be warp-specialized on ``target`` for what it carries (None if it
    may): on sm_9x a loop carrying values other than ``tl.dot`` accumulators (an online
    softmax's running max and sum) gave NaN on the H200 under Triton 3.6 (attention,
    2x32x4096x128, benchmarks/results/cc_attn_s5.md); Triton's own attention tutorial turns warp
    specialization off on Hopper. A loop whose carries are all accumulators of its dots (a GEMM's
    k loop) specializes correctly."""
    if target.backend != "cuda" or int(target.arch) // 10 != 9:
        return None
    others = [
        c.attrs.get("name", c.hint) for c in loop.attrs.get("carried", ()) if not _dot_carry(c)
    ]
    if not others:
        return None
    names = ", ".join(sorted(map(str, others)))
    return f"carries {names}, not only tl.dot accumulators (Triton 3.6 on sm_9x: wrong results)"


def computed_left_operand_loads(target: Target, loop: Node) -> list[Node]:
    """The loads of a dot loop that must not be tensor descriptors on ``target``: on sm_9x,
    every load of a loop whose dot has a left operand computed from tiles loaded in it (not a
    plain load, cast or view: ``tril(a)`` as ``where(mask, a[tm, tk], 0)``). With Triton 3.6 on
    the H200 the lower-triangular matmul 4096^3 came out wrong at 4 of 5 descriptor pipelines
    (errors to 1e12; also with only its right operand a descriptor), and right with pointer
    loads at every tile (benchmarks/results/heldout_dots_s9.md). A computed right operand (an
    int8 weight scaled to bf16) is right with descriptors, as is attention's ``p @ v``, whose
    left operand comes from a dot, not a load."""
    if target.backend != "cuda" or int(target.arch) // 10 != 9:
        return []
    if computed_operand(loop, 0):
        return [n for n in walk(loop.body or []) if n.op is Op.LOAD]
    return []


def computed_operand(loop: Node, k: int) -> bool:
    """Whether a dot in ``loop`` has its operand ``k`` (0: left, 1: right) computed from tiles
    loaded in the loop (a mask, a scale or a dequantization: not a plain load, cast or view)."""
    body = loop.body or []
    inside = {id(n) for n in walk(body)}
    return any(
        through_views(dot.inputs[k]).op is not Op.LOAD and loads_in_loop(dot.inputs[k], inside)
        for dot in body
        if dot.op is Op.DOT
    )


def _dot_carry(carry: Node) -> bool:
    """Whether a loop-carried value is a dot accumulator: its next value is a ``tl.dot`` whose
    accumulator derives from the carry itself (``acc = dot(a, b, acc=acc * alpha)`` included)."""
    nxt = carry.attrs.get("next")
    return nxt is not None and nxt.op is Op.DOT and len(nxt.inputs) == 3


def compute_threads(target: Target, num_warps: int, specialized: bool) -> int:
    """Threads that hold the tiles: a warp-specialized sm_9x program's two consumer warpgroups
    of ``num_warps`` warps each (its producer warpgroup only issues copies)."""
    if specialized and target.backend == "cuda":
        return num_warps * (WS_WARPGROUPS - 1) * target.warp_size
    return num_warps * target.warp_size


def consumer_register_file(target: Target, num_warps: int, specialized: bool) -> int:
    """Registers of an SM that a program's tile-holding threads share: all of them, less what
    a warp-specialized producer warpgroup keeps after giving the rest to its consumers."""
    file = target.limits.registers_per_sm
    if specialized and target.backend == "cuda":
        return file - num_warps * target.warp_size * PRODUCER_REGISTERS
    return file


def through_views(node: Node) -> Node:
    """The node a dot operand comes from through transposes, views and casts."""
    while node.op in (Op.VIEW, Op.CAST) and node.inputs:
        node = node.inputs[0]
    return node


_ELEMENTWISE = (Op.VIEW, Op.CAST, Op.UNARY, Op.BINARY, Op.WHERE)


def loads_in_loop(operand: Node, inside: set[int]) -> list[Node]:
    """Loads inside the loop that a computed dot operand is made of elementwise (``tril(a)``'s
    ``a`` tile): the pipeliner stages them in shared memory like a direct operand (cross-compiled
    for sm_90, a lower-triangular matmul 128x256x64 x 5 stages: 245840 B; counting the masked
    left operand as none predicted 163840 and the default failed to launch)."""
    found, stack, seen = [], [operand], set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if node.op is Op.LOAD and id(node) in inside:
            found.append(node)
        elif node.op in _ELEMENTWISE:
            stack.extend(node.inputs)
    return found


__all__ = [
    "HOPPER_WS_WARPS",
    "compute_threads",
    "computed_left_operand_loads",
    "computed_operand",
    "consumer_register_file",
    "fit_specialized_stages",
    "loads_in_loop",
    "through_views",
    "warp_specialize_carry_problem",
    "warp_specialize_problem",
    "warp_specialize_stage_cap",
]
