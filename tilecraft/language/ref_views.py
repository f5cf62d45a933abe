"""Loads as values in ref mode (stage: language; in: the views ref mode's loads return and the
tensors its stores write; out: those views detached from the memory a store is about to write).

Compiled code loads a tile into registers: ``a = x[t, 0]; x[t, 0] = d; x[t, 1] = a`` swaps two
columns. Eager torch indexes with slices as views, so in ref mode ``a`` would follow the store
and the swap would write ``d`` twice: every compiled config then "differed from ref mode" and
a plain call found no working config. Copying every load would double ref mode's memory (its
tiles are whole tensors where they can be); instead each view a load returns is remembered,
and a store into the same storage first gives the live views a copy of their own
(``Tensor.set_``): copy on write.
"""

from __future__ import annotations

import contextlib
import weakref

import torch

from tilecraft import write_guard

_LIVE: dict[int, list[weakref.ref[torch.Tensor]]] = {}


def _key(tensor: torch.Tensor) -> int:
    return int(tensor.untyped_storage().data_ptr())


def remember(base: torch.Tensor, view: torch.Tensor) -> torch.Tensor:
    """``view`` (a load of ``base`` by basic indexing), remembered until a store into
    ``base``'s storage."""
    key = _key(base)
    if key and view._base is not None:
        refs = _LIVE.setdefault(key, [])
        refs[:] = [r for r in refs if r() is not None]  # loads in a loop: keep the live ones
        refs.append(weakref.ref(view))
    return view


def before_write(tensor: torch.Tensor) -> None:
    """Give every live view loaded from ``tensor``'s storage its own copy of its values (and
    a tuner's run guarding the caller's tensors the values it undoes: ``write_guard``)."""
    guard = write_guard.active()
    if guard is not None:
        guard.before_write(tensor)
    for ref in _LIVE.pop(_key(tensor), []):
        view = ref()
        if view is None:
            continue
        # a view autograd tracks cannot be re-pointed: it keeps torch's meaning
        with torch.no_grad(), contextlib.suppress(RuntimeError):
            own = view.clone(memory_format=torch.contiguous_format)
            view.set_(own.untyped_storage(), 0, own.shape, own.stride())
