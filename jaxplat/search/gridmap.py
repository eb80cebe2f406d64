"""Batching with the batch axes last, for the sweep engine.

`jax.vmap` puts the batch axis first whenever a batched value meets an
unbatched one, so a sweep over hardware points builds arrays like
[points, rows, levels, algorithms] whose minor (contiguous) axes are a few
table rows long. XLA:CPU then runs short, unvectorized inner loops and
small-axis reductions; with the points last it vectorizes over them.

`grid_map(f, in_axes, ndim)` goes one step further for a sweep over a grid
(a product of axes): every batched value carries `ndim` trailing grid axes,
each either full size or 1 when the value does not depend on that grid
axis. An operator row's SRAM tiling then costs once per SRAM size, a
collective once per link bandwidth, and only the final combination runs
over every grid point (`experiments/bench_sweep.py --compare-vmap` prints
the three rates for one block of the benchmark study). `vmap_last` is its
one-axis case.

Both trace `f` once for one point and interpret its jaxpr: elementwise
primitives broadcast their operands to the union of the grid axes they
depend on, structural ones (broadcast, reduce, slice, concatenate, stack,
cumulative, squeeze, split, reshape) pass the trailing axes through, gather
and dynamic_slice with shared indices take them as full slices, nested jits
are inlined, and any other primitive (scatter, sort, control flow...) falls
back to `jax.vmap` of that one primitive over the flattened grid axes. So
does a primitive with a rule here whose equation has a parameter the rule
does not know (`_RULE_PARAMS`: what JAX 0.6-0.11 pass), so a newer JAX can
make a sweep slower but not change its numbers; `FALLBACKS` counts them.
It is a forward evaluator (no custom JVP rules are kept): for sweeps, not
for gradients. tests/test_batching.py holds it to `jax.vmap` on the
functions the engine maps (and with every rule switched off).
"""

import collections
import functools
import math

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
_PASS_THROUGH = frozenset(("cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp", "squeeze", "split")) | _REDUCE
_CALLS = frozenset(("jit", "pjit", "closed_call", "core_call", "custom_jvp_call", "custom_vjp_call",
                    "remat", "checkpoint"))
# The parameters each rule reads or passes through unchanged, by the names
# JAX 0.6-0.11 give them. An equation with any other parameter (one a newer
# JAX added, whose meaning the rule cannot know) or with a sharding set (the
# rules add axes it would not cover) goes to jax.vmap instead (`_fallback`):
# a JAX release can make grid_map slower, never give other numbers.
_SHARDINGS = ("sharding", "out_sharding")  # accepted when they split no axis (`_unsplit`)
_RULE_PARAMS = {
    **dict.fromkeys(_ELEMENTWISE, frozenset(("accuracy", "out_dtype", "new_dtype", "weak_type", "sharding",
                                             "rounding_method", "y", "exponent_bits", "mantissa_bits"))),
    **dict.fromkeys(_REDUCE, frozenset(("axes", "out_sharding", "index_dtype"))),
    **dict.fromkeys(("cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp"), frozenset(("axis", "reverse"))),
    "squeeze": frozenset(("dimensions",)), "split": frozenset(("sizes", "axis")),
    "broadcast_in_dim": frozenset(("shape", "broadcast_dimensions", "sharding")),
    "slice": frozenset(("start_indices", "limit_indices", "strides")),
    "concatenate": frozenset(("dimension",)), "stack": frozenset(("axis",)),
    "reshape": frozenset(("new_sizes", "dimensions", "sharding")),
    "gather": frozenset(("dimension_numbers", "slice_sizes", "mode", "fill_value", "unique_indices",
                         "indices_are_sorted")),
    "dynamic_slice": frozenset(("slice_sizes",)), "optimization_barrier": frozenset(),
}
# Primitives sent to jax.vmap (`_fallback`) while tracing, by name: what a
# sweep's program batches the slower way (experiments/bench_sweep.py prints it).
FALLBACKS = collections.Counter()


