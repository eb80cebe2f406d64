"""The program that reports every metric of chosen configurations (the
top-k, the Pareto front and their neighbours, search.alike): the sweep step
computes only the metrics it ranks by (`Engine._point`), so the reported
values come from a program of their own, compiled beside the step.
"""

import jax
import jax.numpy as jnp
import numpy as np

from jaxplat.search.runtime import compile_once

# Points per call of the batched program: one compile, padded to the power of
# two that holds the top-k and front, within these bounds (a call's every point
# is evaluated; neighbours take several calls).
VALUES_CHUNK = (64, 1024)
# On the CPU the program is compiled for one point and called once per point
# while a call asks for at most this many; a call that asks for more compiles
# the batched one. The catalog study of tests/test_catalog.py (three model
# kinds), 2026-12-07: the one-point program traced and lowered in 2.8-3.2 CPU s
# and compiled in 7.2-8.7 s, the batched one (jax.vmap) in 6.5-7.7 s and
# 8.6-9.8 s; a point took 0.64 ms one by one, 0.13 ms batched: even at ~30,000
# points, one by one costs no more than the batched program's extra compile.
VALUES_ONE_BY_ONE_UP_TO = 16384


def chunk_size(top_k: int, n_pareto: int) -> int:
    """Points per call of the batched program (`VALUES_CHUNK`)."""
    lo, hi = VALUES_CHUNK
    return min(hi, max(lo, 1 << max(0, top_k + n_pareto - 1).bit_length()))


class ValuesProgram:
    """`point` ([axes] float32 axis values -> (metrics [M], ok, feasible))
    compiled for one point (`one`: on the CPU unless `batched`, as it traces
    in under half the time of `jax.vmap`'s form and compiles no slower) or
    for `chunk` points at a time (elsewhere, as before: a GPU would launch
    each of the program's kernels once per point; not measured, no GPU was
    lent)."""

    def __init__(self, point, n_axes: int, chunk: int, platform: str, batched=None):
        self.one = platform == "cpu" if batched is None else not batched
        self.chunk = chunk
        if self.one:
            lowered = jax.jit(point).lower(jax.ShapeDtypeStruct((n_axes,), jnp.float32))
        else:
            lowered = jax.jit(jax.vmap(point)).lower(jax.ShapeDtypeStruct((chunk, n_axes), jnp.float32))
        self._run = compile_once(lowered, platform, fast_compile=True)

    def takes(self, n: int) -> bool:
        """Whether a call of n points runs here (the one-point program: at most VALUES_ONE_BY_ONE_UP_TO)."""
        return not self.one or n <= VALUES_ONE_BY_ONE_UP_TO

    def __call__(self, values):
        """(vals [n, M] float32, ok [n], feasible [n]) at axis values [n, axes] (n > 0)."""
        if self.one:  # every call dispatched before the results are read: they queue
            rows = jax.device_get([self._run(v) for v in values])
            return tuple(np.stack(x) for x in zip(*rows))
        out, k = [], self.chunk
        for s in range(0, len(values), k):
            part = values[s:s + k]
            pad = np.concatenate([part, np.repeat(part[:1], k - len(part), axis=0)])
            out.append(tuple(np.asarray(x)[:len(part)] for x in jax.device_get(self._run(pad))))
        return tuple(np.concatenate(x) for x in zip(*out))


__all__ = ["VALUES_CHUNK", "VALUES_ONE_BY_ONE_UP_TO", "ValuesProgram", "chunk_size"]
