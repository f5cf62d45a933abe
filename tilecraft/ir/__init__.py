"""The tile IR: typed values with symbolic shapes, ops and loop regions."""

from tilecraft.ir.nodes import DeviceLoop, Dim, Node, Op, Shape, Sym, SymKind

__all__ = ["Dim", "DeviceLoop", "Node", "Op", "Shape", "Sym", "SymKind"]
