"""Split reductions in generated code (stage: codegen; in: a device loop whose plan splits its
inner loop ``S`` ways, see ``ir/split.py``; out: two Triton kernels and their launcher).

* The **partials** kernel runs on a ``(tiles, S)`` grid: program ``(t, s)`` runs the code before
  the inner loop, the loop's ``s``-th share of iterations (whole blocks, so no block straddles two
  shares) with every accumulator starting at its neutral value, and stores each accumulator's
  whole block to ``scratch[s, t, :]`` (a padded block: no mask is needed).
* With ``split_atomics=True`` (opt-in: the order of the additions then varies run to run) the
  partials kernel adds its sums into one zeroed block per tile with ``tl.atomic_add`` and the
  combine kernel reads that one block.
* The **combine** kernel runs on the ordinary ``(tiles,)`` grid: the code before the loop again
  (it is side-effect free: the legality rule), each accumulator as
  ``init (+) p_0 (+) ... (+) p_{S-1}`` in that fixed order (deterministic), then the code after the
  loop unchanged.
* **One launch** (``Plan.split_one_launch``, where the target has arrival counters): the combine
  is a ``@triton.jit`` function that the partials kernel calls. After storing its partials, each
  program counts itself in with a ``gpu``-scope acq_rel ``tl.atomic_add`` on its tile's counter
  (after a block barrier, so the count follows every thread's stores); the program that arrives
  last runs the combine, reading the partials with volatile loads (the L1 of its SM may hold
  stale lines of them), and resets the counter to zero for the next launch. The sum is the
  same fixed-order sum as the second kernel's; the second launch and its gap are saved (H200: a
  65536x1024 column sum 0.0478 -> 0.0460-0.0467 ms, 16 rows of 4M 0.0473 -> 0.0457;
  ``benchmarks/results/split_launches_s10``). The combine is a called, not inlined, function
  (``codegen/kernel.py`` says why). The counters live in a per-stream buffer that stays zeroed
  between launches (``runtime/device.split_counters``).

Where the loops after the split one carry nothing (a BatchNorm's normalizing pass over the rows
it summed, ``ir/split.shared_loops``), the combine kernel runs on the ``(tiles, S)`` grid too:
every program combines the partials alike and runs its share of each such loop (two launches:
one launch's last-arriving program would run them alone).

Where the loops after the split one carry accumulators of their own before any carry-free loop
(a GroupNorm's variance pass after its mean, ``ir/split.chained_sites``), each such loop is split
in turn: one more partials kernel per loop on the ``(tiles, S)`` grid, whose programs first
combine the earlier loops' partials alike (a :class:`SplitPass` per earlier loop in
``combined``), then the last combine, whose programs share the carry-free loops after the chain.

A split **rolled** reduction dim (``RolledSite``) runs both kernels on the ``(tiles, S)`` grid:
the partials kernel runs the code before the reductions and its share of their chunk loop, then
stores each reduction's result; the combine kernel sets each reduction to
``p_0 (+) ... (+) p_{S-1}`` (every share alike) and runs its share of the chunk loop after them.
With a second pass of sums relative to a first-pass max (softmax, logsumexp), the partials
kernel runs both chunk loops and also stores each share's shift; the combine rescales.

``codegen/loops.py`` (an inner loop) and ``codegen/schedule.py`` (chunk loops) call the hooks of
:class:`SplitPass` where they render the split loop; ``EmitContext.split`` holds the pass.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import torch

from tilecraft.ir import dtypes
from tilecraft.ir.nodes import Node, Sym
from tilecraft.ir.pointwise import POINTWISE
from tilecraft.ir.split import FN_OF, RelativeSum, RolledSite, Site, SplitSite

if TYPE_CHECKING:
    from tilecraft.codegen.context import EmitContext


PARTIALS, COMBINE = "partials", "combine"
UNROLLED_SHARES = 8  # more shares combine in a loop (SplitPass._shares)
COUNTERS = "_tc_split_count"  # one launch: the kernel parameter of the tiles' arrival counters


@dataclasses.dataclass
class Scratch:
    """One accumulator's partials buffer: ``factor * tiles * numel`` elements of ``dtype``."""

    name: str  # the kernel parameter and launcher variable
    numel: int  # elements of one (padded) block of the accumulator
    dtype: torch.dtype