def grid_map(f, in_axes, ndim):
    """Map `f` over a grid whose `ndim` axes trail the arguments marked in `in_axes`.

    Args:
      f: a function of pytrees of arrays.
      in_axes: per positional argument, -1 (on the grid: every leaf carries
        `ndim` trailing axes, each of the grid's size or 1 where the leaf is
        constant along it) or None (shared).
      ndim: number of grid axes.
    Returns:
      A function with the same arguments whose output leaves carry the whole
      grid as their `ndim` last axes.
    """
    def mapped(*args):
        flat, tree = jax.tree.flatten(args)
        # (not a tree.map of flags: a dataclass pytree may turn them into arrays)
        on_grid = [ax is not None for a, ax in zip(args, in_axes) for _ in jax.tree.leaves(a)]
        sizes = [1] * ndim
        for x, g in zip(flat, on_grid):
            if g and x.ndim < ndim:
                raise ValueError(f"grid_map: a grid argument of shape {x.shape} lacks the {ndim} grid axes")
            for k, s in enumerate(x.shape[x.ndim - ndim:] if g else ()):
                if s != 1 and sizes[k] not in (1, s):
                    raise ValueError(f"grid_map: grid axis {k} has sizes {sizes[k]} and {s}")
                sizes[k] = max(sizes[k], s)
        sizes = tuple(sizes)
        ins = [_split(x, ndim) if g else (x, _NONE(ndim)) for x, g in zip(flat, on_grid)]
        one = [jax.ShapeDtypeStruct(x.shape[:x.ndim - ndim] if g else x.shape, x.dtype)
               for x, g in zip(flat, on_grid)]
        closed, out_shape = jax.make_jaxpr(lambda *xs: f(*jax.tree.unflatten(tree, xs)), return_shape=True)(*one)
        outs = _eval(closed.jaxpr, closed.consts, ins, sizes)
        full = (True,) * ndim
        outs = [_to(x, m, v.aval.shape, full, sizes) for (x, m), v in zip(outs, closed.jaxpr.outvars)]
        return jax.tree.unflatten(jax.tree.structure(out_shape), outs)
    return mapped


def vmap_last(f, in_axes):
    """`jax.vmap` over the last axis of the arguments marked -1 in `in_axes`
    (None: shared); outputs carry the batch as their last axis."""
    return grid_map(f, in_axes, 1)


