"""`search.vmap_last` and `search.grid_map` (the engine's own batching, kept for
the speed `experiments/bench_sweep.py --compare-vmap` prints) equal `jax.vmap`
on random inputs (batch axes moved last)."""

import jax
import jax.numpy as jnp
import numpy as np

import jaxplat as jp
from jaxplat.model import replace
from jaxplat.search import grid_map, vmap_last


def _mixed(shared, x):
    """Touches every rule: elementwise with shared operands, scalar select,
    broadcast, reductions, cumulative, slice, concatenate, gather and
    dynamic_slice with shared indices, a nested jit, and a fallback (sort)."""
    v = shared * x + jnp.arange(4.0)                        # [4]
    w = jnp.where(shared > 0, v, -v)                        # scalar predicate
    m = jnp.outer(v, w)                                     # [4, 4]
    c = jnp.cumsum(m, axis=1)[:, 1:3]                       # cumulative, slice
    g = jnp.concatenate([c.reshape(-1), jnp.ones(2)])[np.array([5, 0, 9, 2])]  # gather, shared indices
    d = jax.lax.dynamic_slice(m, (jnp.int32(1), jnp.int32(0)), (2, 3)).sum(0)
    s = jnp.sort(v * jnp.array([1.0, -1.0, 1.0, -1.0]))      # no rule: falls back to jax.vmap
    r = jax.jit(lambda a: jnp.max(a, axis=0) + jnp.argmax(a, axis=0))(m)
    return {"g": g, "d": d, "s": s, "r": r, "t": jnp.sum(m) / x}


def test_rules_equal_vmap():
    x = jnp.asarray(np.random.default_rng(1).uniform(-2.0, 3.0, 7), jnp.float32)
    shared = jnp.float32(0.5)
    want = jax.vmap(_mixed, in_axes=(None, 0))(shared, x)
    got = jax.jit(vmap_last(_mixed, in_axes=(None, -1)))(shared, x)
    for k in want:
        np.testing.assert_allclose(np.moveaxis(np.asarray(got[k]), -1, 0), want[k], rtol=1e-6, err_msg=k)


def test_evaluate_over_hardware_equals_vmap():
    model, hw, wl = jp.load_model("llama-3.1-70b"), jp.load_hardware("h200-sxm"), jp.load_workload("chatbot")
    par = jp.Parallel(tp=4, pp=2)
    # Random hardware points, log-uniform over the ranges sweeps cover.
    rng = np.random.default_rng(0)
    logu = lambda lo, hi: jnp.asarray(np.exp(rng.uniform(np.log(lo), np.log(hi), 9)), jnp.float32)  # noqa: E731
    bw, link, sram = logu(1e12, 2e13), logu(5e10, 2e12), logu(1e7, 1e9)

    def point(model, b, l, s):
        h = replace(hw, mem_bw=hw.mem_bw.at[0].set(b), net_bw=hw.net_bw.at[0].set(l), sram_size=s)
        m = jp.evaluate(model, h, par, wl)
        return jnp.stack([m.ttft, m.tpot, m.throughput, m.energy_per_token_j, m.memory_bytes])

    want = jax.jit(jax.vmap(point, in_axes=(None, 0, 0, 0)))(model, bw, link, sram)
    got = jax.jit(vmap_last(point, in_axes=(None, -1, -1, -1)))(model, bw, link, sram)
    np.testing.assert_allclose(np.asarray(got).T, want, rtol=2e-6)

    # The same over a 3 x 4 x 5 grid of the three (what the sweep engine does):
    # each value carries the grid axes it depends on, size 1 on the others.
    b3, l4, s5 = bw[:3], link[:4], sram[:5]
    got = jax.jit(grid_map(point, in_axes=(None, -1, -1, -1), ndim=3))(
        model, b3[:, None, None], l4[None, :, None], s5[None, None, :])
    assert got.shape == (5, 3, 4, 5)
    g = np.meshgrid(b3, l4, s5, indexing="ij")
    want = jax.jit(jax.vmap(point, in_axes=(None, 0, 0, 0)))(model, *(jnp.asarray(x.reshape(-1)) for x in g))
    np.testing.assert_allclose(np.asarray(got).reshape(5, -1).T, want, rtol=2e-6)


def _two(shared, a, b):
    """Values on grid axis 0 only (a), on both (a - b), and mixed in one concatenate."""
    one, both = _mixed(shared, a), _mixed(shared, a - b)
    return {**one, **{k + "2": v for k, v in both.items()},
            "c": jnp.concatenate([one["g"], both["g"], jnp.stack([b, a])])}


def test_grid_rules_equal_vmap():
    a = jnp.linspace(-2.0, 3.0, 5)
    b = jnp.linspace(0.5, 1.5, 3)
    shared = jnp.float32(0.5)
    aa, bb = (x.reshape(-1) for x in jnp.meshgrid(a, b, indexing="ij"))
    want = jax.vmap(_two, in_axes=(None, 0, 0))(shared, aa, bb)
    got = jax.jit(grid_map(_two, in_axes=(None, -1, -1), ndim=2))(shared, a[:, None], b[None, :])
    for k in want:
        g = np.asarray(got[k])
        assert g.shape[-2:] == (5, 3), k
        g = np.moveaxis(g.reshape(g.shape[:-2] + (15,)), -1, 0)
        np.testing.assert_allclose(g, want[k], rtol=1e-6, err_msg=k)
