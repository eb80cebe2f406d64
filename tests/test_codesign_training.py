"""Training co-design (issue 38 item 5): `jaxplat codesign` with a training
objective finds, by gradient, a chip within 1% of an exhaustive grid that
this test computes by a slow Python loop over `cost.training.train_step`
(not through codesign's own exact table or grid); the study file's bad keys
give one-line errors naming them.

The genz profile keeps the programs small to compile (the same training
step; its collectives are one formula)."""

import dataclasses
import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxplat.cost.training import TrainOptions, train_step
from jaxplat.cost.training_memory import checks
from jaxplat.design import codesign as cd
from jaxplat.design.codesign_study import problem_from_dict
from jaxplat.model import Options, Parallel, replace
from jaxplat.specs import SpecError

STUDY = {
    "task": "train", "model": "llama-3.1-8b", "technology": "n5", "hbm": "hbm3e", "base": "h100-sxm",
    "profile": "genz", "objective": "train_cost_usd",
    "train": {"seq": 4096, "global_batch": 256, "dtype": "bf16", "tokens": 1.0e12},
    "params": {"flops": [1.0e14, 2.0e15], "sram": 5.0e7, "hbm_stacks": [2, 6], "link_bw": [5.0e10, 2.0e12]},
    "candidates": {"chips": [32, 64], "tp": [2, 4], "pp": [1, 2], "recompute": ["none", "full"]},
}
# (chips, tp, pp, recompute), in the study's order
CANDS = list(itertools.product([32.0, 64.0], [2.0, 4.0], [1.0, 2.0], [0.0, 2.0]))


@pytest.fixture(scope="module")
def prob():
    return problem_from_dict(STUDY)[0]


def _oracle(prob, deadline=math.inf, flops_points=48, link_points=32):
    """Cheapest (USD, x, (chips, tp, pp, recompute)) over a grid of chips x
    the study's ways to train: a Python loop over FLOP/s and HBM stacks, one
    `train_step` call each (vmapped over the link values and the ways),
    feasibility checked here: chip area and TDP within the technology's
    limits, every training check, memory fit, the deadline (s)."""
    model, twl0 = prob.model, prob.workload
    opts = TrainOptions(options=Options(profile="genz"))
    chips, tp, pp, rec = (jnp.array(v, jnp.float32) for v in zip(*CANDS))
    one = jnp.ones_like(tp)
    par = Parallel(tp=tp, pp=pp, vp=one, cp=one, ep=one, dp=chips / (tp * pp))
    twl = replace(twl0, micro_batch=1.0, zero=0.0, recompute=rec)
    par, twl = jax.tree.map(lambda v: jnp.broadcast_to(v, tp.shape), (par, twl))
    links = np.geomspace(5e10, 2e12, link_points)

    def ways(x):
        hw = cd.chip_hardware(x, prob.tech, prob.base)
        m = jax.vmap(lambda p, w: train_step(model, hw, p, w, opts))(par, twl)
        ok = jax.vmap(lambda p, w: jnp.stack(list(checks(model, p, w).values())).all())(par, twl)
        area, tdp, _ = cd.chip_numbers(x, prob.tech)
        feas = ok & m.fits & (area <= prob.tech.reticle) & (tdp <= prob.tech.power_limit) & (m.train_time_s <= deadline)
        return jnp.where(feas, m.train_cost_usd, jnp.inf)

    per_link = jax.jit(jax.vmap(ways))
    best = (math.inf, None, None)
    for f in np.geomspace(1e14, 2e15, flops_points):
        for s in range(2, 7):
            xs = jnp.array([[f, 5e7, s, link] for link in links], jnp.float32)
            cost = np.asarray(per_link(xs))
            j, i = np.unravel_index(np.argmin(cost), cost.shape)
            if cost[j, i] < best[0]:
                best = (float(cost[j, i]), np.asarray(xs[j]), CANDS[i])
    return best


