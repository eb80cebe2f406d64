"""`batching.vmap_last` equals `jax.vmap` (batch axis moved last)."""

import jax
import jax.numpy as jnp
import numpy as np

import jaxplat as jp
from jaxplat._pytree import replace
from jaxplat.batching import vmap_last


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
    x = jnp.linspace(-2.0, 3.0, 7)
    shared = jnp.float32(0.5)
    want = jax.vmap(_mixed, in_axes=(None, 0))(shared, x)
    got = jax.jit(vmap_last(_mixed, in_axes=(None, -1)))(shared, x)
    for k in want:
        np.testing.assert_allclose(np.moveaxis(np.asarray(got[k]), -1, 0), want[k], rtol=1e-6, err_msg=k)


def test_evaluate_over_hardware_equals_vmap():
    model, hw, wl = jp.load_model("llama-3.1-70b"), jp.load_hardware("h200-sxm"), jp.load_workload("chatbot")
    par = jp.Parallel(tp=4, pp=2)
    bw = jnp.geomspace(1e12, 2e13, 9, dtype=jnp.float32)
    link = jnp.geomspace(5e10, 2e12, 9, dtype=jnp.float32)[::-1]
    sram = jnp.geomspace(1e7, 1e9, 9, dtype=jnp.float32)

    def point(model, b, l, s):
        h = replace(hw, mem_bw=hw.mem_bw.at[0].set(b), net_bw=hw.net_bw.at[0].set(l), sram_size=s)
        m = jp.evaluate(model, h, par, wl)
        return jnp.stack([m.ttft, m.tpot, m.throughput, m.energy_per_token_j, m.memory_bytes])

    want = jax.jit(jax.vmap(point, in_axes=(None, 0, 0, 0)))(model, bw, link, sram)
    got = jax.jit(vmap_last(point, in_axes=(None, -1, -1, -1)))(model, bw, link, sram)
    np.testing.assert_allclose(np.asarray(got).T, want, rtol=2e-6)
