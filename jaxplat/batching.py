"""`vmap_last`: vmap with the batch axis last, for the sweep engine.

`jax.vmap` puts the batch axis first whenever a batched value meets an
unbatched one, so a sweep over hardware points builds arrays like
[points, rows, levels, algorithms] whose minor (contiguous) axes are a few
table rows long. XLA:CPU then runs short, unvectorized inner loops and
small-axis reductions; with the points last it vectorizes over them
(`experiments/bench_sweep.py --compare-vmap` prints both rates for one
block of the benchmark study).

`vmap_last(f)` traces `f` once for one point and interprets its jaxpr with
every batched value carrying the batch as its LAST axis: elementwise
primitives broadcast their unbatched operands, structural ones (broadcast,
reduce, slice, concatenate, cumulative, squeeze, split) shift their axis
parameters, gather and dynamic_slice with shared indices take the batch as
one more full slice, nested jits are inlined, and any other primitive
(scatter, sort, control flow...) falls back to `jax.vmap` of that one
primitive with in_axes/out_axes -1. It is a forward evaluator (no
custom JVP rules are kept): for sweeps, not for gradients.
"""

import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.extend import core as jex_core

_ELEMENTWISE = frozenset("""
abs add and atan2 cbrt ceil clamp convert_element_type cos div eq erf exp exp2 expm1 floor ge gt integer_pow
is_finite le log log1p logistic lt max min mul ne neg nextafter not or pow reduce_precision rem round rsqrt
select_n sign sin sqrt square sub tan tanh xor
""".split())
_REDUCE = frozenset(("reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "reduce_and", "reduce_or",
                     "reduce_xor", "argmax", "argmin"))
_CUMULATIVE = frozenset(("cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp"))
_CALLS = frozenset(("jit", "pjit", "closed_call", "core_call", "custom_jvp_call", "custom_vjp_call",
                    "remat", "checkpoint"))


def vmap_last(f, in_axes):
    """Map `f` over the last axis of the arguments marked in `in_axes`.

    Args:
      f: a function of pytrees of arrays.
      in_axes: per positional argument, -1 (batched: every leaf carries the
        batch as its last axis) or None (shared).
    Returns:
      A function with the same arguments whose outputs carry the batch as
      their last axis (every output leaf is batched).
    """
    def mapped(*args):
        flat, tree = jax.tree.flatten(args)
        marks = jax.tree.leaves(tuple(
            jax.tree.map(lambda _, ax=ax: ax is not None, a) for a, ax in zip(args, in_axes)))
        sizes = {x.shape[-1] for x, b in zip(flat, marks) if b}
        if len(sizes) != 1:
            raise ValueError(f"vmap_last: batched arguments need one common last-axis size, got {sorted(sizes)}")
        (n,) = sizes
        one = [jax.ShapeDtypeStruct(x.shape[:-1] if b else x.shape, x.dtype) for x, b in zip(flat, marks)]
        closed, out_shape = jax.make_jaxpr(lambda *xs: f(*jax.tree.unflatten(tree, xs)), return_shape=True)(*one)
        outs = _eval(closed.jaxpr, closed.consts, list(zip(flat, marks)), n)
        outs = [x if b else _to(x, b, v.aval.shape, n) for (x, b), v in zip(outs, closed.jaxpr.outvars)]
        return jax.tree.unflatten(jax.tree.structure(out_shape), outs)
    return mapped


def _to(x, b, shape, n):
    """Operand (x, batched) brought to logical `shape` + (n,) (scalars broadcast)."""
    if b:
        if x.ndim - 1 == len(shape):
            return x
        return lax.broadcast_in_dim(x, tuple(shape) + (n,), (len(shape),))
    x = jnp.asarray(x)
    return lax.broadcast_in_dim(x, tuple(shape) + (n,), tuple(range(x.ndim)) if x.ndim == len(shape) else ())


def _eval(jaxpr, consts, args, n):
    """Evaluate `jaxpr` on (value, batched) pairs; returns (value, batched) pairs."""
    env = {}

    def read(v):
        if isinstance(v, jex_core.Literal):
            return v.val, False
        return env[v]

    for v, c in zip(jaxpr.constvars, consts):
        env[v] = (c, False)
    for v, a in zip(jaxpr.invars, args):
        env[v] = a
    for eqn in jaxpr.eqns:
        ins = [read(v) for v in eqn.invars]
        outs = _apply(eqn, ins, n)
        for v, o in zip(eqn.outvars, outs):
            env[v] = o
    return [read(v) for v in jaxpr.outvars]


