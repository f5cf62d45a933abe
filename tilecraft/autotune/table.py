"""Config tables: tuned configs shipped with a model (stage: autotune; in: a JSON table and a
BoundKernel; out: the config of the matching entry).

``tilecraft tune PLAN`` writes a table (:mod:`tilecraft.autotune.plan`); at run time a kernel
with ``@tc.kernel(config_table=path)``, or whose module has a ``<module>.tilecraft.json`` beside
it, takes the entry of its specialization. For a shape the table has not seen, it takes the
entry of the nearest shape (same argument kinds, dtypes, ranks and unit strides; the smallest
sum of |log2| size ratios) whose config normalizes and compiles for the new one — configs are
portable across shapes only after that check. No entry: the caller discovers or tunes.

Format (``version`` 1)::

    {"format": "tilecraft.config_table", "version": 1,
     "entries": [{"kernel": "pkg.mod:name", "name": ..., "specialization": ..., "args": [...],
                  "target": "cuda:90", "gpu": ..., "versions": ..., "config": {Config JSON},
                  "ms": ..., "runner_up": {Config JSON} | null, "runner_up_ms": ..., ...}]}
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import warnings
from pathlib import Path
from typing import Any

from tilecraft.autotune import cache
from tilecraft.autotune.candidates import check
from tilecraft.config.config import Config, write_json_atomic
from tilecraft.errors import ConfigError, user_stacklevel
from tilecraft.runtime.kernel import BoundKernel, Kernel

TABLE_FORMAT = "tilecraft.config_table"
TABLE_VERSION = 1
TABLE_SUFFIX = ".tilecraft.json"


def kernel_ref(kernel: Kernel) -> str:
    return f"{kernel.fn.__module__}:{kernel.__name__}"


def signature_record(bound: BoundKernel) -> list[dict[str, Any]]:
    """The specialization's arguments as JSON (what nearest-shape matching compares)."""
    return [
        {
            "name": s.name,
            "kind": s.kind,
            "dtype": None if s.dtype is None else str(s.dtype),
            "shape": None if s.shape is None else list(s.shape),
            "stride": None if s.stride is None else list(s.stride),
            "device": s.device,
            "value": s.value if s.kind in ("int", "bool") else None,
        }
        for s in bound.arg_signatures
    ]


def gpu_name(bound: BoundKernel) -> str:
    if bound.device_type != "cuda":
        return bound.target.key
    import torch

    return str(torch.cuda.get_device_name())


