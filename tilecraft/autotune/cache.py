"""On-disk cache of discovered default and tuned configs (stage: autotune; see docs/architecture.md).

One JSON file per (kernel, kind) under ``settings.cache_dir()/autotune/``, named by a hash of the
key: the kernel's source text and decorator options, its specialization (argument dtypes, shapes,
strides, devices; object identities removed), the target (and GPU name), and the tilecraft, Triton
and torch versions. Writes are atomic (a temporary file renamed into place). :func:`ls` and
:func:`clear` back ``tilecraft cache ls|clear``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from tilecraft import settings
from tilecraft.config.config import Config
from tilecraft.runtime.cache_dir import writable_subdir
from tilecraft.runtime.kernel import BoundKernel

KINDS = ("default", "best")
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+|0x[0-9a-fA-F]{6,}")


def cache_root() -> Path:
    return settings.cache_dir() / "autotune"


def _versions() -> str:
    import torch
    import triton

    import tilecraft

    return (
        f"tilecraft={tilecraft.__version__} triton={triton.__version__} torch={torch.__version__}"
    )


def _target_key(bound: BoundKernel) -> str:
    key = bound.target.key
    if bound.device_type == "cuda":
        try:
            import torch

            key += f" {torch.cuda.get_device_name()}"
        except Exception:  # no device name: the arch key alone
            pass
    return key


def specialization_key(bound: BoundKernel) -> str:
    """The argument signature as text, without object identities (addresses)."""
    parts = [
        f"{s.name}:{s.kind}:{s.dtype}:{s.shape}:{s.stride}:{s.device}:{s.value!r}"
        + ("" if s.aligned else ":unaligned")  # (aligned keys as before: caches stay valid)
        for s in bound.arg_signatures
    ]
    return _ADDRESS.sub("", "|".join(parts))


def short_arguments(specialization: str) -> str:
    """``x:tensor:torch.float32:(64, 128):...|eps:float:...`` -> ``(float32[64, 128], float)``."""
    parts = []
    for item in filter(None, specialization.split("|")):
        fields = item.split(":")
        if len(fields) >= 4 and fields[1] == "tensor":
            shape = fields[3].strip("()").rstrip(",")
            parts.append(f"{fields[2].removeprefix('torch.')}[{shape}]")
        elif len(fields) >= 2:
            parts.append(fields[1] if fields[1] not in ("int", "bool") else fields[-1])
    return "(" + ", ".join(parts) + ")"


@dataclasses.dataclass(frozen=True)
class CacheKey:
    kernel: str
    source_hash: str
    specialization: str
    target: str
    versions: str

    def digest(self) -> str:
        text = json.dumps(dataclasses.asdict(self), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:24]


def key_for(bound: BoundKernel) -> CacheKey:
    kernel = bound.kernel
    options = _ADDRESS.sub("", repr((kernel.static_shapes, sorted(kernel.options.items()))))
    # where it is defined and the constants it reads: two kernels of one source in two modules,
    # or made by one factory with other closure values, evicted each other's entries
    where = f"{kernel.fn.__module__}.{kernel.__qualname__}\n{kernel.constants_fingerprint()}"
    text = kernel.source.text + options + where
    source = hashlib.sha256(text.encode()).hexdigest()[:24]
    return CacheKey(
        kernel.__name__, source, specialization_key(bound), _target_key(bound), _versions()
    )


def path_for(key: CacheKey, kind: str) -> Path:
    return cache_root() / f"{key.kernel}-{key.digest()}.{kind}.json"


def _entry(bound: BoundKernel, kind: str) -> dict[str, Any] | None:
    """The cached entry of ``kind`` for ``bound``'s key, or None (missing, unreadable or for
    another key)."""
    key = key_for(bound)
    try:
        data = json.loads(path_for(key, kind).read_text())
    except Exception:  # missing, unreadable
        return None
    if not isinstance(data, dict) or data.get("key") != dataclasses.asdict(key):
        return None
    return data


def load(bound: BoundKernel, kind: str) -> Config | None:
    """The cached config of ``kind`` ("default" or "best"), or None (missing, unreadable or
    for another key)."""
    data = _entry(bound, kind)
    try:
        return None if data is None else Config.from_dict(data["config"])
    except Exception:  # a config that no longer validates
        return None


def stored_effort(bound: BoundKernel, kind: str) -> str | None:
    """The ``effort`` a cached entry of ``kind`` was tuned with (None: missing or unreadable;
    entries written before efforts were recorded read as "quick")."""
    data = _entry(bound, kind)
    return None if data is None else str(data.get("effort", "quick"))


def store(bound: BoundKernel, kind: str, config: Config, **info: Any) -> Path | None:
    """Write atomically; returns the file's path, or None where the cache is not writable (one
    warning; the call goes on uncached)."""
    if writable_subdir("autotune") is None:
        return None
    key = key_for(bound)
    path = path_for(key, kind)
    data = {
        "kind": kind,
        "kernel": key.kernel,
        "config": config.to_dict(),
        "key": dataclasses.asdict(key),
        "created": time.time(),
        **info,
    }
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
    except OSError:  # became unwritable since the check: uncached, as above
        return None
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1, default=str)
        os.replace(tmp, path)
    except OSError:
        Path(tmp).unlink(missing_ok=True)
        return None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def remove(bound: BoundKernel, kind: str) -> None:
    path_for(key_for(bound), kind).unlink(missing_ok=True)


@dataclasses.dataclass
class CacheEntry:
    path: Path
    kernel: str
    kind: str
    config: Config | None
    created: float
    heuristic_ok: bool | None = None  # discovery entries: whether the heuristic default worked
    rank: int | None = None  # discovery entries: the winner's place among the candidates run
    arguments: str = ""  # the specialization in short: dtype[shape] per tensor argument
    target: str = ""

    def describe(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(self.created))
        text = f"{self.kernel:<24} {self.kind:<8} {when}  {self.arguments} {self.target}  {self.config!r}"
        if self.heuristic_ok is False:
            text += f"  [heuristic default failed; candidate {self.rank} works]"
        return text


def ls(kernel: str | None = None) -> list[CacheEntry]:
    """Every cached entry (optionally of one kernel name), newest first."""
    out: list[CacheEntry] = []
    root = cache_root()
    for path in root.glob("*.json") if root.exists() else ():
        try:
            data = json.loads(path.read_text())
            config: Config | None = Config.from_dict(data["config"])
        except Exception:  # unreadable, a folder in its place, an entry of another version
            data, config = {}, None
        if not isinstance(data, dict):
            data = {}
        name = str(data.get("kernel", path.name.split("-")[0]))
        if kernel is None or name == kernel:
            kind = str(data.get("kind", "?"))
            created = _number(data.get("created"))
            found = data.get("key")
            key: dict[str, Any] = found if isinstance(found, dict) else {}
            out.append(
                CacheEntry(
                    path,
                    name,
                    kind,
                    config,
                    created,
                    data.get("heuristic_ok"),
                    data.get("rank"),
                    short_arguments(str(key.get("specialization", ""))),
                    str(key.get("target", "")),
                )  # fmt: skip
            )
    return sorted(out, key=lambda e: -e.created)


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0


def clear(kernel: str | None = None) -> int:
    """Delete cached entries (all, or one kernel name's; a folder in an entry's place too, which
    would keep the key from ever being stored); returns how many."""
    entries = ls(kernel)
    for e in entries:
        if e.path.is_dir() and not e.path.is_symlink():
            shutil.rmtree(e.path, ignore_errors=True)
        else:
            e.path.unlink(missing_ok=True)
    return len(entries)
