"""Synthetic bags of tasks with given runtime statistics (seeded)."""

from __future__ import annotations

import numpy as np

from skylease.model.task import Bag


def _rng(seed: int | np.random.Generator | None) -> np.random.Generator:
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


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
    if mean <= 0 or sd <= 0:
        raise ValueError("mean and sd must be > 0")
    shape = (mean / sd) ** 2
    return Bag.from_runtimes(_rng(seed).gamma(shape, mean / shape, n), name=name)


def lognormal_bag(n: int, mean: float, sd: float, seed: int | np.random.Generator | None = None,
                  *, name: str = "lognormal") -> Bag:
    """Lognormal runtimes with the given mean and standard deviation (heavy right tail)."""
    if mean <= 0 or sd <= 0:
        raise ValueError("mean and sd must be > 0")
    sigma2 = np.log1p((sd / mean) ** 2)
    mu = np.log(mean) - sigma2 / 2
    return Bag.from_runtimes(_rng(seed).lognormal(mu, np.sqrt(sigma2), n), name=name)
