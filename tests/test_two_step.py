"""Operator tables, then pricing (issue 39, item 9): `cost.operator_tables`
built once and priced by `evaluate(..., tables=...)` over hardware numbers
give the numbers of evaluating each hardware point from scratch, and no
hardware axis of a study changes the tables (what lets the sweep engine
build them once per outer point: search.Engine.compile)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxplat as jp
from jaxplat.cost import operator_tables
from jaxplat.search.served import served_point, served_tables
from jaxplat.search.study import AXIS_KINDS
from jaxplat.search.train_study import study_from_dict

FIELDS = ("ttft", "tpot", "throughput", "energy_per_token_j", "memory_bytes", "comm_time")


@pytest.fixture(scope="module")
def setup():
    return jp.load_model("llama-3.1-70b"), jp.load_hardware("h200-sxm"), jp.load_workload("chatbot")


def test_tables_priced_over_hardware_equal_each_point_from_scratch(setup):
    """Tables of the base chip, priced with jax.vmap over random bandwidths,
    link bandwidths and SRAM sizes, against a Python loop evaluating each
    point with its own tables (jitted `evaluate`, tables=None)."""
    model, hw, wl = setup
    par = jp.Parallel(tp=4, pp=2)
    rng = np.random.default_rng(3)

    def logu(lo, hi):
        return np.exp(rng.uniform(np.log(lo), np.log(hi), 5)).astype(np.float32)
    bw, link, sram = logu(1e12, 2e13), logu(5e10, 2e12), logu(1e7, 1e9)

    def chip(b, k, s):
        return jp.replace(hw, mem_bw=hw.mem_bw.at[0].set(b), net_bw=hw.net_bw.at[0].set(k), sram_size=s)
    tables = operator_tables(model, hw, par, wl, jp.Options())
    priced = jax.jit(jax.vmap(lambda b, k, s: jp.evaluate(model, chip(b, k, s), par, wl, jp.Options(),
                                                          tables=tables)))(bw, link, sram)
    for j in range(len(bw)):
        want = jp.evaluate(model, chip(bw[j], link[j], sram[j]), par, wl)
        for f in FIELDS:
            np.testing.assert_allclose(getattr(priced, f)[j], getattr(want, f), rtol=2e-6, err_msg=f)
    # The points differ, so the pricing did read the hardware.
    assert len(set(np.asarray(priced.ttft).round(9))) == len(bw)


def test_no_hardware_axis_changes_the_tables(setup):
    """Every hardware axis a study sweeps leaves the operator tables (and the
    serving reservation's) as the base chip's: the engine builds them before
    the hardware axes' edits. An axis that moved them (a GEMM dtype, say)
    would fail here."""
    model, hw, wl = setup
    par = jp.Parallel(tp=2, ep=2)
    build = jax.jit(lambda h: jax.tree.leaves(served_tables(model, h, par, wl, jp.Options())))
    base = build(hw)
    names = [k for k, v in AXIS_KINDS.items() if v.group == "hardware"]
    assert {"flops", "hbm_bandwidth", "sram_size", "link_bandwidth", "clock"} <= set(names)
    for name in names:
        for v in (0.25, 3.0, 7e11):
            got = build(AXIS_KINDS[name].setter(hw, jnp.float32(v)))
            assert len(got) == len(base)
            for g, b in zip(got, base):
                np.testing.assert_array_equal(g, b, err_msg=f"{name}={v}")


@pytest.mark.parametrize("profile", ["default", "genz"])
def test_served_point_with_tables_equals_without(setup, profile):
    """Step 2 on step 1's tables (the engine's hoisted path) against the
    one-step call, for a profile with a serving model (two pairs of tables)
    and GenZ's (one pair)."""
    model, hw, wl = setup
    st = study_from_dict({"name": "t", "models": ["llama-3.1-70b"], "workloads": ["chatbot"], "hardware": "h200-sxm",
                          "options": {"profile": profile}, "axes": {"tp": [2, 4]},
                          "objective": {"minimize": "tpot"}, "pareto": ["tpot", "throughput_per_chip"]})
    par = jp.Parallel(tp=4)
    tables = served_tables(model, hw, par, wl, st.options)
    assert (tables[1] == ()) == (profile == "genz")
    fast = jp.replace(hw, mem_bw=hw.mem_bw * 1.7)
    one = jax.jit(lambda h: served_point(model, h, par, wl, None, st))(fast)
    two = jax.jit(lambda h, t: served_point(model, h, par, wl, None, st, t))(fast, tables)
    for f in FIELDS:
        np.testing.assert_allclose(getattr(two[0], f), getattr(one[0], f), rtol=1e-6, err_msg=f)
    assert bool(two[1]) == bool(one[1])
    for k in one[2]:
        assert bool(two[2][k]) == bool(one[2][k]), k


def _equations(jaxpr) -> int:
    """Equations of a jaxpr, those of the jaxprs its equations call included."""
    n = 0
    for e in jaxpr.eqns:
        n += 1
        for p in e.params.values():
            sub = getattr(p, "jaxpr", None)
            n += _equations(sub) if hasattr(sub, "eqns") else 0
    return n


def test_pricing_given_tables_builds_none_of_them(setup):
    """`evaluate` with its tables given traces exactly the equations of
    `evaluate` less those of `operator_tables`: step 2 rebuilds nothing
    (the sweep's step program holds only the pricing)."""
    model, hw, wl = setup
    par, opts = jp.Parallel(tp=2), jp.Options()
    whole = _equations(jax.make_jaxpr(lambda h: jp.evaluate(model, h, par, wl, opts).tpot)(hw).jaxpr)
    tables = operator_tables(model, hw, par, wl, opts)
    priced = _equations(jax.make_jaxpr(lambda h, t: jp.evaluate(model, h, par, wl, opts, tables=t).tpot)(
        hw, tables).jaxpr)
    built = _equations(jax.make_jaxpr(lambda h: operator_tables(model, h, par, wl, opts))(hw).jaxpr)
    assert built > 100 and priced == whole - built
