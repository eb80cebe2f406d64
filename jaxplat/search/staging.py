"""Split a function into the part its shared arguments fix and the rest.

A sweep point is `f(shared, point)`: in the engine, `shared` is the outer
configuration (model, workload, parallel degrees: it fixes the operator
table) and `point` the hardware numbers. Most of `f`'s program (building
the prefill and decode tables, their shapes, their collectives' sizes)
depends on `shared` alone. `split_shared` cuts `f`'s jaxpr there:

    pre(shared) -> residuals           # every value that needs only `shared`
    post(residuals, point) == f(shared, point)

so a sweep runs `pre` once per outer configuration, as its own small
program, and the per-block program keeps only what depends on the hardware.
That matters for compile time more than for speed: on XLA:CPU the shared
part was about half of the sweep step's ~530 kernels (most of them a few
scalars or table rows each), and compiled apart it takes XLA's cheapest
settings and compiles beside the step (search.Engine.compile).

It is partial evaluation (what JAX itself does to split a jaxpr into known
and unknown parts), with the shared inputs known only by their shapes,
written as two walks over the same jaxpr: `pre` evaluates the equations
whose inputs are all shared-only and records, in the order the walk meets
them, the shared-only values that a point-dependent equation or an output
reads;
`post` skips the shared-only equations and reads those values back in the
same order. Nested calls whose inputs are mixed are walked into (their
custom JVP rules are not kept: for sweeps, not for gradients).
"""

import math

import jax
import jax.numpy as jnp
from jax.extend import core as jex_core

from jaxplat.search.gridmap import sub_jaxpr

# Status of a value in a walk.
_CONST = "const"      # literal or closed-over constant: known to both walks
_SHARED = "shared"    # computed from the shared arguments (by pre)
_POINT = "point"      # depends on the point (computed by post)


class _Residuals:
    """Shared-only values crossing to the point-dependent part, in the order met."""

    def __init__(self, values=None):
        self.recording = values is None
        self.values = [] if values is None else list(values)
        self.index = {}

    def cross(self, key, value):
        """pre: record `value` (once per key); post: the value recorded for this key."""
        if key not in self.index:
            self.index[key] = len(self.index)
            if self.recording:
                self.values.append(value)
        return self.values[self.index[key]]


def split_shared(f, shared, point):
    """Split `f(shared, point)` into `pre(shared)` and `post(residuals, point)`.

    Args:
      f: a function of two pytrees of arrays.
      shared, point: examples (arrays or jax.ShapeDtypeStruct) fixing shapes.
    Returns:
      (pre, post): pre(shared) -> the residuals packed in one 1-D array per
      dtype (a few arrays to move and pass, not hundreds); post(residuals,
      point) -> f's output. `post` works once `pre` has been traced (that
      fixes the packing): lower or call `pre` first.
    """
    s_leaves, s_tree = jax.tree.flatten(shared)
    p_leaves, p_tree = jax.tree.flatten(point)
    n_s = len(s_leaves)
    spec = lambda x: jax.ShapeDtypeStruct(jnp.shape(x), jnp.result_type(x))  # noqa: E731
    closed, out_shape = jax.make_jaxpr(
        lambda s, p: f(jax.tree.unflatten(s_tree, s), jax.tree.unflatten(p_tree, p)), return_shape=True)(
        [spec(x) for x in s_leaves], [spec(x) for x in p_leaves])
    out_tree = jax.tree.structure(out_shape)

    def pre(shared):
        res = _Residuals()
        args = [(_SHARED, x) for x in jax.tree.leaves(shared)] + [(_POINT, None)] * len(p_leaves)
        _walk(closed.jaxpr, closed.consts, args, res, pre=True)
        layout[:] = [(jnp.shape(x), jnp.result_type(x)) for x in res.values]  # the same on every call
        return tuple(jnp.concatenate([jnp.ravel(x) for x in res.values if jnp.result_type(x) == dt])
                     for dt in _dtypes(layout))

    def post(residuals, point):
        if not layout and residuals:
            raise RuntimeError("split_shared: trace pre before post (it fixes the residuals' packing)")
        res = _Residuals(_unpack(residuals, layout))
        args = [(_SHARED, None)] * n_s + [(_POINT, x) for x in jax.tree.leaves(point)]
        outs = _walk(closed.jaxpr, closed.consts, args, res, pre=False)
        return jax.tree.unflatten(out_tree, outs)

    layout = []  # (shape, dtype) of each residual, known once pre is traced
    return pre, post


def _dtypes(layout):
    return sorted({dt for _, dt in layout}, key=str)


def _unpack(packed, layout):
    """Packed residuals (one 1-D array per dtype, `_dtypes` order) -> the residuals."""
    by_dtype = dict(zip(_dtypes(layout), packed))
    offset = {dt: 0 for dt in by_dtype}
    out = []
    for shape, dt in layout:
        n = math.prod(shape)
        out.append(by_dtype[dt][offset[dt]:offset[dt] + n].reshape(shape))
        offset[dt] += n
    return out


def _walk(jaxpr, consts, args, res, pre, top=True):
    """Evaluate the `pre` or `post` share of `jaxpr` on (status, value) args.

    Returns the outputs as (status, value) pairs, or at the top level their
    values (post) after crossing every shared-only output to post."""
    env = {}
    scope = object()  # keys of this call's values (a jaxpr may be called twice)

    def read(v):
        if isinstance(v, jex_core.Literal):
            return _CONST, v.val
        return env[v]

    def value(v):
        status, x = read(v)
        return res.cross((scope, v), x) if status == _SHARED else x

    for v, c in zip(jaxpr.constvars, consts):
        env[v] = (_CONST, c)
    for v, a in zip(jaxpr.invars, args):
        env[v] = a
    for eqn in jaxpr.eqns:
        ins = [read(v) for v in eqn.invars]
        if all(s != _POINT for s, _ in ins):
            if pre:
                out = eqn.primitive.bind(*(x for _, x in ins), **eqn.primitive.get_bind_params(eqn.params))
                out = out if eqn.primitive.multiple_results else [out]
            else:
                out = [None] * len(eqn.outvars)
            outs = [(_SHARED, o) for o in out]
        elif (sub := sub_jaxpr(eqn)) is not None:
            outs = _walk(*sub, ins, res, pre, top=False)
        else:
            vals = [value(v) for v in eqn.invars]
            if pre:
                outs = [(_POINT, None)] * len(eqn.outvars)
            else:
                out = eqn.primitive.bind(*vals, **eqn.primitive.get_bind_params(eqn.params))
                outs = [(_POINT, o) for o in (out if eqn.primitive.multiple_results else [out])]
        for v, o in zip(eqn.outvars, outs):
            env[v] = o
    if not top:
        return [read(v) for v in jaxpr.outvars]
    return [value(v) for v in jaxpr.outvars]


__all__ = ["split_shared"]
