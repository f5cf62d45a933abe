"""Loads, stores and atomics: pointer offsets and masks from index items (stage: codegen).

An index item is ``("tile", sym, dim)``, ``("rdim", sym, dim)``, ``("rslice", sym, dim, start,
step)`` (a constant slice: element ``i`` at ``start + i * step``), ``("int", k, dim)``, ``("none",)``
or ``("value", input_position, dim)``; each contributes ``index * stride`` to the offset, placed at
its position in the result shape (left to right, or the node's ``positions`` when several
tensor-valued indices broadcast together), and its dims' masks to the access mask.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tilecraft.ir.nodes import Node

if TYPE_CHECKING:
    from tilecraft.codegen.emitter import Emitter


def _expand(text: str, pos: int, width: int, rank: int) -> str:
    if rank <= width or width == 0:
        return text
    spec = ["None"] * rank
    for i in range(pos, pos + width):
        spec[i] = ":"
    return f"{text}[{', '.join(spec)}]"


def _sliced(index: str, item: tuple[Any, ...]) -> str:
    """Element ``i`` of a constant slice ``start::step`` is at ``start + i * step``."""
    start, step = item[3], item[4]
    scaled = index if step == 1 else f"{index} * {step}"
    return f"({start} + {scaled})" if start else f"({scaled})"


def access(em: Emitter, node: Node, value_inputs: list[Node]) -> tuple[str, str | None]:
    """(pointer expression, mask expression or None) for a LOAD/STORE/ATOMIC node."""
    tensor = node.attrs["tensor"]
    rank = node.ndim
    param = tensor.name
    em.tensors[param] = tensor
    terms: list[str] = []
    masks: list[str] = []
    pos = 0
    positions = node.attrs.get("positions")  # set when advanced indices broadcast together
    for k, item in enumerate(node.attrs["index"]):
        if positions is not None:
            pos = positions[k]
        kind = item[0]
        if kind == "none":
            pos += 1
            continue
        stride = em.stride_expr(tensor, item[2])
        if kind == "int":
            if item[1]:
                terms.append(
                    f"{item[1]} * {stride}" if not stride.isdigit() else str(item[1] * int(stride))
                )
            continue
        if kind in ("tile", "rdim", "rslice"):
            sym = item[1]
            st = em.state(sym)
            width = 0 if sym.scalar else 1
            idx = _expand(
                _sliced(st.index, item) if kind == "rslice" else st.index, pos, width, rank
            )
            mask = st.mask if width == 0 else em.mask_at(sym, pos, rank)
        else:
            vnode = value_inputs[item[1]]
            width = vnode.ndim
            idx = _expand(em.expr(vnode), pos, width, rank)
            mask = em.value_mask(vnode.shape)
            if mask and width:
                mask = _expand(f"({mask})", pos, width, rank)
        terms.append(idx if stride == "1" else f"{idx} * {stride}")
        if mask and mask not in masks:
            masks.append(mask)
        pos += width
    if (extra := node.attrs.get("extra_mask")) is not None:  # hl.load/store(extra_mask=...)
        masks.append(em.expr(node.inputs[extra]))
    offset = " + ".join(terms) if terms else "0"
    return f"{param} + ({offset})", " & ".join(masks) if masks else None


def _block_geometry(
    em: Emitter, node: Node
) -> tuple[list[str], list[str], list[str], list[str], list[int]]:
    """(sizes, strides, offsets, block shape, dims needing a bounds check) of a block access."""
    tensor = node.attrs["tensor"]
    sizes, strides, offsets, blocks, checks = [], [], [], [], []
    for item in node.attrs["index"]:
        sym, dim = item[1], item[2]
        st = em.state(sym)
        sizes.append(em.size_expr(tensor, dim))
        strides.append(em.stride_expr(tensor, dim))
        offsets.append(st.offset)
        blocks.append(st.block)
        if st.mask is not None:
            checks.append(dim)
    return sizes, strides, offsets, blocks, checks


def _block_ptr(em: Emitter, node: Node) -> tuple[str, str]:
    tensor = node.attrs["tensor"]
    em.tensors[tensor.name] = tensor
    sizes, strides, offsets, blocks, checks = _block_geometry(em, node)
    order = ", ".join(str(d) for d in reversed(range(len(sizes))))
    ptr = (
        f"tl.make_block_ptr({tensor.name}, [{', '.join(sizes)}], [{', '.join(strides)}], "
        f"[{', '.join(offsets)}], [{', '.join(blocks)}], [{order}])"
    )
    return ptr, f", boundary_check=({', '.join(map(str, checks))},)" if checks else ""


def _descriptor(em: Emitter, node: Node) -> tuple[str, str]:
    """(descriptor variable, offsets) — descriptors are created once, at the kernel's top."""
    tensor = node.attrs["tensor"]
    em.tensors[tensor.name] = tensor
    sizes, strides, offsets, blocks, _ = _block_geometry(em, node)
    key = (tensor.name, tuple(blocks))
    name = em.descriptors.get(key)
    if name is None:
        name = em.w.fresh(f"{tensor.name}_desc")
        line = (
            f"    {name} = tl.make_tensor_descriptor({tensor.name}, [{', '.join(sizes)}], "
            f"[{', '.join(strides)}], [{', '.join(blocks)}])"
        )
        em.w.lines.insert(em.descriptor_mark + len(em.descriptors), line)
        em.descriptors[key] = name
    return name, f"[{', '.join(offsets)}]"


