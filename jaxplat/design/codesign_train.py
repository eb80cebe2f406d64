"""Training co-design: the chip (and network link) that trains a model cheapest.

The same co-design as inference (jaxplat.design.codesign: log-space Adam in
a box, smooth minimum over the candidates, rounding, exact re-check, grid
oracle), with a training step in place of a serving deployment: every
candidate is a way to train the run (chips, tp, pp, vp, cp, ep, etp, micro-batch,
recomputation, ZeRO stage: the flags of `jaxplat train`; dp = chips /
(tp·pp·cp)), costed by the one training cost model
(`jaxplat.cost.training.train_step`, smooth mode for the gradient, exact for
the re-check and the grid), and the best candidate of each chip is taken by
the smooth minimum (exactly, in the re-check and the grid).

Objectives (TRAIN_OBJECTIVES), to train `tokens` tokens:
  train_cost_usd  dollars: the job's time x (the chips' capex amortized
                  over their lifetime, chips x price / lifetime, plus the
                  facility energy, power x PUE x USD/J) — TrainMetrics
                  .train_cost_usd (jaxplat.cost.money.capex_per_s and
                  energy_cost_per_s). The designed chip's price is the
                  technology model's (codesign.chip_numbers).
  train_days      days of wall-clock time (TrainMetrics.train_time_s / 86,400).
Constraints: memory fits (activations, weights, gradients, optimizer states
per chip against the designed HBM), the study's capex budget (chips x price)
and deadline (days), the chip's reticle and power limit.
"""

import jax
import jax.numpy as jnp
import numpy as np

from jaxplat.cost.training import RECOMPUTE, TrainOptions, TrainWorkload, sp_options, train_step
from jaxplat.cost.training_memory import checks
from jaxplat.cost.training_moe import fold_experts, fold_valid
from jaxplat.model import Options, Parallel, replace
from jaxplat.search.train_study import chip_recipe

TRAIN_OBJECTIVES = ("train_cost_usd", "train_days")
# etp: the expert tensor-parallel degree (`jaxplat train --etp`); 0, the default, is tp (no folding)
TRAIN_CANDIDATE_KEYS = ("chips", "tp", "pp", "vp", "cp", "ep", "etp", "micro_batch", "recompute", "zero")
SECONDS_PER_DAY = 86400.0


def _etp(c):
    """The candidates' expert tensor-parallel degree (0: tp)."""
    return jnp.where(c["etp"] > 0, c["etp"], c["tp"])


def candidate(cand: dict, workload: TrainWorkload, i=None):
    """(Parallel, TrainWorkload) of candidate i, or of all ([C] leaves); the
    experts folded at the candidate's etp (`training_moe.fold_experts`)."""
    pick = (lambda v: v) if i is None else (lambda v: v[i])
    c = {k: pick(jnp.asarray(v)) for k, v in cand.items()}
    par = fold_experts(Parallel(tp=c["tp"], pp=c["pp"], vp=c["vp"], cp=c["cp"], ep=c["ep"],
                                dp=c["chips"] / (c["tp"] * c["pp"] * c["cp"])), _etp(c))
    twl = replace(workload, micro_batch=c["micro_batch"], recompute=c["recompute"], zero=c["zero"])
    shape = c["tp"].shape  # every leaf gets the candidate axis, so vmap(in_axes=0) applies
    return jax.tree.map(lambda v: jnp.broadcast_to(v, shape), (par, twl))


def train_options(options: Options, schedule: str, moe_dispatcher: str = "alltoall",
                  sp: str = "regather") -> TrainOptions:
    """The static options of the training step (`sp`: how tensor parallelism
    runs, SP_MODES; Megatron's sequence parallelism by default)."""
    return TrainOptions(options=options, schedule=schedule, moe_dispatcher=moe_dispatcher, **sp_options(sp))


def metrics(model, hw, par, twl, options: Options, schedule: str, sharpness, moe_dispatcher: str = "alltoall",
            sp: str = "regather"):
    """(TrainMetrics, memory fill = memory per chip / capacity) of one
    candidate on the chip `hw` (the chip generation's FP8 recipe)."""
    m = train_step(model, hw, par, chip_recipe(twl, hw), train_options(options, schedule, moe_dispatcher, sp),
                   sharpness)
    return m, m.memory_bytes / jnp.maximum(m.capacity_bytes, 1.0)


def objective_value(m, objective: str):
    """USD to train the tokens, or days."""
    if objective == "train_cost_usd":
        return m.train_cost_usd
    return m.train_time_s / SECONDS_PER_DAY


def penalty(m, fill, hw, budget, deadline, k, hinge, log):
    """[C] sum of smooth hinges: memory fill, capex budget, deadline (s)."""
    return (hinge(log(fill), k) + hinge(log(m.chips * hw.cost.price / jnp.minimum(budget, 1e30)), k)
            + hinge(log(m.train_time_s / jnp.minimum(deadline, 1e30)), k))


def meets(m, hw, budget, deadline):
    """[C] bool: exactly feasible (checks, memory), within budget and deadline."""
    return m.feasible & (m.chips * hw.cost.price <= budget) & (m.train_time_s <= deadline)


def validity(model, workload: TrainWorkload, cand: dict) -> np.ndarray:
    """[C] bool: every check of training_memory.checks (whole degrees, tp
    divides the heads, ep the experts and dp, the batch splits into
    micro-batches, pp·vp <= layers, ...) holds and etp folds the experts
    (`training_moe.fold_valid`), evaluated on the host."""
    par, twl = candidate(cand, workload)
    ok = jax.vmap(lambda p, w: jnp.stack(list(checks(model, p, w).values())).all())(par, twl)
    c = {k: jnp.asarray(v) for k, v in cand.items()}
    folds = fold_valid(Parallel(tp=c["tp"], ep=c["ep"]), _etp(c)) | (model.experts == 0)
    return np.asarray(ok & folds)


def describe(cand: dict, i: int) -> dict:
    """Candidate i as `jaxplat train`'s flags (dp derived; recompute by name)."""
    c = {k: float(v[i]) for k, v in cand.items()}
    c["dp"] = c["chips"] / (c["tp"] * c["pp"] * c["cp"])
    c["recompute"] = RECOMPUTE[round(c["recompute"])]
    c["etp"] = c["etp"] or c["tp"]
    return c


__all__ = ["TRAIN_CANDIDATE_KEYS", "TRAIN_OBJECTIVES", "candidate", "describe", "meets", "metrics", "objective_value",
           "penalty", "train_options", "validity"]