def split_grid(sizes, block):
    """Block layout of a grid with axes `sizes` (row-major) for `grid_map`:
    the last axes whole, as many as fit in `block` points, times consecutive
    points of the leading ones (flattened into one lead axis). Returns
    (split, cl, p): axes [split:] are whole (p points), cl lead points per
    block (at most `block` points in all, each block a contiguous flat range)."""
    split = next(s for s in range(len(sizes) + 1) if math.prod(sizes[s:]) <= block)
    p = math.prod(sizes[split:])
    return split, min(max(1, block // p), math.prod(sizes[:split])), p


def digits(idx, sizes):
    """Mixed-radix decode: int32 indices -> one int32 digit array per size (row-major)."""
    out = []
    for n in reversed(sizes):
        out.append(idx % n)
        idx = idx // n
    return out[::-1]


def block_grid(tables, lead_digits, merge=1):
    """Axis values of one block for `grid_map`: `tables` are the grid's axes
    (1-D arrays); `lead_digits` [cl] int32 index one per leading axis (the
    first len(lead_digits) tables; `digits` of the flattened lead index).
    Returns one array per axis with 1 + len(tables) - len(lead_digits) -
    (merge - 1) dims: leading axes vary along the first, each whole axis
    along its own, except the last `merge` whole axes, which share the last
    dim (row-major over their points: one long minor dim for XLA:CPU to
    vectorize, where a short last axis, e.g. 2 values, would not be)."""
    split = len(lead_digits)
    merge = max(1, min(merge, len(tables) - split))
    nd = 1 + len(tables) - split - (merge - 1)
    out = [jnp.asarray(t)[d].reshape((d.shape[0],) + (1,) * (nd - 1)) for t, d in zip(tables, lead_digits)]
    whole = tables[split:len(tables) - merge] if merge else tables[split:]
    out += [jnp.asarray(t).reshape(tuple(len(t) if d == k else 1 for d in range(nd)))
            for k, t in enumerate(whole, start=1)]
    if len(tables) > split:
        last = tables[len(tables) - merge:]
        flat = jnp.arange(math.prod(len(t) for t in last), dtype=jnp.int32)
        out += [jnp.asarray(t)[d].reshape((1,) * (nd - 1) + (-1,))
                for t, d in zip(last, digits(flat, [len(t) for t in last]))]
    return out


def _NONE(ndim):
    return (False,) * ndim


def _split(x, ndim):
    """A grid argument leaf -> (value, mask); constant on every grid axis: unbatched, trailing axes dropped."""
    mask = tuple(s != 1 for s in x.shape[x.ndim - ndim:])
    if not any(mask):
        return x.reshape(x.shape[:x.ndim - ndim]), mask
    return x, mask


def _trail(mask, sizes):
    return tuple(s if m else 1 for m, s in zip(mask, sizes))


def _union(masks):
    return tuple(any(ms) for ms in zip(*masks))


def _to(x, m, shape, mo, sizes):
    """Operand (x, mask m) brought to logical `shape` + the grid axes in `mo`
    (size 1 elsewhere); a logical scalar broadcasts over `shape`."""
    k = len(sizes)
    x = jnp.asarray(x)
    lead = x.ndim - k if any(m) else x.ndim
    if lead == len(shape) and m == mo:
        return x
    dims = tuple(range(lead)) if lead == len(shape) else ()
    if any(m):
        dims += tuple(range(len(shape), len(shape) + k))
    return lax.broadcast_in_dim(x, tuple(shape) + _trail(mo, sizes), dims)


def _eval(jaxpr, consts, args, sizes):
    """Evaluate `jaxpr` on (value, mask) pairs; returns (value, mask) pairs."""
    env = {}
    none = _NONE(len(sizes))

    def read(v):
        if isinstance(v, jex_core.Literal):
            return v.val, none
        return env[v]

    for v, c in zip(jaxpr.constvars, consts):
        env[v] = (c, none)
    for v, a in zip(jaxpr.invars, args):
        env[v] = a
    for eqn in jaxpr.eqns:
        outs = _apply(eqn, [read(v) for v in eqn.invars], sizes)
        for v, o in zip(eqn.outvars, outs):
            env[v] = o
    return [read(v) for v in jaxpr.outvars]


def _apply(eqn, ins, sizes):
    """One equation on (value, mask) operands -> list of (value, mask)."""
    prim, params = eqn.primitive, dict(eqn.params)
    name, k = prim.name, len(sizes)
    if name not in _CALLS:
        ins = _match_vma(ins)
    mo = _union([m for _, m in ins]) if ins else _NONE(k)
    if not any(mo):  # nothing on the grid: run it as traced
        subfuns, bind = _bind_params(prim, params)  # (custom_jvp_call: its subfuns)
        out = prim.bind(*subfuns, *(x for x, _ in ins), **bind)
        return [(o, mo) for o in out] if prim.multiple_results else [(out, mo)]
    if (sub := sub_jaxpr(eqn)) is not None:
        return _eval(*sub, ins, sizes)
    if not _has_rule(name, params):
        return _fallback(eqn, ins, mo, sizes)
    if name == "optimization_barrier":  # kept: it makes XLA compute its operands once
        return list(zip(prim.bind(*(x for x, _ in ins), **params), (m for _, m in ins)))
    trail = _trail(mo, sizes)
    if name in _ELEMENTWISE:
        shape = eqn.outvars[0].aval.shape
        ops = [_to(x, m, shape, mo, sizes) for x, m in ins]
        if name == "select_n" and not any(ins[0][1]) and jnp.ndim(ins[0][0]) == 0:
            ops[0] = ins[0][0]  # a shared scalar predicate stays scalar
        return [(prim.bind(*ops, **params), mo)]
    x, m = ins[0]
    if name == "broadcast_in_dim" and len(ins) == 1:
        n = len(params["shape"])
        dims = tuple(params["broadcast_dimensions"]) + tuple(range(n, n + k))
        return [(lax.broadcast_in_dim(x, tuple(params["shape"]) + trail, dims), m)]
    if name in _PASS_THROUGH:  # axis parameters name logical axes, which lead
        out = prim.bind(x, **params)
        return [(o, m) for o in out] if prim.multiple_results else [(out, m)]
    if name == "slice":
        strides = params["strides"]
        out = lax.slice(x, tuple(params["start_indices"]) + (0,) * k, tuple(params["limit_indices"]) + trail,
                        None if strides is None else tuple(strides) + (1,) * k)
        return [(out, m)]
    if name in ("concatenate", "stack"):  # their axis parameter names a logical axis
        ops = [_to(v, vm, eqv.aval.shape, mo, sizes) for (v, vm), eqv in zip(ins, eqn.invars)]
        return [(prim.bind(*ops, **params), mo)]
    if name == "reshape" and params.get("dimensions") is None:
        return [(x.reshape(tuple(params["new_sizes"]) + trail), m)]
    shared = not any(any(vm) for _, vm in ins[1:])
    if name == "gather" and shared:
        return [(_gather_shared_indices(x, ins[1][0], params, trail), m)]
    if name == "dynamic_slice" and shared:
        zero = jnp.zeros((), jnp.asarray(ins[1][0]).dtype) if len(ins) > 1 else 0
        starts = [v for v, _ in ins[1:]] + [zero] * k
        return [(lax.dynamic_slice(x, starts, tuple(params["slice_sizes"]) + trail), m)]
    return _fallback(eqn, ins, mo, sizes)


def _has_rule(name, params) -> bool:
    """A rule of this module covers the primitive `name` with these parameters (`_RULE_PARAMS`)."""
    known = _RULE_PARAMS.get(name)
    return known is not None and known.issuperset(params) and all(_unsplit(params.get(k)) for k in _SHARDINGS)


def _unsplit(sharding) -> bool:
    """None, or a sharding that splits, reduces or leaves unreduced no axis
    (inside shard_map: NamedSharding(..., P(None, ...)))."""
    if sharding is None:
        return True
    spec = getattr(sharding, "spec", None)
    return spec is not None and all(p is None for p in spec) \
        and not getattr(spec, "unreduced", None) and not getattr(spec, "reduced", None)


def _bind_params(prim, params):
    """(subfuns, params) that `prim.bind` takes for an equation's params:
    JAX before 0.9 returns both from get_bind_params, later ones the params
    only (the subfuns among them)."""
    out = prim.get_bind_params(params)
    return out if isinstance(out, tuple) else ((), out)


def sub_jaxpr(eqn):
    """(jaxpr, consts) that a call-like equation (jit, closed_call, custom
    JVP/VJP, remat) runs, else None."""
    if eqn.primitive.name not in _CALLS:
        return None
    params = eqn.params
    sub = params.get("jaxpr") or params.get("call_jaxpr") or params.get("fun_jaxpr")
    if sub is None:
        return None
    return (sub.jaxpr, sub.consts) if hasattr(sub, "jaxpr") else (sub, ())


def _gather_shared_indices(x, indices, params, trail):
    """Gather from a batched operand with shared indices: the grid axes are
    more full-size offset axes, last in the output (no transposes)."""
    dn = params["dimension_numbers"]
    out_rank = len(params["slice_sizes"]) - len(dn.collapsed_slice_dims) - len(dn.operand_batching_dims) \
        + jnp.ndim(indices) - 1
    dn = dn._replace(offset_dims=tuple(dn.offset_dims) + tuple(range(out_rank, out_rank + len(trail))))
    return lax.gather(x, indices, dn, tuple(params["slice_sizes"]) + trail, mode=params["mode"],
                      fill_value=params["fill_value"], unique_indices=params["unique_indices"],
                      indices_are_sorted=params["indices_are_sorted"])


def _match_vma(ins):
    """Under shard_map, mark every operand varying over the mesh axes any
    operand varies over (what jax.numpy inserts itself; `bind` does not)."""
    union = frozenset().union(*(varying_axes(x) for x, _ in ins))
    if not union:
        return ins
    return [(vary_over(x, union), m) for x, m in ins]


def varying_axes(x):
    """Mesh axes a value varies over inside shard_map (empty outside).

    JAX 0.10 keeps them in the aval's `manual_axis_type.varying` (earlier
    releases: `vma`); an aval with neither fails here rather than silently
    reading no axes."""
    aval = jax.typeof(x)
    if hasattr(aval, "manual_axis_type"):
        return frozenset(aval.manual_axis_type.varying)
    if not hasattr(lax, "pvary") and not hasattr(lax, "pcast"):
        return frozenset()  # JAX before 0.6: no varying types
    return frozenset(aval.vma)


def vary_over(x, axes):
    """`x` marked varying over the mesh axes in `axes` it does not vary over yet."""
    more = tuple(sorted(frozenset(axes) - varying_axes(x)))
    if not more:
        return x
    if hasattr(lax, "pcast"):
        return lax.pcast(x, more, to="varying")
    if hasattr(lax, "pvary"):
        return lax.pvary(x, more)  # JAX before 0.8
    return x  # JAX before 0.6: no varying types


def _fallback(eqn, ins, mo, sizes):
    """Any other primitive: jax.vmap of it alone over the grid axes in `mo`,
    flattened into one last axis and unflattened after."""
    prim, params = eqn.primitive, eqn.params
    FALLBACKS[prim.name] += 1
    trail = _trail(mo, sizes)
    n = math.prod(trail)
    ops = []
    for (x, m), v in zip(ins, eqn.invars):
        if any(m):
            shape = v.aval.shape
            x = _to(x, m, shape, mo, sizes).reshape(tuple(shape) + (n,))
        ops.append(x)
    axes = tuple(-1 if any(m) else None for _, m in ins)
    fn = functools.partial(prim.bind, **params)
    out = jax.vmap(fn, in_axes=axes, out_axes=-1, axis_size=n)(*ops)
    out = out if prim.multiple_results else [out]
    return [(o.reshape(o.shape[:-1] + trail), mo) for o in out]


__all__ = ["FALLBACKS", "block_grid", "digits", "grid_map", "split_grid", "sub_jaxpr", "vary_over", "varying_axes",
           "vmap_last"]
