"""Co-design: gradients against finite differences, smooth -> exact, a known
optimum, feasibility of what codesign returns, and the written chip spec.

Problems use the genz profile: the same code paths as the default profile,
with far smaller programs to compile (its collectives are one formula); the
loss gradient is checked in the default profile."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxplat as jp
from jaxplat.cli.codesign import chip_spec
from jaxplat.design import codesign as cd
from jaxplat.design.codesign_study import problem_from_dict
from jaxplat.model import hardware_from_dict, load_software
from jaxplat.specs import SpecError

STUDY = {
    "model": "llama-2-7b", "workload": "chatbot", "technology": "n5", "hbm": "hbm3e", "base": "h100-sxm",
    "profile": "genz", "objective": "cost_per_mtok",
    "params": {"flops": [1e14, 1e15], "sram": [8e6, 1.28e8], "hbm_stacks": [1, 8], "link_bw": [5e10, 1e12]},
    "candidates": {"tp": [1, 2], "batch": [1, 4]},
}


STEPS = 80  # one scan length and 4 starts everywhere: the optimizer compiles once for the file


@pytest.fixture(scope="module")
def prob():
    return problem_from_dict(STUDY)[0]


def _fd_grad(f, z, h=1e-2):
    """Central differences of a scalar function of a [P] vector."""
    out = []
    for i in range(z.shape[0]):
        e = jnp.zeros_like(z).at[i].set(h)
        out.append((f(z + e) - f(z - e)) / (2 * h))
    return np.asarray(out)


def test_loss_gradient_matches_finite_differences():
    """The co-design loss in the default profile (memory hierarchy,
    hierarchical collectives, energy and cost in smooth mode) against
    central differences; SRAM size reaches it through the memory placement.
    tp 2 only, so that the link is on the path of every candidate (with tp 1
    among them the loss may pick a split that sends nothing).
    (The derivatives of `evaluate` itself, both profiles: test_sensitivities.)"""
    prob = problem_from_dict({**STUDY, "profile": "default", "candidates": {"tp": [2], "batch": [1, 4]}})[0]
    z = jnp.log(jnp.array([4e14, 3e7, 3.3, 3e11], jnp.float32))
    vg = jax.jit(jax.value_and_grad(lambda z: cd.loss_fn(z, prob, 0.3, 20.0, 8.0, 10.0)))
    g = np.asarray(vg(z)[1])
    fd = _fd_grad(lambda z: vg(z)[0], z)
    assert np.all(np.isfinite(g)) and np.all(np.abs(g) > 1e-4)  # every chip number matters
    # Central differences at h = 1e-2 are within 2% here; float32 noise in them is ~1e-5.
    np.testing.assert_allclose(g, fd, rtol=0.03, atol=2e-5)


def test_elasticities_match_finite_differences():
    model, hw = jp.load_model("llama-2-7b"), jp.load_hardware("h100-sxm")
    wl = jp.load_workload("chatbot")
    labels, metrics, grad, fd = cd.elasticities(model, hw, jp.Parallel(tp=2), wl, jp.Options(profile="genz"))
    assert "memory.bandwidth[0]" in labels and "chip.flops[bf16]" in labels
    np.testing.assert_allclose(grad, fd, atol=2e-2)
    i, j = labels.index("memory.bandwidth[0]"), metrics.index("tpot")
    assert -1.0 <= grad[i, j] < -0.5  # batch-1 decode is mostly memory bound
    k = metrics.index("cost_per_mtok_usd")
    assert grad[labels.index("cost.price"), k] > 0.5  # capex dominates TCO


def test_smooth_mode_tends_to_exact():
    model, hw = jp.load_model("llama-2-7b"), jp.load_hardware("h100-sxm")
    wl, par = jp.load_workload("chatbot"), jp.Parallel(tp=2)
    exact = jp.evaluate(model, hw, par, wl, jp.Options(profile="genz"))
    errs = []
    for p in (4.0, 30.0, 1000.0):
        sm = jp.evaluate(model, hw, par, wl, jp.Options(profile="genz", smooth=True), p)
        errs.append(max(abs(float(getattr(sm, k)) / float(getattr(exact, k)) - 1)
                        for k in ("ttft", "tpot", "cost_per_mtok_usd", "energy_per_token_j")))
    # non-increasing: far from every ridge, p = 30 already rounds to the exact value in float32
    assert errs[0] > errs[1] >= errs[2] and errs[2] < 2e-3 and errs[0] > 0


def _convex(z, shift, tau, k, p, w):
    f = (z[0] - 1.0) ** 2 + (z[1] + 2.0) ** 2 + (z[2] - 0.2) ** 2
    return -tau * jax.nn.logsumexp(-jnp.stack([f, f + shift]) / tau)


def test_optimizer_finds_known_optimum_of_convex_case():
    # Convex in z: (z0 - 1)² + (z1 + 2)² + (z2 - 0.2)², box [-1, 0.5]³, and a second "candidate"
    # 0.5 worse everywhere (the smooth minimum must settle on the first). Optimum (0.5, -1, 0.2).
    z, traj = cd.optimize_fn(_convex, jnp.float32(0.5), -np.ones(3), 0.5 * np.ones(3), starts=4, steps=200)
    np.testing.assert_allclose(z, np.tile([0.5, -1.0, 0.2], (4, 1)), atol=2e-3)
    assert traj["loss"].shape == (200, 4) and traj["loss"][-1].max() < traj["loss"][0].min()


def _one_knob(prob, budget):
    """Only the HBM stack count is free, one candidate, a capex budget."""
    lo, hi = np.array([5e14, 8e6, 1, 4e11], np.float32), np.array([5e14, 8e6, 8, 4e11], np.float32)
    valid = np.arange(len(prob.valid)) == 0  # the first candidate only; same shapes as `prob`: no recompile
    return cd.Problem(model=prob.model, workload=prob.workload, base=prob.base, tech=prob.tech, lo=lo, hi=hi,
                      cand=prob.cand, valid=valid, budget=jnp.float32(budget), objective="cost_per_mtok",
                      profile="genz")


@pytest.fixture(scope="module")
def one_knob(prob):
    # Budget between the prices of 5 and 6 stacks; the known optimum is the best of the
    # affordable integer stack counts, found by brute force in exact mode.
    p = _one_knob(prob, math.inf)
    prices = [float(cd.chip_numbers(jnp.array([5e14, 8e6, s, 4e11]), p.tech)[2]) for s in (5, 6)]
    p = _one_knob(prob, sum(prices) / 2)
    xs = np.array([[5e14, 8e6, s, 4e11] for s in range(1, 9)], np.float32)
    obj = cd.exact_objectives(xs, p)[:, 0]
    assert np.isinf(obj[5:]).all() and np.isfinite(obj[:5]).any()
    return p, float(xs[np.argmin(obj), 2]), float(obj.min())


def test_codesign_finds_known_optimum_and_matches_grid(one_knob):
    p, want, best = one_knob
    res = cd.codesign(p, starts=4, steps=STEPS)
    assert float(res.x[2]) == want and res.objective == pytest.approx(best, rel=1e-6)
    grid = cd.grid_search(p, {}, progress=False)
    assert float(grid[0][2]) == want and grid[2] == pytest.approx(best, rel=1e-6)


def test_codesign_never_returns_infeasible(prob):
    res = cd.codesign(prob, starts=4, steps=STEPS)
    x = jnp.asarray(res.x)
    hw = cd.chip_hardware(x, prob.tech, prob.base)
    m = jp.evaluate(prob.model, hw, *cd._candidate(prob, res.candidate), prob.exact)
    area, tdp, _ = cd.chip_numbers(x, prob.tech)
    assert bool(m.feasible) and float(m.ttft) <= float(prob.workload.ttft_slo)
    assert float(m.tpot) <= float(prob.workload.tpot_slo)
    assert float(area) <= float(prob.tech.reticle) and float(tdp) <= float(prob.tech.power_limit)
    assert float(x[2]) == round(float(x[2]))
    assert res.objective == pytest.approx(float(m.cost_per_mtok_usd), rel=1e-6)
    # The written chip spec loads back to the same hardware, every leaf: among them the dtypes the
    # H100 has no units for (FP4 runs as FP8: chip.gemm_dtype) and the serving host's clock, which
    # the written file once dropped.
    # Loaded as `estimate --hardware` loads it: on the default software stack (its moe_speed is no chip number).
    back = hardware_from_dict(chip_spec(hw, x, prob, "h100-sxm", "chip"), software=load_software("graph-captured"))
    want, _ = jax.tree_util.tree_flatten_with_path(hw)
    got = jax.tree.leaves(back)
    assert len(got) == len(want)
    for (path, w), g in zip(want, got, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-6, err_msg=jax.tree_util.keystr(path))


def test_polish_gives_back_flops_the_winning_candidate_does_not_need(prob):
    """From the found chip with 1.3x its FLOP/s (dearer: the optimum sits
    where more FLOP/s costs more than it saves), the exact-mode polish
    comes back down: cheaper than its start, within 1% of the optimizer's
    answer, feasible, with fewer FLOP/s. It keeps only improvements; from the
    (polished) answer itself a second pass gains under 0.01%."""
    res = cd.codesign(prob, starts=4, steps=STEPS)
    x = np.asarray(res.x, np.float32).copy()
    x[0] = min(x[0] * 1.3, float(prob.hi[0]))
    o = cd.exact_objectives(x[None], prob)[0]
    c = int(np.argmin(o))
    start = float(o[c])
    assert math.isfinite(start) and start > res.objective * 1.01
    x2, c2, obj, n = cd.polish(x, c, start, prob)
    assert obj < start and obj <= res.objective * 1.01 and x2[0] < x[0] and n > 0
    assert float(cd.exact_objectives(np.asarray(x2)[None], prob)[0, c2]) == pytest.approx(obj, rel=1e-6)
    same = cd.polish(np.asarray(res.x, np.float32), res.candidate, res.objective, prob)
    assert res.objective * (1 - 1e-4) <= same[2] <= res.objective


def test_impossible_slo_raises(prob):
    p = dataclass_replace(prob, workload=jp.replace(prob.workload, tpot_slo=1e-6))
    with pytest.raises(SpecError, match="no feasible chip"):
        cd.codesign(p, starts=4, steps=STEPS)


def test_study_errors_are_one_line():
    for bad, word in (({"objective": "speed"}, "objective"), ({"params": {"flop": [1, 2]}}, "flop"),
                      ({"params": {"hbm_stacks": [1, 20]}}, "hbm_stacks"), ({"technology": "n1"}, "n1")):
        with pytest.raises(SpecError) as e:
            problem_from_dict({**STUDY, **bad})
        assert word in str(e.value) and "\n" not in str(e.value)


def dataclass_replace(obj, **kw):
    import dataclasses
    return dataclasses.replace(obj, **kw)


def test_round_starts_gives_integer_stacks(prob):
    xs = cd.round_starts(np.log([[4e14, 3e7, 3.4, 3e11]]), prob)
    assert set(np.unique(xs[:, 2])) == {3.0, 4.0}
    assert np.all(xs >= prob.lo) and np.all(xs <= prob.hi) and not math.isnan(xs.sum())


def test_grid_search_equals_exhaustive_exact_table(prob):
    """The grid oracle in chunks of 16 chips (the last one padded) finds the
    exhaustive minimum of the exact table over the same grid: the same chip
    and candidate."""
    points = {"flops": 5, "sram": 2, "link_bw": 4}
    x, c, obj, n = cd.grid_search(prob, points, chunk=16, progress=False)
    axes = cd.grid_axes(prob, points)
    xs = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, 4).astype(np.float32)
    table = cd.exact_objectives(xs, prob)
    i, want_c = np.unravel_index(np.argmin(table), table.shape)
    assert n == table.size and np.isfinite(obj)
    np.testing.assert_array_equal(x, xs[i])
    assert c == want_c and obj == pytest.approx(float(table[i, want_c]), rel=1e-6)
