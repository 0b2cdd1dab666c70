"""Synthetic bags of tasks with given runtime statistics (seeded): :func:`draw_runtimes` (the
runtimes alone, for a simulator that keeps them as an array) and a :class:`Bag` of each kind."""

from __future__ import annotations

import numpy as np

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