def test_training_codesign_matches_exhaustive_train_step_grid(prob):
    """The gradient search lands within 1% of the slow loop's best (it may
    beat it: its numbers are continuous, the loop's a grid), and its answer
    is exactly what train_step says of that chip and way to train."""
    assert prob.task == "train" and int(prob.valid.sum()) == len(CANDS)
    want, x_grid, way = _oracle(prob)
    assert math.isfinite(want)
    res = cd.codesign(prob, starts=4, steps=80)
    assert res.objective <= want * 1.01, (res.objective, want, res.x, x_grid, way)
    assert res.objective >= want * 0.97  # the grid is fine enough that nothing is far below it
    hw = cd.chip_hardware(jnp.asarray(res.x), prob.tech, prob.base)
    c = {k: float(v[res.candidate]) for k, v in prob.cand.items()}
    assert (c["chips"], c["tp"], c["pp"], c["recompute"]) == way or res.objective < want
    par = Parallel(tp=c["tp"], pp=c["pp"], dp=c["chips"] / (c["tp"] * c["pp"]))
    twl = replace(prob.workload, recompute=c["recompute"])
    m = train_step(prob.model, hw, par, twl, TrainOptions(options=Options(profile="genz")))
    assert bool(m.feasible) and float(m.train_cost_usd) == pytest.approx(res.objective, rel=1e-5)


def test_training_deadline_is_a_constraint(prob):
    """A deadline below the cheapest chip's days makes codesign pick a faster
    (dearer) design that meets it, within 1% of the slow loop's best under
    the same deadline: exact re-check of what it returns."""
    free = cd.codesign(prob, starts=4, steps=80)
    hw = cd.design_hardware(jnp.asarray(free.x), prob)
    m, _ = cd.candidate_metrics(prob, hw, *cd._candidate(prob, free.candidate), prob.exact)
    limit = 0.6 * float(m.train_time_s)
    tight = dataclasses.replace(prob, deadline=jnp.float32(limit))
    res = cd.codesign(tight, starts=4, steps=80)
    hw = cd.design_hardware(jnp.asarray(res.x), tight)
    m, _ = cd.candidate_metrics(tight, hw, *cd._candidate(tight, res.candidate), tight.exact)
    assert float(m.train_time_s) <= limit and bool(m.feasible)
    assert res.objective > free.objective
    assert res.objective <= _oracle(prob, deadline=limit)[0] * 1.01


BAD = (
    ({"train": {"seq": 4096, "global_batch": 256, "tokens": 1e12, "dtype": "fp16"}}, "train.dtype"),
    ({"train": {"seq": 4096, "global_batch": 256, "tokens": 1e12, "seqq": 1}}, "seqq"),
    ({"train": {"seq": 4096, "global_batch": 256}}, "tokens"),
    ({"train": {"seq": 4096, "global_batch": 256, "tokens": 1e12, "max_days": -3}}, "train.max_days"),
    ({"objective": "cost_per_mtok"}, "objective"),
    ({"task": "serve"}, "task"),
    ({"candidates": {"tp": [2]}}, "chips"),
    ({"candidates": {"chips": [64], "recompute": ["some"]}}, "candidates.recompute"),
    ({"candidates": {"chips": [64], "zero": [4]}}, "candidates.zero"),
    ({"candidates": {"chips": [64], "tp": [1.5]}}, "candidates.tp"),
    ({"candidates": {"chips": [64], "batch": [8]}}, "batch"),
    ({"candidates": {"chips": [63], "tp": [2]}}, "no candidate"),
    ({"workload": "chatbot"}, "workload"),
    ({"train": [4096]}, "train"),
    ({"train": {"seq": 4096.5, "global_batch": 256, "tokens": 1e12}}, "train.seq"),
    ({"train": {"seq": 4096, "global_batch": 256, "tokens": 1e12, "moe_dispatcher": "deepep"}},
     "train.moe_dispatcher 'deepep' is not one of alltoall, fused"),
    ({"train": {"seq": 4096, "global_batch": 256, "tokens": 1e12, "sp": "dtensor"}},
     "train.sp 'dtensor' is not one of regather, saved, off"),
    ({"candidates": {"chips": [], "tp": [2]}}, "candidates.chips"),
    ({"candidates": {"chips": list(range(1, 65)), "tp": list(range(1, 65)), "pp": [1, 2]}}, "candidates"),
)


@pytest.mark.parametrize("bad,word", BAD)
def test_bad_training_study_is_one_line(bad, word):
    with pytest.raises(SpecError) as e:
        problem_from_dict({**STUDY, **bad}, src="study.yaml")
    msg = str(e.value)
    assert word in msg and "\n" not in msg and msg.startswith("study.yaml")


