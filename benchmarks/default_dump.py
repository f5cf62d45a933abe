"""What a change does to the defaults, without a GPU: the heuristic default config and a hash of
its generated code for every example and generalization-case call, and the calls two such dumps
disagree on.

``python -m benchmarks.default_dump OUT.json [--target cuda:90] [--only TEXT ...]`` binds each
kernel call of each example at its benchmark shapes and of each case at its GPU shapes (meta
tensors: nothing runs), resolves the target's default and generates its code, and writes
``{call: {"config": ..., "code": sha1 prefix}}`` (``--only``: the examples and cases whose ``name|shape`` holds one of the texts). ``python -m benchmarks.default_dump --diff BEFORE.json AFTER.json`` prints each call
whose config or code differs (``code only`` where the config is the same), and the count: the
calls a change must be timed on, and the proof that a refactor changed none (every session's
"no behaviour change" check). A call that fails to bind or generate is recorded with its error.
``--show --only TEXT`` prints the matching calls' defaults and generated code instead.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.default_sweep import call_sources, cpu_args
from examples import EXAMPLES
from tilecraft.runtime.kernel import BoundKernel
from tilecraft.targets.target import Target


def defaults(target: Target, only: list[str]) -> Iterator[tuple[str, str, str]]:
    """(call key ``name|shape|index|kernel``, default config, generated code) of every call;
    a call that fails to bind or generate gives its error as the config and "error" as code."""
    for name, shape, calls in call_sources(list(EXAMPLES), "all", "bench", tuple(only)):
        for i, (kernel, args) in enumerate(calls):
            key = f"{name}|{shape}|{i}|{kernel.__name__}"
            try:
                bound = BoundKernel(
                    kernel, kernel.bind_arguments(cpu_args(args), {}), target=target
                )
                config = bound.config_spec.default()
                yield key, repr(config), bound.to_triton_code(config)
            except Exception as exc:  # noqa: BLE001 - a call that fails is a row, not the end
                yield key, f"{type(exc).__name__}: {exc}"[:300], "error"


def dump(target: Target, only: list[str]) -> dict[str, dict[str, str]]:
    """``{"name|shape|index|kernel": {"config", "code"}}`` for every call (see the module)."""
    return {
        key: {"config": config, "code": code if code == "error" else _sha(code)}
        for key, config, code in defaults(target, only)
    }


def _sha(code: str) -> str:
    """The hash of the kernels and launchers, not the module's imports (a helper added to
    every module's header changes no call's code)."""
    body = [line for line in code.splitlines() if not line.startswith(("from ", "import "))]
    return hashlib.sha1("\n".join(body).encode()).hexdigest()[:12]


def differences(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """One line per call whose entry differs (or exists on one side only)."""
    lines = []
    for key in sorted(set(before) | set(after)):
        a, b = before.get(key), after.get(key)
        if a == b:
            continue
        if a is not None and b is not None and a["config"] == b["config"]:
            lines.append(f"{key}: code only ({a['config']})")
        else:
            lines.append(f"{key}: {a and a['config']} -> {b and b['config']}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("out", nargs="?", type=Path, help="the dump to write")
    parser.add_argument("--target", default="cuda:90")
    parser.add_argument(
        "--only", nargs="*", default=[], help="examples/cases whose name|shape holds a text"
    )
    parser.add_argument("--diff", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    parser.add_argument("--show", action="store_true", help="print each call's default and code")
    ns = parser.parse_args(argv)
    if ns.show:
        for key, config, code in defaults(Target.parse(ns.target), ns.only):
            print(f"# {key}\n# {config}\n{code}")
        return 0
    if ns.diff:
        before, after = (json.loads(p.read_text()) for p in ns.diff)
        lines = differences(before, after)
        print("\n".join([*lines, f"{len(lines)} of {len(set(before) | set(after))} calls differ"]))
        return 0
    if ns.out is None:
        parser.error("give OUT.json to write, or --diff BEFORE AFTER")
    entries = dump(Target.parse(ns.target), ns.only)
    ns.out.write_text(json.dumps(entries, indent=0, sort_keys=True))
    print(f"{len(entries)} calls -> {ns.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
