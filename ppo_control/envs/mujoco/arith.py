"""The C++ ports' floating-point arithmetic in numpy, for references that are to be bitwise envpool's:
sums added in the order of the C++'s loops, and the C library's exp, cos, ... as the C++ calls them
(numpy's pairwise sums and its own vectorized functions can differ in the last bit)."""

from __future__ import annotations

import numpy as np


def ordered_sum(columns: np.ndarray) -> np.ndarray:
    """Row sums of [n, k], added left to right as the C++'s loops do."""
    total = np.zeros(columns.shape[0])
    for k in range(columns.shape[1]):
        total = total + columns[:, k]
    return total


def libm(function, *arrays: np.ndarray) -> np.ndarray:
    """`function` (math.exp, math.cos, ...: the C library's) element by element."""
    shape = np.shape(arrays[0])
    values = zip(*(np.ravel(array) for array in arrays))
    return np.array([function(*args) for args in values], dtype=np.float64).reshape(shape)


def norm3(v: np.ndarray) -> np.ndarray:
    """Row norms of [n, 3], written out as the C++ does."""
    return np.sqrt(v[:, 0] * v[:, 0] + v[:, 1] * v[:, 1] + v[:, 2] * v[:, 2])
