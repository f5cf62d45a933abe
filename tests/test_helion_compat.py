"""docs/helion_compat.md is generated from tilecraft/tools/helion_names.py and stays true.

The committed document equals the generator's output; every Helion name has a status; every
"same" row names a test function that exists; names marked same or differs exist in tilecraft
under Helion's name; the Helion-only config/option tables do not shadow names tilecraft implements.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
from pathlib import Path

import tilecraft
import tilecraft.language as hl
from tilecraft.config import Config
from tilecraft.config.compat_names import HELION_ONLY_CONFIG_FIELDS, HELION_ONLY_KERNEL_OPTIONS
from tilecraft.tools import helion_compat
from tilecraft.tools.helion_names import ALL, LANGUAGE, TOP_LEVEL

ROOT = Path(__file__).resolve().parents[1]


def test_committed_doc_matches_the_generator() -> None:
    assert helion_compat.DOC.read_text() == helion_compat.render(), (
        "docs/helion_compat.md is stale: run python -m tilecraft.tools.helion_compat --write"
    )


def test_every_helion_name_has_one_row() -> None:
    names = [(n.module, n.name) for n in ALL]
    assert len(names) == len(set(names))
    assert {n.status for n in ALL} <= {"same", "differs", "missing"}
    assert len(LANGUAGE) == 54 and len(TOP_LEVEL) == 14  # Helion's public names (Aug 2026)


def _test_functions(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}


def test_same_rows_name_existing_tests() -> None:
    for row in ALL:
        if not row.test:
            continue
        path, name = row.test.split("::")
        assert name in _test_functions(ROOT / path), f"{row.name}: {row.test} does not exist"


def test_supported_names_exist_under_helions_name() -> None:
    for row in ALL:
        if row.status != "same":
            continue
        home = hl if row.module == "helion.language" else tilecraft
        assert hasattr(home, row.name), f"{row.module}.{row.name} is 'same' but tilecraft lacks it"


def test_helion_only_tables_do_not_shadow_our_names() -> None:
    ours = {f.name for f in dataclasses.fields(Config)}
    assert not ours & set(HELION_ONLY_CONFIG_FIELDS)
    options = set(inspect.signature(tilecraft.Kernel.__init__).parameters) - {"self", "fn"}
    assert {"config", "configs", "static_shapes", "autotune_effort"} <= options
    assert not options & set(HELION_ONLY_KERNEL_OPTIONS)
