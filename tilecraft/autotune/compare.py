"""Compare a config's results with the baseline's, with dtype-aware tolerances (stage: autotune).

Outputs (a tensor, nested tuples/lists/dicts of tensors, scalars, ``None``) and the tensor
arguments after the run (so in-place results count) are compared element by element:
``|actual - expected| <= atol * scale + rtol * |expected|`` where ``scale = max(1, max|expected|)``
over that tensor, so near-zero entries of a large-magnitude result (cancellation in a long fp32
sum) are judged against the tensor's magnitude, not against zero. NaN matches NaN and an infinity
matches the same infinity. Bool tensors must be equal; integer ones too, except that float math
rounded to integers (a quantization) may land one off in a few elements (:func:`_rounding_ties`).
A kernel that decides on computed floats (``decisions.py``) may differ in a few scattered
elements: its boundary cases (:func:`scattered`), or, for integers, in a few short runs whose
values trade places (:func:`traded_places`: a sort's positions of near-tied keys). Where ref
mode also ran in fp64 (``precise``), a float tensor may differ in its ill-conditioned elements,
those whose value moves many ulps under rounding, if this run is not much further off there
(:func:`_ill_conditioned`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch

# (rtol, atol) per dtype; atol is scaled by the tensor's largest magnitude (see module docstring)
DEFAULT_TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float64: (1e-7, 1e-8),
    torch.float32: (1e-4, 1e-5),
    torch.bfloat16: (2e-2, 2e-2),
    torch.float16: (1e-2, 1e-2),
}
FLOAT8_TOLERANCE = (1.25e-1, 1.25e-1)
# integer results may be one off in this share of elements (float math rounded to integers)
INT_ROUNDING_SHARE = 1e-3
# ... and packed codes (several integers a byte) may differ more than one where no line of any
# dim holds more than this share of its elements, no run is this long, and no differing element
# has more than ``TIE_NEIGHBOURS`` differing neighbours in its row and the rows beside it
ROUNDING_LINE_SHARE = 0.05
TIE_RUN = 5
TIE_NEIGHBOURS = 2
# a kernel deciding on computed floats may differ in this share of a tensor's elements (at least
# one), each alone in its row and column (at most two share an index) and no three in a run
FLIP_SHARE = 1e-5
FLIP_MIN_NUMEL = 1000
# an element is ill-conditioned where the baseline is this many ulps off the fp64 result, or the
# fp64 result moves this far under a one-ulp move of the inputs; a run may be this many times
# further off there. Such elements are at most this share of a tensor (a baseline that draws
# other random numbers on every run is off everywhere: that is no ill-conditioning)
ILL_CONDITIONED_ULPS = 64.0
BASELINE_ERROR_FACTOR = 64.0
ILL_CONDITIONED_SHARE = 1e-2
# ... unless the one-ulp spread is small where the baseline is off (a deterministic program well
# conditioned in its inputs that loses precision to its own fp32 rounding everywhere): then a
# run is as good as the baseline where its error against fp64 is, largest and mean over the
# tensor, at most this many times the baseline's
ROUNDING_BOUND_FACTOR = 4.0


@dataclasses.dataclass(frozen=True)
class Precise:
    """One float tensor of ref mode's fp64 run (``value``), and how far each element moved
    (``spread``) when the inputs moved by one fp32 ulp: its conditioning, free of the baseline's
    own luck. The leaves of ``precise`` trees (:func:`precise_leaves`)."""

    value: torch.Tensor
    spread: torch.Tensor


def precise_leaves(wide: Any, moved: Any) -> Any:
    """``wide`` (ref mode's fp64 outputs or arguments: tensors in nested tuples/lists/dicts) with
    each float tensor a :class:`Precise` of it and its counterpart in ``moved`` (the same run on
    inputs one ulp away)."""
    if isinstance(wide, torch.Tensor):
        usable = isinstance(moved, torch.Tensor) and moved.shape == wide.shape
        if not (usable and wide.is_floating_point()):
            return None
        spread = (moved.to(torch.float64) - wide.to(torch.float64)).abs()
        return Precise(wide, torch.nan_to_num(spread, nan=0.0, posinf=0.0))
    if isinstance(wide, (tuple, list)):
        same = isinstance(moved, (tuple, list)) and len(moved) == len(wide)
        return tuple(precise_leaves(w, moved[i] if same else None) for i, w in enumerate(wide))
    if isinstance(wide, Mapping):
        other = moved if isinstance(moved, Mapping) else {}
        return {k: precise_leaves(v, other.get(k)) for k, v in wide.items()}
    return None


Tolerances = Mapping[Any, tuple[float, float]]  # keys: torch.dtype or its name ("bfloat16")


def tolerance_for(dtype: torch.dtype, overrides: Tolerances | None = None) -> tuple[float, float]:
    """``(rtol, atol)`` for ``dtype``: an override (by dtype or name) or the default."""
    if overrides:
        name = str(dtype).removeprefix("torch.")
        for key in (dtype, name, str(dtype)):
            if key in overrides:
                rtol, atol = overrides[key]
                return float(rtol), float(atol)
    if dtype in DEFAULT_TOLERANCES:
        return DEFAULT_TOLERANCES[dtype]
    if "float8" in str(dtype):
        return FLOAT8_TOLERANCE
    return (0.0, 0.0)


@dataclasses.dataclass
class Mismatch:
    """One output (or argument) that differs from the baseline."""

    name: str  # "output[1]", "output", "argument 'x'"
    reason: str
    max_abs: float = math.nan
    max_rel: float = math.nan
    index: tuple[int, ...] | None = None
    actual: float | None = None
    expected: float | None = None
    scattered: bool = False  # a few isolated elements (see :func:`scattered`)
    # only in elements that move many ulps under rounding (see :func:`_ill_conditioned`)
    ill_conditioned: bool = False
    # integer results, each differing element one off (codes rounded on the other side of a tie)
    off_by_one: bool = False

    def describe(self) -> str:
        if math.isnan(self.max_abs):
            return f"{self.name}: {self.reason}"
        where = f" at index {list(self.index)}" if self.index is not None else ""
        values = (
            f" (got {self.actual:.6g}, expected {self.expected:.6g})"
            if self.actual is not None and self.expected is not None
            else ""
        )
        return (
            f"{self.name}: {self.reason}: max abs error {self.max_abs:.3g}, max rel error "
            f"{self.max_rel:.3g}; worst{where}{values}"
        )


@dataclasses.dataclass
class CompareResult:
    mismatches: list[Mismatch] = dataclasses.field(default_factory=list)
    compared: int = 0  # how many tensors/values were compared
    # scattered differences accepted because the kernel decides on computed floats
    boundary_cases: list[Mismatch] = dataclasses.field(default_factory=list)
    # the kernel rounds computed floats to integers: packed codes may differ as ties do
    rounds_floats: bool = False

    @property
    def ok(self) -> bool:
        return not self.mismatches

    @property
    def codes_one_off(self) -> bool:
        """Whether it differs only in integer results one off (see ``discover.agreed_ties``)."""
        return bool(self.mismatches) and all(m.off_by_one for m in self.mismatches)

    def summary(self) -> str:
        if self.ok and self.boundary_cases:
            where = (
                "in ill-conditioned elements (many ulps off their fp64 result under rounding)"
                if all(m.ill_conditioned for m in self.boundary_cases)
                else "at decision boundaries"
            )
            return (
                f"matches the baseline ({self.compared} values compared) except {where}: "
                + "; ".join(m.describe() for m in self.boundary_cases)
            )
        if self.ok:
            return f"matches the baseline ({self.compared} values compared)"
        return "; ".join(m.describe() for m in self.mismatches)


def compare(
    actual: Any,
    expected: Any,
    *,
    actual_args: Sequence[Any] = (),
    expected_args: Sequence[Any] = (),
    arg_names: Sequence[str] = (),
    tolerances: Tolerances | None = None,
    decides_on_floats: bool = False,
    rounds_floats: bool = False,
    precise: tuple[Any, Sequence[Any]] | None = None,
) -> CompareResult:
    """Compare outputs, then the tensor arguments after the run, with the baseline's.
    ``decides_on_floats``: the kernel branches on computed floats (``decisions.py``), so a
    tensor may differ in a few scattered elements (reported in ``boundary_cases``);
    ``rounds_floats``: it rounds computed floats to integers (``decisions.rounds_floats``), so
    packed integer codes may differ as ties do (:func:`_rounding_ties`); ``precise``: the
    baseline's (outputs, arguments after) computed in fp64, where the fp32 baseline's own
    rounding error is the judge of ill-conditioned elements (:func:`_ill_conditioned`)."""
    result = CompareResult(rounds_floats=rounds_floats)
    wide_out, wide_args = precise if precise is not None else (None, ())
    _compare_value("output", actual, expected, tolerances, result, wide_out)
    for i, (a, e) in enumerate(zip(actual_args, expected_args)):
        if isinstance(a, torch.Tensor) or isinstance(e, torch.Tensor):
            name = arg_names[i] if i < len(arg_names) else str(i)
            wide = wide_args[i] if i < len(wide_args) else None
            _compare_value(f"argument '{name}'", a, e, tolerances, result, wide)
    accepted = [
        m for m in result.mismatches if m.ill_conditioned or (decides_on_floats and m.scattered)
    ]
    result.boundary_cases = accepted
    result.mismatches = [m for m in result.mismatches if m not in accepted]
    return result


def _compare_value(
    name: str,
    actual: Any,
    expected: Any,
    tol: Tolerances | None,
    out: CompareResult,
    precise: Any = None,
) -> None:
    if isinstance(expected, torch.Tensor) or isinstance(actual, torch.Tensor):
        if not (isinstance(expected, torch.Tensor) and isinstance(actual, torch.Tensor)):
            out.mismatches.append(
                Mismatch(name, f"got {_kind(actual)}, expected {_kind(expected)}")
            )
            return
        out.compared += 1
        tensor = precise if isinstance(precise, Precise) else None
        mismatch = compare_tensors(name, actual, expected, tol, out.rounds_floats, tensor)
        if mismatch is not None:
            out.mismatches.append(mismatch)
        return
    if isinstance(expected, (tuple, list)):
        if not isinstance(actual, (tuple, list)) or len(actual) != len(expected):
            out.mismatches.append(
                Mismatch(name, f"got {_kind(actual)}, expected {_kind(expected)}")
            )
            return
        items = precise if isinstance(precise, (tuple, list)) else ()
        for i, (a, e) in enumerate(zip(actual, expected)):
            wide = items[i] if len(items) == len(expected) else None
            _compare_value(f"{name}[{i}]", a, e, tol, out, wide)
        return
    if isinstance(expected, Mapping):
        if not isinstance(actual, Mapping) or set(actual) != set(expected):
            out.mismatches.append(Mismatch(name, "keys differ from the baseline's"))
            return
        named = precise if isinstance(precise, Mapping) else {}
        for key in expected:
            _compare_value(f"{name}[{key!r}]", actual[key], expected[key], tol, out, named.get(key))
        return
    out.compared += 1
    if isinstance(expected, float) and isinstance(actual, (int, float)):
        rtol, atol = tolerance_for(torch.float32, tol)
        if not math.isclose(actual, expected, rel_tol=rtol, abs_tol=atol) and not (
            math.isnan(actual) and math.isnan(expected)
        ):
            out.mismatches.append(Mismatch(name, f"got {actual!r}, expected {expected!r}"))
    elif actual != expected:
        out.mismatches.append(Mismatch(name, f"got {actual!r}, expected {expected!r}"))


def compare_tensors(
    name: str,
    actual: torch.Tensor,
    expected: torch.Tensor,
    tol: Tolerances | None = None,
    rounds_floats: bool = False,
    precise: Precise | None = None,
) -> Mismatch | None:
    """``None`` if ``actual`` matches ``expected`` within the tolerance of its dtype
    (``rounds_floats``: the kernel rounds computed floats to integers, see
    :func:`_rounding_ties`; ``precise``: ``expected`` computed in fp64 and its conditioning,
    see :func:`_ill_conditioned`)."""
    if actual.shape != expected.shape:
        return Mismatch(name, f"shape {list(actual.shape)} != expected {list(expected.shape)}")
    if actual.dtype != expected.dtype:
        return Mismatch(name, f"dtype {actual.dtype} != expected {expected.dtype}")
    if actual.numel() == 0:
        return None
    a, e = actual.detach(), expected.detach().to(actual.device)
    if a.is_complex():
        a, e = torch.view_as_real(a), torch.view_as_real(e)
    if not a.is_floating_point():
        diff = a != e
        if not bool(diff.any()) or _rounding_ties(a, e, diff, rounds_floats):
            return None
        flat = int(diff.flatten().nonzero()[0])
        index = _unravel(flat, a.shape)
        one_off = a.dtype != torch.bool and _one_off(a, e, diff)
        return Mismatch(
            name, f"{int(diff.sum())} of {a.numel()} elements differ", index=index,
            actual=float(a.flatten()[flat]), expected=float(e.flatten()[flat]),
            scattered=scattered(diff) or traded_places(a, e, diff), off_by_one=one_off,
        )  # fmt: skip
    rtol, atol = tolerance_for(expected.dtype, tol)
    work = torch.float64 if expected.dtype == torch.float64 else torch.float32
    a, e = a.to(work), e.to(work)
    same_special = (torch.isnan(a) & torch.isnan(e)) | (torch.isinf(e) & (a == e))
    finite_e = torch.where(torch.isfinite(e), e, torch.zeros_like(e))
    scale = max(1.0, float(finite_e.abs().max()))
    err = (a - e).abs()
    err = torch.where(same_special, torch.zeros_like(err), err)
    err = torch.where(torch.isnan(err), torch.full_like(err, math.inf), err)
    allowed = atol * scale + rtol * finite_e.abs()
    excess = err - allowed
    worst = int(torch.argmax(excess.flatten()))
    if float(excess.flatten()[worst]) <= 0:
        return None
    outside = excess > 0
    rel = err / finite_e.abs().clamp_min(torch.finfo(work).tiny)
    return Mismatch(
        name,
        f"{int(outside.sum())} of {a.numel()} elements outside rtol={rtol:g}, "
        f"atol={atol:g}*{scale:.3g}",
        max_abs=float(err.max()),
        max_rel=float(rel.max()),
        index=_unravel(worst, a.shape),
        actual=float(a.flatten()[worst]),
        expected=float(e.flatten()[worst]),
        scattered=scattered(outside),
        ill_conditioned=precise is not None
        and _ill_conditioned(a, e, precise, outside, rtol, atol),
    )


def _ill_conditioned(
    a: torch.Tensor,
    e: torch.Tensor,
    precise: Precise,
    outside: torch.Tensor,
    rtol: float,
    atol: float,
) -> bool:
    """Whether every element of ``a`` outside the tolerance is within it of the fp64 result, or
    is ill-conditioned and at most ``BASELINE_ERROR_FACTOR`` times further off it than the
    baseline ``e`` is, or than the element moves when the inputs move by one fp32 ulp
    (``precise.spread``). An element is ill-conditioned where either is more than
    ``ILL_CONDITIONED_ULPS`` units in its last place (a well-conditioned one: a few): a 3 x 3
    inverse by cofactors of a nearly singular matrix (det cancels to 1e-4) is 4% off in fp32
    whichever correct program computes it (Triton's FMAs and 2-ulp division against torch's;
    201 of 37.7M elements on an H100, and no config matched ref mode). The baseline alone is
    one sample of that error and may be lucky (122 ulps off where a correct program was 113
    times further): the spread is the second. A wrong element of a well-conditioned result is
    off the fp64 result where neither the baseline nor the spread is."""
    p = precise.value.detach().to(device=a.device, dtype=torch.float64)
    if p.shape != a.shape or precise.spread.shape != a.shape:
        return False
    finite = torch.where(torch.isfinite(p), p, torch.zeros_like(p))
    base_everywhere = (e.to(torch.float64) - p).abs()
    sensitivity = torch.maximum(base_everywhere, precise.spread.to(a.device))
    ulp = torch.finfo(e.dtype).eps * finite.abs()
    suspect = sensitivity > ILL_CONDITIONED_ULPS * ulp
    if int(suspect.sum()) > ILL_CONDITIONED_SHARE * suspect.numel():
        moved_far = precise.spread.to(a.device) > ILL_CONDITIONED_ULPS * ulp
        return _rounding_bound(a, e, p, moved_far)
    allowed = (atol * max(1.0, float(finite.abs().max())) + rtol * finite.abs())[outside]
    our_err = (a.to(torch.float64) - p).abs()[outside]
    near_truth = our_err <= allowed
    ill = suspect[outside] & (our_err <= BASELINE_ERROR_FACTOR * sensitivity[outside])
    return bool((near_truth | ill).all())


def _rounding_bound(
    a: torch.Tensor, e: torch.Tensor, p: torch.Tensor, moved_far: torch.Tensor
) -> bool:
    """Whether ``a`` is as accurate as the baseline ``e`` where the baseline is off the fp64
    result ``p`` in much of the tensor but the fp64 result hardly moves with its inputs
    (``moved_far`` in at most ``ILL_CONDITIONED_SHARE``): the program as written loses precision
    to its own fp32 rounding, as a box filter through a summed-area table does (differences of
    prefix sums up to 5e5: 1% off in fp32 in any summation order; no config matched ref mode on
    an H100). ``a``'s error against ``p``, largest and mean, is at most
    ``ROUNDING_BOUND_FACTOR`` times the baseline's. A baseline that draws other random numbers
    each run moves far everywhere: no second opinion then."""
    if int(moved_far.sum()) > ILL_CONDITIONED_SHARE * moved_far.numel():
        return False
    finite = torch.isfinite(p) & torch.isfinite(a) & torch.isfinite(e)
    if not bool(finite.any()) or bool((torch.isfinite(p) != torch.isfinite(a)).any()):
        return False
    ours = (a.to(torch.float64) - p).abs()[finite]
    base = (e.to(torch.float64) - p).abs()[finite]
    return bool(
        ours.max() <= ROUNDING_BOUND_FACTOR * base.max()
        and ours.mean() <= ROUNDING_BOUND_FACTOR * base.mean()
    )


def digest(value: Any) -> str:
    """A hash of the tensors in ``value`` (nested tuples / lists / dicts): configs whose results
    are the same bytes."""
    h = hashlib.sha1()

    def add(v: Any) -> None:
        if isinstance(v, torch.Tensor):
            t = v.detach().cpu().contiguous()
            h.update(str((t.dtype, tuple(t.shape))).encode())
            h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
        elif isinstance(v, (tuple, list)):
            for x in v:
                add(x)
        elif isinstance(v, Mapping):
            for k in sorted(v, key=str):
                add(v[k])
        else:
            h.update(repr(v).encode())

    add(value)
    return h.hexdigest()


def scattered(bad: torch.Tensor) -> bool:
    """Whether the elements where ``bad`` is set are few and isolated, as boundary cases of a
    decision on computed floats are (a token kept in one row's top-p mask and not in the
    baseline's): at most ``FLIP_SHARE`` of the tensor (at least one element, in tensors of
    ``FLIP_MIN_NUMEL`` or more), no index of any dim holding more than two of them, and no
    three consecutive in memory order. A wrong tail, row, column or tile breaks one of these."""
    numel = bad.numel()
    count = int(bad.sum())
    if count == 0:
        return True
    if numel < FLIP_MIN_NUMEL or count > max(1, int(numel * FLIP_SHARE)):
        return False
    where = bad.nonzero()  # [count, ndim]
    for dim in range(bad.dim()):
        if bad.shape[dim] > 2 and int(torch.unique(where[:, dim], return_counts=True)[1].max()) > 2:
            return False
    return _no_runs(bad)


def traded_places(actual: torch.Tensor, expected: torch.Tensor, bad: torch.Tensor) -> bool:
    """Whether integer results differ only as a sort's positions of near-tied keys do: at most
    ``INT_ROUNDING_SHARE`` of the elements (at least ``TIE_RUN - 1``), in runs of at most
    ``TIE_RUN`` consecutive elements along some dim, each run holding the values the baseline
    holds there in another order (two keys a rounding apart trade places). A wrong sort moves
    values across a row, not within a few neighbours."""
    count = int(bad.sum())
    if count > max(TIE_RUN - 1, int(bad.numel() * INT_ROUNDING_SHARE)):
        return False
    return any(_runs_permute(actual, expected, bad, dim) for dim in range(bad.dim()))


def _runs_permute(a: torch.Tensor, e: torch.Tensor, bad: torch.Tensor, dim: int) -> bool:
    """Whether along ``dim`` the set elements of ``bad`` form runs of at most ``TIE_RUN`` in
    which ``a`` holds a permutation of ``e``'s values."""
    lines = [t.movedim(dim, -1).reshape(-1, bad.shape[dim]) for t in (a, e, bad)]
    a2, e2, bad2 = lines
    for row in bad2.any(dim=1).nonzero().flatten().tolist():
        where = bad2[row].nonzero().flatten().tolist()
        start = 0
        for i in range(1, len(where) + 1):
            if i < len(where) and where[i] == where[i - 1] + 1:
                continue
            run = where[start:i]
            if len(run) < 2 or len(run) > TIE_RUN:
                return False
            lo, hi = run[0], run[-1] + 1
            if not torch.equal(a2[row, lo:hi].sort().values, e2[row, lo:hi].sort().values):
                return False
            start = i
    return True


def _no_runs(bad: torch.Tensor, length: int = 3) -> bool:
    """Whether no ``length`` elements set in ``bad`` are consecutive in memory order."""
    flat = bad.flatten().nonzero().flatten()
    k = length - 1
    runs = (flat[k:] - flat[:-k] == k) if flat.numel() > k else flat.new_zeros(0, dtype=torch.bool)
    return not bool(runs.any())


def _isolated(bad: torch.Tensor) -> bool:
    """Whether no element set in ``bad`` has more than ``TIE_NEIGHBOURS`` set among its eight
    neighbours in the last two dims (a wrong tile is a block of them; ties fall apart)."""
    if bad.dim() < 2:
        return True
    planes = bad.reshape(-1, 1, *bad.shape[-2:]).to(torch.float32)
    ring = torch.ones(1, 1, 3, 3, device=bad.device)
    ring[0, 0, 1, 1] = 0
    around = torch.nn.functional.conv2d(planes, ring, padding=1)
    return not bool((around[planes > 0] > TIE_NEIGHBOURS).any())


def _rounding_ties(
    a: torch.Tensor, e: torch.Tensor, diff: torch.Tensor, rounds_floats: bool = False
) -> bool:
    """Whether integer results differ only as float math rounded to integers does between two
    correct programs: by one, in at most ``INT_ROUNDING_SHARE`` of the elements (none below
    1000 elements: an index or a count is exact). Triton's fp32 ``/`` is the 2-ulp
    ``div.full.f32``, torch's is correctly rounded: a row-wise int8 quantization,
    ``round(x / scale)`` of 4096 x 8192, came out one code off the eager run in 3867 of 33.5M
    elements (1.2e-4) on the H200, and no config passed an exact compare. Bool results must
    match exactly."""
    if a.dtype == torch.bool:
        return False
    if int(diff.sum()) > int(a.numel() * INT_ROUNDING_SHARE):
        return False
    if _one_off(a, e, diff):
        return True
    if not rounds_floats:  # no rounding in the kernel (a count off by two is a lost update)
        return False
    # packed codes: one int4 code off moves its byte by 1, 15, 16 or 17 (a row-wise int4 pack of
    # 16384 x 8192 bf16, two codes a byte: 36296 of 67.1M bytes, at most 45 in a row of 4096
    # and 22 in a column of 16384, some three in a run, on the H200): spread like ties, not a
    # wrong line or tile
    return _spread(diff)


def _one_off(a: torch.Tensor, e: torch.Tensor, diff: torch.Tensor) -> bool:
    """Whether every element where integer results ``a`` and ``e`` differ is one apart."""
    return bool(((a[diff].long() - e[diff].long()).abs() <= 1).all())


def _spread(bad: torch.Tensor) -> bool:
    """Whether no index of any dim holds more than ``ROUNDING_LINE_SHARE`` of its line's
    elements in ``bad`` (a wrong row, column or tail tile fills its line), no ``TIE_RUN`` are
    consecutive in memory (a wrong tile's row is a run) and none has more than
    ``TIE_NEIGHBOURS`` neighbours in ``bad`` (a wrong tile is a block). Ties fall apart, though
    where a row's scale makes many of its values ties, a few sit side by side."""
    where = bad.nonzero()
    for dim in range(bad.dim()):
        line = bad.numel() // max(1, bad.shape[dim])
        counts = torch.unique(where[:, dim], return_counts=True)[1]
        if int(counts.max()) > max(2, int(line * ROUNDING_LINE_SHARE)):
            return False
    return _no_runs(bad, TIE_RUN) and _isolated(bad)


def _unravel(flat: int, shape: Sequence[int]) -> tuple[int, ...]:
    index: list[int] = []
    for size in reversed(list(shape)):
        index.append(flat % size)
        flat //= size
    return tuple(reversed(index))


def _kind(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"a {value.dtype} tensor of shape {list(value.shape)}"
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {len(value)}"
    return repr(value) if value is None else type(value).__name__
