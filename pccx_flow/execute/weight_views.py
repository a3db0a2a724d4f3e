"""Plain ndarray views of checkpoint tensors, resolved once per process and tensor.

A decode step reads ~5,000 weight tiles. Asking the checkpoint for the tensor each time
costs a lock, a spec lookup and a `numpy.memmap` subclass view per slice (tens of
microseconds, which adds up to a large share of a step). The views here are taken once per
(checkpoint, key) and are ordinary ndarrays over the same mapped pages: slicing them is
cheap and nothing is copied or loaded.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class TensorView:
    storage: str  # "int4" or "float32"
    shape: tuple[int, ...]  # logical shape
    data: np.ndarray  # packed uint8 [rows, cols/2] or float32 in the logical shape
    scale: np.ndarray | None  # float32 [rows] for int4


_LOCK = threading.Lock()
_VIEWS: dict[int, tuple[object, dict[str, TensorView]]] = {}


def tensor_view(weights, key: str) -> TensorView:
    """The view of `key` in the opened checkpoint `weights` (cached per process)."""
    entry = _VIEWS.get(id(weights))
    if entry is None or entry[0] is not weights:
        with _LOCK:
            entry = _VIEWS.get(id(weights))
            if entry is None or entry[0] is not weights:
                entry = _VIEWS[id(weights)] = (weights, {})
    views = entry[1]
    view = views.get(key)
    if view is None:
        shape = tuple(weights.spec(key).shape)
        if weights.storage(key) == "int4":
            packed, scale = weights.int4(key)
            view = TensorView("int4", shape, np.asarray(packed), np.asarray(scale))
        else:
            view = TensorView("float32", shape, np.asarray(weights.float32(key)), None)
        views[key] = view
    return view
