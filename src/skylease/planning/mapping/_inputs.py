"""Validation of the mapping inputs (ETC matrices, assignments, orders) at the API boundary: the
numba kernels of :mod:`.schedule` assume float64 C-contiguous ETCs with finite entries > 0."""

from __future__ import annotations

import numpy as np


def _writeable(a: np.ndarray) -> np.ndarray:
    # numba compiles a separate specialisation for read-only arrays: always hand it writeable ones.
    return a if a.flags.writeable else a.copy()


def _as_etc(etc: object) -> np.ndarray:
    """Validated float64 C-contiguous copy-or-view of an ETC matrix (n tasks x m machines)."""
    try:
        a = np.asarray(etc, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"ETC must be a 2-D array of numbers: {exc}") from None
    if a.ndim != 2:
        raise ValueError(f"ETC must be 2-D (tasks x machines), got {a.ndim}-D with shape {a.shape}")
    if a.shape[0] < 1 or a.shape[1] < 1:
        raise ValueError(f"ETC must have at least one task and one machine, got shape {a.shape}")
    if not np.isfinite(a).all():
        raise ValueError("ETC entries must be finite (found NaN or inf)")
    if not (a > 0).all():
        i, j = np.argwhere(a <= 0)[0]
        raise ValueError(f"ETC entries must be > 0, got ETC[{i}][{j}] = {a[i, j]!r}")
    return _writeable(np.ascontiguousarray(a))


def _as_index_vector(x: object, n: int, what: str) -> np.ndarray:
    try:
        a = np.asarray(x)
    except (TypeError, ValueError) as exc:  # pragma: no cover - exotic inputs
        raise ValueError(f"{what} must be a 1-D integer array: {exc}") from None
    if a.ndim != 1 or a.shape[0] != n:
        raise ValueError(f"{what} must be a 1-D array of length {n}, got shape {a.shape}")
    integral_floats = a.dtype.kind == "f" and bool(np.isfinite(a).all()) and np.array_equal(a, np.round(a))
    if a.dtype.kind not in "iu" and not integral_floats:
        raise ValueError(f"{what} must hold integers, got dtype {a.dtype}")
    return np.array(a, dtype=np.int64, copy=True)


def _as_assignment(assignment: object, n: int, m: int) -> np.ndarray:
    a = _as_index_vector(assignment, n, "assignment")
    if n and (a.min() < 0 or a.max() >= m):
        raise ValueError(f"assignment entries must be machine indices in [0, {m}), "
                         f"got range [{a.min()}, {a.max()}]")
    return a


def _as_order(order: object, n: int) -> np.ndarray:
    if order is None:
        return np.arange(n, dtype=np.int64)
    o = _as_index_vector(order, n, "order")
    if n and (o.min() < 0 or o.max() >= n or np.bincount(o, minlength=n).max() != 1):
        raise ValueError(f"order must be a permutation of the task ids 0..{n - 1}")
    return o
