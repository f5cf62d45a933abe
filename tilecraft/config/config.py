"""``tc.Config``: one point of a kernel's implementation space (stage: config).

Field names follow Helion's where the meaning is the same, so a Helion config pastes into tilecraft.
A Config is frozen, validates its own field types on construction, and gives a stable cache key.
Whether its values fit a particular kernel is :meth:`ConfigSpec.normalize`'s job.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tilecraft.config.compat_names import (
    HELION_ONLY_CONFIG_FIELDS,
    is_misspelled_field,
    warn_helion_only,
)
from tilecraft.errors import ConfigError

PID_TYPES = ("flat", "xyz", "persistent_blocked", "persistent_interleaved")
INDEXING = ("pointer", "block_ptr", "tensor_descriptor")
MAX_SPLIT = 256  # split_reductions: more partials than this cost more to combine than they gain


def _tuple(value: Any) -> tuple[Any, ...]:
    if value is None:
        return ()
    if isinstance(value, (list, tuple)):
        return tuple(value)
    return (value,)


@dataclasses.dataclass(frozen=True, init=False, eq=False)
class Config:
    block_sizes: tuple[int, ...] = ()
    reduction_loops: tuple[int | None, ...] = ()
    num_warps: int | None = None
    num_stages: int | None = None
    pid_type: str = "flat"
    indexing: tuple[str, ...] | str = "pointer"
    load_eviction_policies: tuple[str, ...] = ()
    l2_groupings: tuple[int, ...] = ()
    loop_orders: tuple[tuple[int, ...], ...] = ()
    flatten_loops: tuple[bool, ...] = ()
    range_unroll_factors: tuple[int, ...] = ()
    range_num_stages: tuple[int, ...] = ()
    range_multi_buffers: tuple[bool | None, ...] = ()
    range_flattens: tuple[bool | None, ...] = ()
    range_warp_specializes: tuple[bool | None, ...] = ()
    maxnreg: int | None = None
    num_sm_multiplier: int | None = None
    split_reductions: tuple[int, ...] = ()  # per device loop: programs its inner loop is split over
    split_atomics: bool = False  # split partial sums added with fp32 atomics (not deterministic)
    # acc + x.sum(0) in a row loop: one reduction after the loop (None: wherever the kernel has one)
    deferred_sums: bool | None = None
    # a running arg-best over a loop (v, i = torch.min(x, 1); better = v < best; ...): a best and
    # an index a lane, one reduction after the loop (None: wherever the kernel has one and the
    # loop takes two steps or more; codegen/deferred_args.py)
    deferred_args: bool | None = None
    # a row loop with [n] accumulators in memory: statistics pass, then column chunks outer
    chunk_outer: bool | None = None
    # a loop whose select compares its indices with an enclosing tile's: split at the diagonal
    # (None: off; codegen/diagonal.py)
    diagonal_splits: bool | None = None
    user: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def field_names(cls) -> frozenset[str]:
        """The fields a config sets by name (the user's tunables live beside them, in ``user``)."""
        return frozenset(f.name for f in dataclasses.fields(cls)) - {"user"}

    def __init__(self, **fields: Any):
        known = self.field_names()
        user = dict(fields.pop("user", ()) or ())
        for name, value in fields.items():
            if name not in known:
                if name in HELION_ONLY_CONFIG_FIELDS:
                    warn_helion_only("Config field", name)
                elif field := is_misspelled_field(name, known):
                    raise ConfigError(
                        f"unknown Config field '{name}'", hint=f"did you mean '{field}'?"
                    )
                else:
                    user[name] = value  # a user tunable (checked against the kernel's in the spec)
                continue
            if name in (
                "num_warps",
                "num_stages",
                "maxnreg",
                "num_sm_multiplier",
                "pid_type",
                "split_atomics",
                "deferred_sums",
                "deferred_args",
                "chunk_outer",
                "diagonal_splits",
            ):
                pass
            elif name == "indexing":
                value = value if isinstance(value, str) else _tuple(value)
            elif name == "loop_orders":
                value = tuple(tuple(v) for v in _tuple(value))
            else:
                value = _tuple(value)
            object.__setattr__(self, name, value)
        object.__setattr__(self, "user", tuple(sorted(user.items())))
        self._validate()

    def _validate(self) -> None:
        for b in self.block_sizes:
            if not isinstance(b, int) or b < 1 or b & (b - 1):
                raise ConfigError(f"block_sizes: {b!r} is not a power of two")
        for r in self.reduction_loops:
            if r is not None and (not isinstance(r, int) or r < 1 or r & (r - 1)):
                raise ConfigError(f"reduction_loops: {r!r} is not None or a power of two")
        for s in self.split_reductions:
            if not isinstance(s, int) or isinstance(s, bool) or not 1 <= s <= MAX_SPLIT:
                raise ConfigError(
                    f"split_reductions: {s!r} is not an int in [1, {MAX_SPLIT}] "
                    "(programs one inner loop is split over; 1 = not split)"
                )
        flags = (
            "split_atomics",
            "deferred_sums",
            "deferred_args",
            "chunk_outer",
            "diagonal_splits",
        )
        for flag in flags:
            value = getattr(self, flag)
            if not isinstance(value, bool) and not (flag != "split_atomics" and value is None):
                raise ConfigError(f"{flag}={getattr(self, flag)!r}: must be True or False")
        for name in ("num_warps",):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, int) or v < 1 or v & (v - 1) or v > 32):
                raise ConfigError(f"num_warps={v!r}: must be a power of two in [1, 32]")
        if self.num_stages is not None and (
            not isinstance(self.num_stages, int) or self.num_stages < 1
        ):
            raise ConfigError(f"num_stages={self.num_stages!r}: must be an int >= 1")
        maxnreg = self.maxnreg
        if maxnreg is not None and (
            not isinstance(maxnreg, int) or isinstance(maxnreg, bool) or not 16 <= maxnreg <= 255
        ):  # ptxas's --maxrregcount range (the target's own cap is a repair, normalize.py)
            raise ConfigError(f"maxnreg={maxnreg!r}: must be an int in [16, 255] or None")
        multiplier = self.num_sm_multiplier
        if multiplier is not None and (
            not isinstance(multiplier, int) or isinstance(multiplier, bool) or multiplier < 1
        ):
            raise ConfigError(
                f"num_sm_multiplier={multiplier!r}: must be an int >= 1 (persistent programs "
                "per SM) or None"
            )
        for g in self.l2_groupings:
            if not isinstance(g, int) or isinstance(g, bool) or g < 1:
                raise ConfigError(f"l2_groupings: {g!r} is not an int >= 1 (1 = no grouping)")
        if self.pid_type not in PID_TYPES:
            raise ConfigError(f"pid_type={self.pid_type!r}: expected one of {PID_TYPES}")
        for ix in _tuple(self.indexing):
            if ix not in INDEXING:
                raise ConfigError(f"indexing={ix!r}: expected one of {INDEXING}")

    @property
    def user_values(self) -> Mapping[str, Any]:
        return dict(self.user)

    def to_dict(self) -> dict[str, Any]:
        """The fields that differ from the defaults, JSON-friendly."""
        out: dict[str, Any] = {}
        default = Config()
        for f in dataclasses.fields(self):
            if f.name == "user":
                continue
            value = getattr(self, f.name)
            if value != getattr(default, f.name) and not _all_neutral(f.name, value):
                out[f.name] = jsonable(value)
        out.update({k: jsonable(v) for k, v in self.user})
        return out

    def __eq__(self, other: object) -> bool:
        """Configs are equal when they mean the same (an explicit all-default list == no list)."""
        return isinstance(other, Config) and self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash(self.key())

    def key(self) -> str:
        """A stable hash of the config (for caches)."""
        text = json.dumps(self.to_dict(), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def replace(self, **changes: Any) -> Config:
        fields = self.to_dict()
        fields.update(changes)
        return Config(**fields)

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self.to_dict().items())
        return f"tc.Config({inner})"

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Config:
        return cls(**dict(data))

    def to_json(self) -> dict[str, Any]:
        """Every field spelled out (defaults too) and the user tunables apart, under a format
        name and version, so a file stays readable when defaults or field names change."""
        fields = {
            f.name: jsonable(getattr(self, f.name))
            for f in dataclasses.fields(self)
            if f.name != "user"
        }
        user = {k: jsonable(v) for k, v in self.user}
        return {"format": CONFIG_FORMAT, "version": CONFIG_VERSION, "fields": fields, "user": user}

    @classmethod
    def from_json(cls, data: Any, where: str = "config") -> Config:
        """The inverse of :meth:`to_json`; a ConfigError names ``where`` for a foreign format,
        a newer version or an unknown field."""
        if not isinstance(data, dict) or data.get("format") != CONFIG_FORMAT:
            raise ConfigError(f"{where}: not a tilecraft config (no format {CONFIG_FORMAT!r})")
        if data.get("version") != CONFIG_VERSION:
            raise ConfigError(
                f"{where}: config format version {data.get('version')!r}; this tilecraft reads "
                f"version {CONFIG_VERSION}",
                hint="save the config again with this tilecraft version",
            )
        fields = dict(data.get("fields") or {})
        unknown = sorted(set(fields) - cls.field_names())
        if unknown:
            raise ConfigError(f"{where}: unknown config field(s) {', '.join(unknown)}")
        return cls(**fields, user=dict(data.get("user") or {}))

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the config as versioned JSON (atomically: a reader never sees half a file)."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(target, self.to_json())
        return target

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Config:
        """Read a config written by :meth:`save`."""
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot read config file {str(path)!r}: {exc}") from None
        return cls.from_json(data, where=str(path))


CONFIG_FORMAT = "tilecraft.Config"
CONFIG_VERSION = 1


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON to a temporary file beside ``path`` and rename it into place."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1, default=str)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# per-item values that mean "nothing special" (a list of only these is the same as no list)
_NEUTRAL_ITEMS: dict[str, tuple[Any, ...]] = {
    "indexing": ("pointer",),
    "load_eviction_policies": ("",),
    "l2_groupings": (1,),
    "range_unroll_factors": (0,),
    "range_num_stages": (0,),
    "range_multi_buffers": (None,),
    "range_flattens": (None,),
    "range_warp_specializes": (None,),
    "flatten_loops": (False,),
    "split_reductions": (1,),
}


def _all_neutral(name: str, value: Any) -> bool:
    if name == "loop_orders":
        return all(list(order) == sorted(order) for order in value)
    neutral = _NEUTRAL_ITEMS.get(name)
    if neutral is None or isinstance(value, str):
        return False
    return all(any(v is n or (type(v) is type(n) and v == n) for n in neutral) for v in value)


def jsonable(value: Any) -> Any:
    if isinstance(value, tuple):
        return [jsonable(v) for v in value]
    return value
