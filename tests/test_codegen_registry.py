"""Codegen's emission registry: one function per IR op, an op without one is a located error."""

from __future__ import annotations

import pytest
import torch
from kernels import matmul

import tilecraft as tc
from tilecraft.codegen import registry
from tilecraft.codegen.context import EmitContext
from tilecraft.errors import UnsupportedOpError
from tilecraft.ir.nodes import Op

# leaves are expressions (EmitContext.leaf_expr); CARRY has an emission of its own (an
# accumulator that lives in a row in memory, codegen/homes.py), otherwise its LOOP binds it
_NOT_EMITTED = {
    Op.CONST,
    Op.ARG,
    Op.TILE_INDEX,
    Op.TILE_BEGIN,
    Op.TILE_END,
    Op.TILE_ID,
    Op.BLOCK_SIZE,
}


def test_every_op_has_one_emission() -> None:
    import tilecraft.codegen  # noqa: F401  (the driver imports every family)

    assert set(registry.EMISSIONS) == set(Op) - _NOT_EMITTED


def test_an_op_without_emission_is_an_error_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(registry.EMISSIONS, Op.DOT)
    a, b = torch.randn(32, 16), torch.randn(16, 32)
    with pytest.raises(UnsupportedOpError, match="no emission for the IR op 'dot'") as info:
        matmul.bind((a, b)).to_triton_code(tc.Config(block_sizes=[16, 16, 16]))
    assert info.value.loc is not None and "kernels.py" in str(info.value.loc)


def test_an_op_cannot_have_two_emissions() -> None:
    def other(ctx: EmitContext, node: object) -> None:
        raise AssertionError("never called")

    with pytest.raises(AssertionError, match="two emissions"):
        registry.emits(Op.LOAD)(other)  # type: ignore[arg-type]
    assert registry.EMISSIONS[Op.LOAD] is not other
