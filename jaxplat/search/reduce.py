"""Reductions of the sweep step: variadic reductions (one kernel for several),
running-front lookups, selection by a traced index.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax


def front_b_at(front, a):
    """The least b of a running front (inf padding) among its points with
    a' <= a, for each a [q] (inf where none). A compare-all over the front
    (q x pp), cheaper to compile and run here than searchsorted's loop."""
    fa, fb = front[:2]
    return jnp.min(jnp.where(fa <= jnp.reshape(a, (-1, 1)), fb, jnp.inf), axis=1).reshape(jnp.shape(a))


def variadic_reduce(pairs, axis=None):
    """[(op, x), ...], op one of "sum", "max", "min", "any", the x of one
    shape -> [op of x over `axis` (None: all)], as one variadic reduction.

    XLA:CPU compiles a reduction over an axis longer than 32 as two or
    three reduce-window kernels (its TreeReductionRewriter, which leaves
    variadic reductions alone), the costliest kernels of the sweep step to
    compile; several reductions at once are one kernel. Bools are counted as
    int32 by "sum". Exact for integers, booleans, max and min; a float sum
    would add in another order (none is reduced here)."""
    xs = [jnp.asarray(x, jnp.int32) if op == "sum" and jnp.asarray(x).dtype == jnp.bool_ else jnp.asarray(x)
          for op, x in pairs]
    axes = tuple(range(xs[0].ndim)) if axis is None else tuple(a % xs[0].ndim for a in np.atleast_1d(axis))
    fns = [REDUCERS[op] for op, _ in pairs]
    inits = [jnp.asarray(identity(op, x.dtype), x.dtype) for (op, _), x in zip(pairs, xs)]
    return list(lax.reduce(xs, inits, lambda a, b: tuple(f(u, v) for f, u, v in zip(fns, a, b)), axes))


REDUCERS = dict(sum=lax.add, max=lax.max, min=lax.min, any=lax.bitwise_or)


def identity(op, dtype):
    """The value `op` ("sum", "max", "min", "any") leaves unchanged, for `dtype`."""
    if op in ("sum", "any"):
        return 0
    if dtype == jnp.bool_:
        return op == "min"
    big = jnp.inf if jnp.issubdtype(dtype, jnp.floating) else jnp.iinfo(dtype).max
    return -big if op == "max" else big


def dominated(front, a, b):
    """Whether the running front weakly dominates the point (a, b)."""
    return front_b_at(front, a) <= b


def pick(trees, v):
    """Select one of several same-structure pytrees by a traced index."""
    stacked = jax.tree.map(lambda *xs: jnp.stack(xs), *trees)
    return jax.tree.map(lambda x: x[v.astype(jnp.int32)], stacked)
