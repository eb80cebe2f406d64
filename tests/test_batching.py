"""`search.vmap_last` and `search.grid_map` (the engine's own batching, kept for
the speed `experiments/bench_sweep.py --compare-vmap` prints) equal `jax.vmap`
on random inputs (batch axes moved last): on functions that touch every
rule, on the functions the sweep engine maps, and with rules switched off
(what a JAX release that changed a primitive would do: jax.vmap's numbers)."""

import jax
import jax.numpy as jnp
import numpy as np

import jaxplat as jp
from jaxplat import search
from jaxplat.model import replace
from jaxplat.search import grid_map, gridmap, study_from_dict, vmap_last


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


def _grid_vs_vmap():
    """(grid_map of `_two`, jax.vmap of it) over a 5 x 3 grid, both [15, ...] per key."""
    a, b = jnp.linspace(-2.0, 3.0, 5), jnp.linspace(0.5, 1.5, 3)
    aa, bb = (x.reshape(-1) for x in jnp.meshgrid(a, b, indexing="ij"))
    want = jax.vmap(_two, in_axes=(None, 0, 0))(jnp.float32(0.5), aa, bb)
    got = jax.jit(grid_map(_two, in_axes=(None, -1, -1), ndim=2))(jnp.float32(0.5), a[:, None], b[None, :])
    return {k: np.moveaxis(np.asarray(v).reshape(v.shape[:-2] + (15,)), -1, 0) for k, v in got.items()}, want


def test_every_rule_off_gives_vmaps_numbers(monkeypatch):
    """No primitive with a rule (as if a JAX release had changed them all):
    each equation on the grid goes to jax.vmap of that primitive alone, and
    the numbers are jax.vmap's."""
    monkeypatch.setattr(gridmap, "_RULE_PARAMS", {})
    gridmap.FALLBACKS.clear()
    got, want = _grid_vs_vmap()
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-6, err_msg=k)
    assert {"mul", "reduce_sum", "broadcast_in_dim", "concatenate", "gather", "cumsum"} <= set(gridmap.FALLBACKS)


def test_a_parameter_the_rule_does_not_know_falls_back(monkeypatch):
    """A parameter a rule does not know (what a newer JAX adding one to
    reduce_sum or cumsum would look like: here the rules' own `axes`/`axis`
    taken off their lists) sends those equations, and only those, to
    jax.vmap: jax.vmap's numbers."""
    monkeypatch.setitem(gridmap._RULE_PARAMS, "reduce_sum", frozenset({"out_sharding"}))
    monkeypatch.setitem(gridmap._RULE_PARAMS, "cumsum", frozenset({"reverse"}))
    gridmap.FALLBACKS.clear()
    got, want = _grid_vs_vmap()
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-6, err_msg=k)
    assert gridmap.FALLBACKS["reduce_sum"] > 0 and gridmap.FALLBACKS["cumsum"] > 0
    assert not {"mul", "broadcast_in_dim", "concatenate"} & set(gridmap.FALLBACKS)


def _assert_points_equal(got, want, moved):
    """The engine's point outputs (dict of arrays) from grid_map (points last, `moved` to the front) and jax.vmap."""
    for k in want:
        g = moved(np.asarray(got[k]))
        if want[k].dtype == bool:
            np.testing.assert_array_equal(g, want[k], err_msg=k)
        else:
            np.testing.assert_allclose(g, want[k], rtol=2e-6, err_msg=k)


STUDY = dict(name="b", models=["llama-3.1-8b"], workloads=["chatbot", "qa"], hardware="h100-sxm",
             axes=dict(tp=[1, 2, 4], batch={"pow2": [1, 8]}, hbm_bandwidth={"log": [1e12, 8e12], "count": 3},
                       flops=[2e14, 1e15, 4e15, 8e15]),
             constraints=dict(max_chips=4, ttft="workload", tpot=0.02),
             objective={"maximize": "throughput_per_chip"}, pareto=["tpot", "throughput_per_chip"])


def test_engine_point_over_its_hardware_grid_equals_vmap():
    """The function the engine maps over a block's hardware grid (a
    configuration's flags, score and Pareto keys, its operator tables built
    apart or not), by grid_map over a 3 x 4 grid and by jax.vmap."""
    eng = search.Engine(study_from_dict(STUDY))
    ov = [jnp.float32(a.values[j]) for a, j in zip(eng.st.outer, (1, 2, 1))]  # qa, tp 4, batch 8
    hbm, fl = (np.asarray(a.values, np.float32) for a in eng.st.inner)
    grid = [jnp.asarray(hbm)[:, None], jnp.asarray(fl)[None, :]]
    flat = [jnp.asarray(x.reshape(-1)) for x in np.meshgrid(hbm, fl, indexing="ij")]
    for tables in (None, eng._tables_of(ov)):
        def point(ov, iv, t):
            return eng._point(ov, iv, tables=t)
        got = jax.jit(grid_map(point, in_axes=(None, -1, None), ndim=2))(ov, grid, tables)
        want = jax.jit(jax.vmap(point, in_axes=(None, 0, None)))(ov, flat, tables)
        _assert_points_equal(got, want, lambda g: np.moveaxis(g.reshape(g.shape[:-2] + (12,)), -1, 0))
        assert len(np.unique(np.asarray(want["score"]))) == 12  # every hardware point its own number


def test_engine_point_over_parallel_and_workload_axes_equals_vmap():
    """A study without hardware axes: its trailing parallel and workload
    axes as a grid (engine.layout, grid_map) and its outer points with the
    batch axis last (vmap_last, regrid=False), against jax.vmap."""
    st = study_from_dict({**STUDY, "axes": {"tp": [1, 2, 4], "batch": {"pow2": [1, 8]}}})
    eng = search.Engine(st)
    assert [a.name for a in eng.st.inner] == ["tp", "batch"]
    tp, batch = (np.asarray(a.values, np.float32) for a in eng.st.inner)
    ov = [jnp.float32(1)]  # workload qa
    got = jax.jit(grid_map(eng._point, in_axes=(None, -1), ndim=2))(
        ov, [jnp.asarray(tp)[:, None], jnp.asarray(batch)[None, :]])
    flat = [jnp.asarray(x.reshape(-1)) for x in np.meshgrid(tp, batch, indexing="ij")]
    want = jax.jit(jax.vmap(eng._point, in_axes=(None, 0)))(ov, flat)
    n = len(tp) * len(batch)
    _assert_points_equal(got, want, lambda g: np.moveaxis(g.reshape(g.shape[:-2] + (n,)), -1, 0))

    whole = search.Engine(st, regrid=False)
    _, ovs = whole._outer_values(jnp.arange(whole.grid.n_outer, dtype=jnp.int32))
    got = jax.jit(vmap_last(lambda v: whole._point(v, []), in_axes=(-1,)))(ovs)
    want = jax.jit(jax.vmap(lambda v: whole._point(v, [])))(ovs)
    _assert_points_equal(got, want, lambda g: np.moveaxis(g, -1, 0))