@dataclasses.dataclass
class SplitPass:
    site: Site
    factor: int
    phase: str  # PARTIALS or COMBINE
    atomic: bool = False  # partial sums atomically added into one block per tile (opt-in)
    one_launch: bool = False  # the combine runs in the partials kernel's last program per tile
    then_call: str = ""  # partials pass of one launch: the call of the combine function
    scratch: dict[int, Scratch] = dataclasses.field(default_factory=dict)  # value id -> buffer
    # a chain's kernel (ir/split.chained_sites): the earlier loops' combine passes, and this
    # site's place in the chain (it names its buffers apart from the other sites')
    combined: tuple[SplitPass, ...] = ()
    link: int = 0

    def is_site(self, node: Node) -> bool:
        return node is self.site.loop

    def for_loop(self, node: Node) -> SplitPass | None:
        """The pass that renders inner loop ``node``: this one (its site or a loop it shares),
        an earlier chained loop's combine, or None (a loop it does not touch)."""
        if self.is_site(node) or self.shares(node):
            return self
        return next((p for p in self.combined if p.is_site(node)), None)

    @property
    def buffers(self) -> list[Scratch]:
        """Every partials buffer this kernel reads or writes: the combined passes' too."""
        return [b for p in (*self.combined, self) for b in p.scratch.values()]

    @property
    def rolled(self) -> Sym | None:
        """The reduction dim whose chunk loops are split (None: an inner loop is)."""
        return self.site.sym if isinstance(self.site, RolledSite) else None

    @property
    def values(self) -> list[Node]:
        """The values whose partials are stored, in buffer order (a rolled site's relative
        sums also store each share's shift)."""
        if isinstance(self.site, RolledSite):
            shifts = {r.shift.id: r.shift for r in self.site.relative}
            return [*self.site.reduces, *shifts.values()]
        return [a.carry for a in self.site.accumulators]

    @property
    def passes(self) -> int:
        """The chunk loops a rolled site's partials kernel runs (1 for an inner loop)."""
        return self.site.passes if isinstance(self.site, RolledSite) else 1

    @property
    def shared(self) -> tuple[Node, ...]:
        """The loops after the split one that the combine's programs share (``ir/split.py``)."""
        return self.site.shared if isinstance(self.site, SplitSite) else ()

    def shares(self, node: Node) -> bool:
        """Whether ``node`` is a loop this (combine) pass runs one share of."""
        return self.phase == COMBINE and any(node is n for n in self.shared)

    def grid(self, tiles: str) -> str:
        """The launch grid of this pass."""
        two_d = self.phase == PARTIALS or self.rolled or self.shared
        return f"{tiles}, {self.factor}" if two_d else tiles

    # -- partials kernel ------------------------------------------------------------------
    def carry_init(self, ctx: EmitContext, carry: Node) -> str:
        """Every share starts from the neutral element (the real init joins in the combine)."""
        kind, _ = self._combine(carry)
        dims = ctx.shape_expr(carry.shape)
        neutral = dtypes.neutral(kind, carry.dtype)
        return ctx.full_expr(dims, neutral, carry.dtype)

    def bounds(
        self, ctx: EmitContext, sym: Sym, begin: str, end: str, block: str
    ) -> tuple[str, str]:
        """This program's ``[start, stop)`` of the loop: ``per`` whole blocks per share."""
        per = ctx.w.fresh(f"split_span_{sym.index}")
        trips = f"tl.cdiv({end} - {begin}, {block})" if block != "1" else f"({end} - {begin})"
        ctx.w.line(f"{per} = tl.cdiv({trips}, {self.factor}) * {block}")
        start = ctx.w.fresh(f"split_start_{sym.index}")
        ctx.w.line(f"{start} = {begin} + tl.program_id(1) * {per}")
        stop = ctx.w.fresh(f"split_stop_{sym.index}")
        ctx.w.line(f"{stop} = tl.minimum({start} + {per}, {end})")
        return start, stop

    def store_partials(self, ctx: EmitContext) -> None:
        base = ctx.w.fresh("split_base")
        share = "" if self.atomic else "tl.program_id(1).to(tl.int64) * tl.num_programs(0) + "
        ctx.w.line(f"{base} = {share}tl.program_id(0).to(tl.int64)")
        store = "tl.atomic_add" if self.atomic else "tl.store"
        sem = ', sem="relaxed"' if self.atomic else ""
        for value in self.values:
            buffer = self._buffer(ctx, value)
            offsets = ctx.block_offsets(value.shape)
            ctx.w.line(
                f"{store}({buffer.name} + {base} * {buffer.numel} + {offsets}, "
                f"{ctx.expr(value)}{sem})"
            )
        if self.then_call:
            self._last_arrival_combines(ctx)

    def _last_arrival_combines(self, ctx: EmitContext) -> None:
        """Count this program in on its tile's counter; the last of the ``factor`` to arrive
        combines (see the module docstring for the memory ordering)."""
        counter = f"{COUNTERS} + tl.program_id(0)"
        arrived = ctx.w.fresh("split_arrived")
        ctx.w.line("tl.debug_barrier()  # every thread's partials are stored before the count")
        ctx.w.line(f'{arrived} = tl.atomic_add({counter}, 1, sem="acq_rel", scope="gpu")')
        ctx.w.line(f"if {arrived} == {self.factor - 1}:")
        with ctx.w.indented():
            ctx.w.line(self.then_call)
            ctx.w.line(f"tl.store({counter}, 0)  # zero again for the next launch")

    # -- combine kernel -------------------------------------------------------------------
    def combine(
        self,
        ctx: EmitContext,
        init_text: str | None,
        carry: Node,
        inits: dict[int, str] | None = None,
    ) -> None:
        """Bind ``carry`` (or a rolled reduction) to ``init (+) p_0 (+) ... (+) p_{S-1}`` (in
        that order; a reduction has no init). An online softmax's sum of exponentials combines
        relative to its running max (:meth:`_combine_relative`; ``inits``: the carries' init
        texts by id)."""
        relative_to = self._relative_to(carry)
        if relative_to is not None and init_text is not None:
            self._combine_relative(
                ctx, init_text, carry, relative_to, (inits or {})[relative_to.id]
            )
            return
        _, fn = self._combine(carry)
        template = POINTWISE[fn].template
        name = ctx.w.fresh(carry.hint)
        load = self._partial_at(ctx, carry)
        first = load("0")
        ctx.w.line(f"{name} = {first if init_text is None else template.format(init_text, first)}")
        for share in self._shares(ctx, 1):
            ctx.w.line(f"{name} = {template.format(name, load(share))}")
        ctx.scopes[-1][carry.id] = name

    def _shares(self, ctx: EmitContext, begin: int) -> Iterator[str]:
        """Shares ``begin..S-1`` in order, each as the text a loop body reads: unrolled for a
        few shares (their loads overlap), else the variable of a ``tl.range`` loop whose body
        the caller writes once (62 unrolled shares of a 4 x 256000 log-softmax held 225
        registers: every load was hoisted)."""
        end = 1 if self.atomic else self.factor
        if end - begin <= UNROLLED_SHARES:
            yield from (str(k) for k in range(begin, end))
            return
        share = ctx.w.fresh("share")
        ctx.w.line(f"for {share} in tl.range({begin}, {end}):")
        with ctx.w.indented():
            yield share

    def _partial_at(self, ctx: EmitContext, value: Node) -> Callable[[str], str]:
        """The load of ``value``'s partial of a share (one total per tile where the partial
        sums were added atomically), as a function of the share's text."""
        buffer = self._buffer(ctx, value)
        base = ctx.w.fresh(f"{value.hint}_part")
        ctx.w.line(f"{base} = {buffer.name} + tl.program_id(0).to(tl.int64) * {buffer.numel}")
        step = ctx.w.fresh(f"{value.hint}_stride")
        ctx.w.line(f"{step} = tl.num_programs(0).to(tl.int64) * {buffer.numel}")
        offsets = ctx.block_offsets(value.shape)
        volatile = ", volatile=True" if self.one_launch else ""
        return lambda share: f"tl.load({base} + {share} * {step} + {offsets}{volatile})"

    def _combine_relative(
        self, ctx: EmitContext, init_text: str, carry: Node, running_max: Node, max_init: str
    ) -> None:
        """``carry``, a sum of ``exp(s - m)`` whose running max ``m`` is ``running_max``:
        ``M = max(m_init, m_0, ..., m_{S-1})`` (the max's own combine, in the same order),
        then ``l_init * exp(m_init - M) + l_0 * exp(m_0 - M) + ...``. A share whose max is
        still -inf saw only masked scores: it adds nothing (its own sum is ``0 * exp(nan)``
        where its first update compared -inf with -inf; a serial loop's first iteration sees
        the same only where its first block is masked whole)."""
        m_at, l_at = self._partial_at(ctx, running_max), self._partial_at(ctx, carry)
        top = ctx.w.fresh(f"{running_max.hint}_all")
        ctx.w.line(f"{top} = {max_init}")
        for share in self._shares(ctx, 0):
            ctx.w.line(f"{top} = {POINTWISE['maximum'].template.format(top, m_at(share))}")
        # an accumulator with dims past the max's (flash decoding's [G, D]) rescales along them
        extra = carry.ndim - running_max.ndim
        at = "[" + ", ".join([":"] * running_max.ndim + ["None"] * extra) + "]" if extra else ""

        def term(m: str, part: str) -> str:
            return f"tl.where({m}{at} > float('-inf'), {part} * tl.exp({m}{at} - {top}{at}), 0.0)"

        total = ctx.w.fresh(carry.hint)
        init_max = ctx.w.fresh(f"{running_max.hint}_share")
        ctx.w.line(f"{init_max} = {max_init}")
        ctx.w.line(f"{total} = {term(init_max, init_text)}")
        for share in self._shares(ctx, 0):
            m = ctx.w.fresh(f"{running_max.hint}_share")
            ctx.w.line(f"{m} = {m_at(share)}")
            ctx.w.line(f"{total} = {total} + {term(m, l_at(share))}")
        ctx.scopes[-1][carry.id] = total

    def _relative_to(self, value: Node) -> Node | None:
        if isinstance(self.site, RolledSite):
            return None
        acc = next(a for a in self.site.accumulators if a.carry is value)
        return acc.relative_to

    def combine_reductions(self, ctx: EmitContext, phase: int) -> None:
        """The combine kernel's rolled reductions of chunk loop ``phase``, from the partials
        kernel's results: the first pass's at 0, the relative sums at 1 (once the combined
        shift is computed from the combined max)."""
        assert isinstance(self.site, RolledSite)
        relative = {r.total.id: r for r in self.site.relative}
        for node in self.site.reduces:
            if node.id in relative and phase == 1:
                self._combine_rolled_relative(ctx, relative[node.id])
            elif node.id not in relative and phase == 0:
                self.combine(ctx, None, node)

    def _combine_rolled_relative(self, ctx: EmitContext, rel: RelativeSum) -> None:
        """``sum_s l_s * exp(shift_s - shift)`` over the shares whose max is not -inf (a share
        of masked or -inf values only adds nothing), ``shift`` the combine's own."""
        m_at, c_at = self._partial_at(ctx, rel.m), self._partial_at(ctx, rel.shift)
        l_at = self._partial_at(ctx, rel.total)
        shift = ctx.expr(rel.shift)
        # the max and its shift keep the reduced dim (keepdim), the sum may not: same numel
        shape = ctx.shape_expr(rel.total.shape)

        def fit(expr: str) -> str:
            return expr if rel.shift.shape == rel.total.shape else f"tl.reshape({expr}, [{shape}])"

        total = ctx.w.fresh(rel.total.hint)
        ctx.w.line(f"{total} = {ctx.full_expr(shape, 0.0, rel.total.dtype)}")
        for share in self._shares(ctx, 0):
            live = fit(f"{m_at(share)} > float('-inf')")
            scale = fit(f"tl.exp({c_at(share)} - {shift})")
            ctx.w.line(f"{total} = {total} + tl.where({live}, {l_at(share)} * {scale}, 0.0)")
        ctx.scopes[-1][rel.total.id] = total

    # -- shared ---------------------------------------------------------------------------
    def _combine(self, value: Node) -> tuple[str, str]:
        """The reduction kind and the BINARY fn that combine ``value``'s partials."""
        if isinstance(self.site, RolledSite):
            return value.attrs["kind"], FN_OF[value.attrs["kind"]]
        acc = next(a for a in self.site.accumulators if a.carry is value)
        return acc.kind, acc.fn

    def allocation(self, buffer: Scratch, device: str) -> str:
        """The launcher line that allocates ``buffer`` (zeroed for atomic adds)."""
        if self.atomic:
            size, make = "split_tiles", "torch.zeros"
        else:
            size, make = f"{self.factor} * split_tiles", "torch.empty"
        return (
            f"    {buffer.name} = {make}({size} * {buffer.numel}, dtype={buffer.dtype}, "
            f"device={device}.device)\n"
        )

    def _buffer(self, ctx: EmitContext, carry: Node) -> Scratch:
        buffer = self.scratch.get(carry.id)
        if buffer is None:
            numel = ctx.numel(carry.shape)
            k = next(i for i, v in enumerate(self.values) if v is carry)
            name = f"_tc_split{self.link or ''}_{carry.hint}_{k}"
            ctx.w.reserve(name)
            buffer = Scratch(name, numel, carry.dtype)
            self.scratch[carry.id] = buffer
        return buffer


__all__ = ["COMBINE", "COUNTERS", "PARTIALS", "Scratch", "SplitPass"]