def _eviction(em: Emitter, node: Node) -> str:
    policy = em.plan.access(node.attrs.get("mem_slot", -1)).eviction
    return f", eviction_policy='evict_{policy}'" if policy else ""


def _indexing(em: Emitter, node: Node) -> str:
    """The plan's indexing for this access (a fallback to pointers is noted in the code)."""
    access = em.plan.access(node.attrs.get("mem_slot", -1))
    if access.fallback_reason:
        em.w.line(f"# pointer indexing: {access.fallback_reason}")
    return access.indexing


def emit_load(em: Emitter, node: Node) -> None:
    mode = _indexing(em, node)
    if mode == "tensor_descriptor":
        desc, offsets = _descriptor(em, node)
        em.bind(node, f"{desc}.load({offsets})")
        return
    if mode == "block_ptr":
        ptr, check = _block_ptr(em, node)
        pad = ", padding_option='zero'" if check else ""
        em.bind(node, f"tl.load({ptr}{check}{pad}{_eviction(em, node)})")
        return
    ptr, mask = access(em, node, node.inputs)
    args = f"{ptr}, {mask}, other=0" if mask else ptr
    em.bind(node, f"tl.load({args}{_eviction(em, node)})")


def emit_store(em: Emitter, node: Node) -> None:
    value, *index_values = node.inputs
    mode = _indexing(em, node)
    if mode == "tensor_descriptor":
        desc, offsets = _descriptor(em, node)
        em.w.line(f"{desc}.store({offsets}, {em.expr(value)})")
    elif mode == "block_ptr":
        ptr, check = _block_ptr(em, node)
        em.w.line(f"tl.store({ptr}, {em.expr(value)}{check})")
    else:
        ptr, mask = access(em, node, index_values)
        mask_arg = f", {mask}" if mask else ""
        em.w.line(f"tl.store({ptr}, {em.expr(value)}{mask_arg})")
    em.scopes[-1][node.id] = "None"


def emit_atomic(em: Emitter, node: Node) -> None:
    value, *index_values = node.inputs
    ptr, mask = access(em, node, index_values)
    mask_arg = f", mask={mask}" if mask else ""
    fn = f"tl.atomic_{node.attrs['kind']}"  # add, max, min, xchg, and, or, xor
    sem = node.attrs.get("sem", "relaxed")
    em.bind(node, f"{fn}({ptr}, {em.expr(value)}{mask_arg}, sem='{sem}')")
