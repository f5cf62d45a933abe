"""Readable text form of the tile IR (stage: ir; in: a DeviceLoop; out: the text
``kernel.bind(args).ir()`` returns)."""

from __future__ import annotations

from tilecraft.ir.nodes import DeviceLoop, Node, Op, shape_str


def _shape(node: Node) -> str:
    return shape_str(node.shape)


def _attrs(node: Node) -> str:
    parts = []
    for k, v in node.attrs.items():
        if k in ("carried", "carry_updates", "next", "orelse", "then", "else", "cond_body", "cond"):
            continue
        if k == "tensor":
            v = v.name
        elif k == "index":
            v = "[" + ", ".join(_item(i) for i in v) + "]"
        parts.append(f"{k}={v}")
    return " ".join(parts)


def _item(item: tuple) -> str:  # type: ignore[type-arg]
    kind = item[0]
    if kind in ("tile", "rdim"):
        return item[1].name
    if kind == "rslice":
        return f"{item[1].name}@{item[3]}::{item[4]}"
    if kind == "int":
        return str(item[1])
    if kind == "none":
        return "None"
    return f"value#{item[1]}"


def format_nodes(nodes: list[Node], indent: int = 1) -> list[str]:
    pad = "  " * indent
    lines = []
    for n in nodes:
        ins = ", ".join(repr(i) for i in n.inputs)
        src = f"  # {n.loc.short}" if n.loc else ""
        if n.op is Op.LOOP:
            carried = ", ".join(f"{c!r}={c.inputs[0]!r}" for c in n.attrs.get("carried", []))
            lines.append(f"{pad}loop {n.attrs['sym'].name} carried({carried}):{src}")
            lines.extend(format_nodes(n.body or [], indent + 1))
            for c in n.attrs.get("carry_updates", []):
                lines.append(f"{pad}  yield {c!r} <- {c.attrs.get('next')!r}")
        else:
            lines.append(
                f"{pad}{n!r}: {n.dtype} {_shape(n)} = {n.op.value}({ins}) {_attrs(n)}{src}".rstrip()
            )
        if n.op is Op.IF:
            lines.extend(_branches(n, indent + 1))
    return lines


def _branches(node: Node, indent: int) -> list[str]:
    """An ``IF``'s two branches, each with the values it gives the carried names (a value
    assigned in a branch and read after the ``if`` is one of these)."""
    pad = "  " * indent
    lines = []
    for key, body in (("then", node.body or []), ("else", node.attrs.get("orelse", []))):
        lines.append(f"{pad}{key}:")
        lines.extend(format_nodes(body, indent + 1))
        for c in node.attrs.get("carried", []):
            lines.append(f"{pad}  yield {c!r} <- {c.attrs.get(key)!r}")
    return lines


def format_loop(loop: DeviceLoop) -> str:
    syms = ", ".join(
        f"{s.name}({'' if isinstance(s.begin, int) and s.begin == 0 else f'begin={s.begin}, '}"
        f"extent={s.extent})"
        for s in loop.syms
    )
    head = (
        f"device_loop {loop.index} grid=({', '.join(s.name for s in loop.grid_syms)}) syms: {syms}"
    )
    return "\n".join([head, *format_nodes(loop.body)])
