"""docs/ops.md is generated from the lowering registry and must match what the generator prints
(regenerate with ``python -m tilecraft.frontend.catalog > docs/ops.md``)."""

from __future__ import annotations

from pathlib import Path

import torch

from tilecraft.frontend.catalog import render, torch_name

DOC = Path(__file__).resolve().parents[1] / "docs" / "ops.md"


def test_committed_ops_doc_matches_the_registry() -> None:
    assert DOC.read_text() == render(), (
        "docs/ops.md is stale: run `python -m tilecraft.frontend.catalog > docs/ops.md`"
    )


def test_doc_lists_new_ops_by_their_torch_names() -> None:
    text = render()
    for name in ("`torch.cumsum`", "`Tensor.permute`", "`tc.rand`", "`tc.associative_scan`"):
        assert name in text, name
    assert torch_name(torch.Tensor.add) == "Tensor.add" and torch_name(torch.add) == "torch.add"