@dataclasses.dataclass
class ConfigTable:
    """A table file's entries; :meth:`put` replaces the entry of the same specialization."""

    path: Path
    entries: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    @classmethod
    def read(cls, path: str | os.PathLike[str], missing_ok: bool = True) -> ConfigTable:
        target = Path(path)
        if not target.exists():
            if missing_ok:
                return cls(target)
            raise ConfigError(f"config table {str(target)!r} does not exist")
        try:
            data = json.loads(target.read_text())
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot read config table {str(target)!r}: {exc}") from None
        if not isinstance(data, dict) or data.get("format") != TABLE_FORMAT:
            raise ConfigError(f"{target}: not a tilecraft config table")
        if data.get("version") != TABLE_VERSION:
            raise ConfigError(
                f"{target}: config table version {data.get('version')!r}; this tilecraft reads "
                f"version {TABLE_VERSION}",
                hint="write the table again with `tilecraft tune PLAN`",
            )
        return cls(target, list(data.get("entries") or []))

    def write(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = {"format": TABLE_FORMAT, "version": TABLE_VERSION, "entries": self.entries}
        write_json_atomic(self.path, data)

    def find(self, kernel: str, specialization: str, target: str) -> dict[str, Any] | None:
        for entry in self.entries:
            if (entry.get("kernel"), entry.get("specialization"), entry.get("target")) == (
                kernel,
                specialization,
                target,
            ):
                return entry
        return None

    def put(self, entry: dict[str, Any]) -> None:
        old = self.find(entry["kernel"], entry["specialization"], entry["target"])
        if old is not None:
            self.entries.remove(old)
        self.entries.append(entry)


def make_entry(bound: BoundKernel, config: Config, **info: Any) -> dict[str, Any]:
    """A table entry for ``bound``'s specialization (``info``: ms, runner-up, timings...)."""
    return {
        "kernel": kernel_ref(bound.kernel),
        "name": bound.kernel.__name__,
        "specialization": cache.specialization_key(bound),
        "args": signature_record(bound),
        "target": bound.target.key,
        "gpu": gpu_name(bound),
        "versions": cache._versions(),
        "source": source_digest(bound.kernel),
        "config": config.to_json(),
        **info,
    }


def source_digest(kernel: Kernel) -> str:
    """The kernel's source as a short hash: an entry tuned for other code is stale (``tilecraft
    tune`` tunes its job again)."""
    return hashlib.sha256(kernel.source.text.encode()).hexdigest()[:16]


def table_path(kernel: Kernel) -> Path | None:
    """The kernel's ``config_table=`` (a relative path from its module's folder: read from
    the working directory, a server started elsewhere failed every call), else
    ``<module>.tilecraft.json`` beside its module file when there is one."""
    if kernel.config_table is not None:
        given = Path(kernel.config_table).expanduser()
        return given if given.is_absolute() else Path(kernel.source.filename).parent / given
    source = Path(kernel.source.filename)
    beside = source.with_name(source.stem + TABLE_SUFFIX)
    return beside if beside.is_file() else None


_read: dict[tuple[str, int], ConfigTable] = {}  # (path, mtime) -> table: one read per file


def _table(path: Path) -> ConfigTable:
    key = (str(path.resolve()), path.stat().st_mtime_ns)
    if key not in _read:
        _read[key] = ConfigTable.read(path, missing_ok=False)
    return _read[key]


_warned: set[str] = set()


def _warn_damaged(path: Path, exc: ConfigError) -> None:
    if str(path) not in _warned:
        _warned.add(str(path))
        warnings.warn(
            f"tilecraft: the config table {str(path)!r} cannot be read ({exc.message}); its "
            "kernels run without it (tune again with `tilecraft tune`)",
            RuntimeWarning,
            stacklevel=user_stacklevel(),
        )


@dataclasses.dataclass(frozen=True)
class TableMatch:
    config: Config
    entry: dict[str, Any]
    exact: bool


def lookup(bound: BoundKernel) -> TableMatch | None:
    """The entry of ``bound``'s specialization, else of the nearest shape whose config works for
    it; None without a table or a usable entry. A ``config_table=`` that cannot be read raises
    a ConfigError at the kernel's definition."""
    kernel = bound.kernel
    path = table_path(kernel)
    if path is None:
        return None
    try:
        table = _table(path) if path.exists() else ConfigTable.read(path, missing_ok=False)
    except ConfigError as exc:
        if kernel.config_table is None:  # the table found beside the module: costs its configs
            _warn_damaged(path, exc)  # only, as a damaged cache does (a merge conflict in it
            return None  # failed every call of every kernel in the module)
        raise ConfigError(
            f"{kernel.__name__}: config_table: {exc.message}", kernel.def_loc, hint=exc.hint
        ) from None
    mine = [e for e in table.entries if isinstance(e, dict) and e.get("name") == kernel.__name__]
    same_module = [e for e in mine if e.get("kernel") == kernel_ref(kernel)]
    mine = same_module or mine
    specialization = cache.specialization_key(bound)
    here = signature_record(bound)
    ranked: list[tuple[int, float, int, dict[str, Any]]] = []
    for i, entry in enumerate(mine):
        try:
            distance = _distance(here, entry.get("args") or [])
        except (TypeError, ValueError, AttributeError, KeyError):  # a damaged entry: skipped,
            distance = None  # as entries whose config does not fit are
        if distance is not None:
            exact = entry.get("specialization") == specialization
            ranked.append((int(entry.get("target") != bound.target.key), distance, i, entry))
            if exact:
                ranked[-1] = (ranked[-1][0], -1.0, i, entry)
    for _, distance, _, entry in sorted(ranked, key=lambda r: r[:3]):
        config = _usable(bound, entry.get("config"))
        if config is not None:
            return TableMatch(config, entry, distance < 0)
    return None


def _usable(bound: BoundKernel, data: Any) -> Config | None:
    """The entry's config normalized for ``bound``, if it passes the static checks and
    generates code; None otherwise."""
    try:
        config = Config.from_json(data, where="config table entry")
        normalized, _ = check(bound.config_spec, config, bound.target.warp_size)
        if normalized is None:
            return None
        bound.compile_config(normalized)
        return normalized
    except Exception:  # any failure: this entry does not fit, try the next one
        return None


def _distance(here: list[dict[str, Any]], there: list[dict[str, Any]]) -> float | None:
    """Sum of |log2| size ratios between two argument records; None if they are not the same
    kind of call (argument names, kinds, dtypes, ranks, unit strides, devices, flags)."""
    if len(here) != len(there):
        return None
    total = 0.0
    for a, b in zip(here, there, strict=True):
        same = ("name", "kind", "dtype", "device")
        if any(a.get(k) != b.get(k) for k in same):
            return None
        if a["kind"] == "tensor":
            sa, sb = a.get("shape") or [], b.get("shape") or []
            ua = [s == 1 for s in a.get("stride") or []]
            ub = [s == 1 for s in b.get("stride") or []]
            if len(sa) != len(sb) or ua != ub:
                return None
            total += sum(abs(math.log2(max(x, 1) / max(y, 1))) for x, y in zip(sa, sb, strict=True))
        elif a["kind"] == "int":
            x, y = a.get("value"), b.get("value")
            if not (isinstance(x, int) and isinstance(y, int)):
                return None
            if x != y:
                if x <= 0 or y <= 0:
                    return None
                total += abs(math.log2(x / y))
        elif a.get("value") != b.get("value"):
            return None
    return total
