"""Synthetic bags of tasks with given runtime statistics (seeded): :func:`draw_runtimes` (the
runtimes alone, for a simulator that keeps them as an array) and a :class:`Bag` of each kind."""

from __future__ import annotations

import math

import numpy as np

from skylease.model.errors import UserError
from skylease.model.limits import check_size
from skylease.model.task import Bag


def _rng(seed: int | np.random.Generator | None) -> np.random.Generator:
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


#: The kinds :func:`draw_runtimes` draws, with their parameters.
KINDS = {"constant": ("SECONDS",), "normal": ("MEAN", "SD"), "gamma": ("MEAN", "SD"),
         "lognormal": ("MEAN", "SD")}


def draw_runtimes(kind: str, n: int, params: tuple[float, ...],
                  seed: int | np.random.Generator | None = None) -> np.ndarray:
    """``n`` runtimes (s) of ``kind`` (:data:`KINDS`) with its parameters: constant (SECONDS);
    normal, truncated below at 1 s (MEAN, SD); gamma and lognormal with that mean and standard
    deviation."""
    if kind == "constant":
        return np.full(n, float(params[0]))
    mean, sd = params
    if kind == "normal":
        return np.maximum(_rng(seed).normal(mean, sd, n), 1.0)
    if mean <= 0 or sd <= 0:
        raise ValueError("mean and sd must be > 0")
    if kind == "gamma":
        shape = (mean / sd) ** 2
        return _rng(seed).gamma(shape, mean / shape, n)
    if kind == "lognormal":
        sigma2 = np.log1p((sd / mean) ** 2)
        return _rng(seed).lognormal(np.log(mean) - sigma2 / 2, np.sqrt(sigma2), n)
    raise ValueError(f"unknown kind {kind!r}; one of {', '.join(KINDS)}")


def constant_bag(n: int, runtime: float, name: str = "constant") -> Bag:
    """``n`` tasks of exactly ``runtime`` seconds."""
    return Bag.from_runtimes(np.full(n, float(runtime)), name=name)


def normal_bag(n: int, mean: float, sd: float, seed: int | np.random.Generator | None = None,
               *, minimum: float = 1.0, name: str = "normal") -> Bag:
    """Normal runtimes, truncated below at ``minimum`` seconds (runtimes cannot be negative)."""
    x = _rng(seed).normal(mean, sd, n)
    return Bag.from_runtimes(np.maximum(x, minimum), name=name)


def gamma_bag(n: int, mean: float, sd: float, seed: int | np.random.Generator | None = None,
              *, name: str = "gamma") -> Bag:
    """Gamma runtimes with the given mean and standard deviation (right-skewed, like renders)."""
    return Bag.from_runtimes(draw_runtimes("gamma", n, (mean, sd), seed), name=name)


def lognormal_bag(n: int, mean: float, sd: float, seed: int | np.random.Generator | None = None,
                  *, name: str = "lognormal") -> Bag:
    """Lognormal runtimes with the given mean and standard deviation (heavy right tail)."""
    return Bag.from_runtimes(draw_runtimes("lognormal", n, (mean, sd), seed), name=name)


def _bad_spec(spec: str, why: str, field: str, forms: tuple[str, ...]) -> UserError:
    return UserError(f"{why} (got {spec!r}); valid forms: {'; '.join(forms)}", field=field)


def is_synthetic(spec: str) -> bool:
    """Whether ``spec`` names a synthetic bag (``KIND:N:...`` of :data:`KINDS`)."""
    return spec.strip().split(":", 1)[0] in KINDS


def synthetic_runtimes(spec: str, seed: int | np.random.Generator | None, *, field: str,
                       forms: tuple[str, ...], task_bytes: float) -> np.ndarray:
    """The runtimes of a synthetic bag ``normal:N:MEAN:SD``, ``gamma:...``, ``lognormal:...`` or
    ``constant:N:SECONDS``, checked (one line on ``field`` listing ``forms``; N within the memory
    budget at ``task_bytes`` a task) before any is drawn."""
    spec = spec.strip()
    kind, *args = spec.split(":")
    if len(args) != (2 if kind == "constant" else 3):
        shape = "constant:N:SECONDS" if kind == "constant" else f"{kind}:N:MEAN:SD"
        raise _bad_spec(spec, f"expected {shape}", field, forms)
    try:
        n = int(args[0])
    except ValueError:
        raise _bad_spec(spec, f"N {args[0]!r} is not a whole number", field, forms) from None
    try:
        params = tuple(float(a) for a in args[1:])
    except ValueError:
        raise _bad_spec(spec, "MEAN, SD and SECONDS must be numbers", field, forms) from None
    if n < 1:
        raise _bad_spec(spec, f"N must be >= 1, got {n}", field, forms)
    check_size(n, "tasks", task_bytes, field=field if field.startswith("--") else f"--{field}",
               asked=f"{spec} asks for {n:,}")
    if not all(math.isfinite(p) for p in params):
        raise _bad_spec(spec, "MEAN, SD and SECONDS must be finite", field, forms)
    if kind == "constant":
        if params[0] < 0:
            raise _bad_spec(spec, "SECONDS must be >= 0", field, forms)
        return draw_runtimes(kind, n, params)
    mean, sd = params
    if mean <= 0 or sd < 0 or (sd == 0 and kind != "normal"):
        raise _bad_spec(spec, "MEAN must be > 0 and SD > 0 (SD >= 0 for normal)", field, forms)
    return draw_runtimes(kind, n, params, seed)