def test_a_training_codesign_takes_its_moe_dispatcher():
    p, _ = problem_from_dict({**STUDY, "train": {"seq": 4096, "global_batch": 256, "tokens": 1e12,
                                                 "moe_dispatcher": "fused"}})
    assert p.moe_dispatcher == "fused"
    assert problem_from_dict(STUDY)[0].moe_dispatcher == "alltoall"
    p, _ = problem_from_dict({**STUDY, "train": {"seq": 4096, "global_batch": 256, "tokens": 1e12, "sp": "saved"}})
    assert p.sp == "saved" and problem_from_dict(STUDY)[0].sp == "regather"


def test_objective_name_implies_training():
    """`objective: train_days` without `task:` is a training co-design."""
    d = {k: v for k, v in STUDY.items() if k != "task"}
    p, run = problem_from_dict({**d, "objective": "train_days"})
    assert p.task == "train" and p.objective == "train_days" and run["dtype"] == "bf16"


def test_codesign_command_on_a_training_study(tmp_path):
    """`jaxplat codesign STUDY --json` on a training study: the objective is
    the cost to train of the written chip on the way it names, the way as
    `jaxplat train`'s flags, the deadline among the constraints, the
    sensitivities of the searched numbers by autodiff beside finite
    differences."""
    import contextlib
    import io
    import json

    import yaml

    from jaxplat.cli import main

    path = tmp_path / "train-chip.yaml"
    path.write_text(yaml.safe_dump({**STUDY, "train": {**STUDY["train"], "max_days": 1000}}))
    argv = ["codesign", str(path), "--out", str(tmp_path / "out"), "--starts", "4", "--steps", "80", "--no-grid",
            "--json"]
    with contextlib.redirect_stdout(io.StringIO()) as out:
        assert main(argv) == 0
    s = json.loads(out.getvalue())
    assert s["objective_name"] == "train_cost_usd" and s["objective_unit"] == "USD to train the tokens"
    assert s["metrics"]["train_cost_usd"] == pytest.approx(s["objective"], rel=1e-5)
    assert s["slo"] == {"max_train_s": pytest.approx(1000 * 86400.0)}
    assert s["metrics"]["train_time_s"] <= 1000 * 86400.0
    cmd = s["train"]["command"]
    assert cmd.startswith("jaxplat train --model llama-3.1-8b --hardware ") and "--recompute " in cmd
    assert "profile genz" in cmd  # this study's profile is not a flag of jaxplat train: the command says so
    p = s["parallel"]
    assert s["train"]["dp"] == p["chips"] / (p["tp"] * p["pp"] * p["cp"])
    sens = s["sensitivities"]
    assert set(sens) == {"flops", "sram", "hbm_stacks", "link_bw"}
    assert sens["flops"]["step_time_s"] < 0  # more FLOP/s, shorter steps


def test_a_training_codesign_folds_the_experts_at_each_candidates_etp():
    """candidates.etp (jaxplat train --etp): tp 2, ep 2, etp 1 or 2 on a MoE.
    etp 1 splits the experts over the two tp ranks too (Parallel.moe_ep 2,
    the table's ep 2/2 = 1); etp 2 is expert tensor parallelism at tp
    (moe_ep 1, ep 2); etp 3 does not divide tp and is no candidate; without
    the key every candidate keeps etp = tp."""
    from jaxplat.design import codesign_train as ct

    study = {**STUDY, "model": "qwen3-30b-a3b",
             "candidates": {"chips": [8], "tp": [2], "ep": [2], "etp": [1, 2, 3]}}
    p, _ = problem_from_dict(study)
    par, _ = ct.candidate(p.cand, p.workload)
    np.testing.assert_allclose(np.asarray(par.moe_ep)[:3], [2, 1, 2 / 3], rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(par.ep)[:2], [1, 2])
    assert list(ct.validity(p.model, p.workload, p.cand)[:3]) == [True, True, False]
    assert [ct.describe(p.cand, i)["etp"] for i in range(2)] == [1.0, 2.0]
    plain, _ = problem_from_dict({**study, "candidates": {"chips": [8], "tp": [2], "ep": [2]}})
    assert ct.describe(plain.cand, 0)["etp"] == 2.0