def _apply(eqn, ins, n):
    """One equation on (value, batched) operands -> list of (value, batched)."""
    prim, params = eqn.primitive, dict(eqn.params)
    name = prim.name
    if name not in _CALLS:
        ins = _match_vma(ins)
    if not any(b for _, b in ins):  # nothing batched: run it as traced
        out = prim.bind(*(x for x, _ in ins), **params)
        return [(o, False) for o in out] if prim.multiple_results else [(out, False)]
    if name in _CALLS:
        sub = params.get("jaxpr") or params.get("call_jaxpr") or params.get("fun_jaxpr")
        if sub is not None:
            inner = sub.jaxpr if hasattr(sub, "jaxpr") else sub
            consts = sub.consts if hasattr(sub, "consts") else ()
            return _eval(inner, consts, ins, n)
    if name == "optimization_barrier":
        return ins
    out_avals = [v.aval for v in eqn.outvars]
    if name in _ELEMENTWISE:
        shape = out_avals[0].shape
        ops = [_to(x, b, shape, n) for x, b in ins]
        if name == "select_n" and not ins[0][1] and jnp.ndim(ins[0][0]) == 0:
            ops[0] = ins[0][0]  # a shared scalar predicate stays scalar
        return [(prim.bind(*ops, **params), True)]
    x, _ = ins[0]
    if name == "broadcast_in_dim" and len(ins) == 1:
        shape = tuple(params["shape"]) + (n,)
        dims = tuple(params["broadcast_dimensions"]) + (len(params["shape"]),)
        return [(lax.broadcast_in_dim(x, shape, dims), True)]
    if name in _REDUCE:
        return [(prim.bind(x, **params), True)]
    if name in _CUMULATIVE or name == "squeeze" or name == "split":
        out = prim.bind(x, **params)
        return [(o, True) for o in out] if prim.multiple_results else [(out, True)]
    if name == "slice":
        strides = params["strides"]
        out = lax.slice(x, tuple(params["start_indices"]) + (0,), tuple(params["limit_indices"]) + (n,),
                        None if strides is None else tuple(strides) + (1,))
        return [(out, True)]
    if name == "concatenate":
        ops = [_to(v, b, v.shape if not b else v.shape[:-1], n) for v, b in ins]
        return [(lax.concatenate(ops, params["dimension"]), True)]
    if name == "reshape" and params.get("dimensions") is None:
        return [(x.reshape(tuple(params["new_sizes"]) + (n,)), True)]
    if name == "gather" and ins[0][1] and not any(b for _, b in ins[1:]):
        return [(_gather_shared_indices(x, ins[1][0], params, n), True)]
    if name == "dynamic_slice" and ins[0][1] and not any(b for _, b in ins[1:]):
        starts = [v for v, _ in ins[1:]] + [jnp.zeros((), jnp.asarray(ins[1][0]).dtype) if len(ins) > 1 else 0]
        return [(lax.dynamic_slice(x, starts, tuple(params["slice_sizes"]) + (n,)), True)]
    return _fallback(prim, params, ins, n)


def _gather_shared_indices(x, indices, params, n):
    """Gather from a batched operand with shared indices: the batch axis is
    one more full-size offset axis, last in the output (no transposes)."""
    dn = params["dimension_numbers"]
    out_rank = len(params["slice_sizes"]) - len(dn.collapsed_slice_dims) - len(dn.operand_batching_dims) \
        + jnp.ndim(indices) - 1
    dn = dn._replace(offset_dims=tuple(dn.offset_dims) + (out_rank,))
    return lax.gather(x, indices, dn, tuple(params["slice_sizes"]) + (n,), mode=params["mode"],
                      fill_value=params["fill_value"], unique_indices=params["unique_indices"],
                      indices_are_sorted=params["indices_are_sorted"])


def _match_vma(ins):
    """Under shard_map, mark every operand varying over the mesh axes any
    operand varies over (what jax.numpy inserts itself; `bind` does not)."""
    vmas = [_varying(x) for x, _ in ins]
    union = frozenset().union(*vmas)
    if not union:
        return ins
    return [(lax.pcast(x, tuple(sorted(union - v)), to="varying") if union - v else x, b)
            for (x, b), v in zip(ins, vmas)]


def _varying(x):
    """Mesh axes a value varies over inside shard_map (empty outside)."""
    mat = getattr(jax.typeof(x), "manual_axis_type", None)
    return frozenset(getattr(mat, "varying", ()) or ())


def _fallback(prim, params, ins, n):
    """Any other primitive: jax.vmap of it alone, batch axis last in and out."""
    axes = tuple(-1 if b else None for _, b in ins)
    fn = functools.partial(prim.bind, **params)
    out = jax.vmap(fn, in_axes=axes, out_axes=-1, axis_size=n)(*(x for x, _ in ins))
    return [(o, True) for o in out] if prim.multiple_results else [(out, True)]


__all__ = ["vmap_last"]
