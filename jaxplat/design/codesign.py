"""Co-design: optimize a chip's numbers with gradients, alongside parallelism.

The continuous design x = (bf16 FLOP/s, SRAM bytes, HBM stacks, scale-up
link bytes/s), or on a chip with systolic arrays (array rows, cols, cores,
SRAM per core, HBM stacks, link; jaxplat.design.spaces), lives in log
space, z = log x, inside a box from the study and the technology model.
`chip_hardware` turns x into a `Hardware` (area, price,
TDP and energy from `jaxplat.cost` / the technology spec), and the one cost
model (`jaxplat.evaluate`, smooth mode) scores it on every discrete candidate
(tp, pp, ep, dp, batch) at once: a vmap over a padded candidate list.

Loss of one candidate c (all terms in log units, so scale-free):
  L_c(z) = log objective + W · Σ hinge(log(value / limit))
with hinge(u) = softplus(k·u)/k for TTFT, TPOT, memory fit and budget, and
the candidates are merged with a smooth minimum -τ·logsumexp(-L_c/τ). The
chip's own limits (area <= reticle, TDP <= power limit) add W·hinge terms.
τ falls and k, the smooth-max sharpness p rise during the run (annealing),
so the loss tends to the exact constrained problem. Adam steps z and
`optax.projections.projection_box` puts it back in the box after each update.
Many random starts run at once (the whole step is vmapped) inside one
`lax.scan`.

At the end each start is rounded (integer HBM stacks, floor and ceil, and a
few slightly larger variants) and re-checked in exact mode on every
candidate; the best exactly feasible (chip, candidate) wins. If none is
feasible, `codesign` raises SpecError: it never returns an infeasible chip.

The oracle is a dense grid over the same box, evaluated in exact mode.
"""

import dataclasses
import functools
import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxplat.cost import DEFAULT_SHARPNESS, evaluate, money
from jaxplat.design import codesign_train as ct
from jaxplat.design import spaces
from jaxplat.design.sensitivity import (  # noqa: F401 (re-exported: codesign.elasticities etc.)
    ELASTIC_METRICS,
    _scaled,
    elasticities,
    elasticity_methods,
    hardware_numbers,
)
from jaxplat.model import (
    Hardware,
    Model,
    Options,
    Parallel,
    Technology,
    Workload,
    pytree_dataclass,
    replace,
    static,
)
from jaxplat.serving import engine_memory

PARAMS = ("flops", "sram", "hbm_stacks", "link_bw")
PARAM_UNITS = spaces.UNITS
OBJECTIVES = ("cost_per_mtok", "usd_per_tok_s", "joules_per_token")
CANDIDATE_KEYS = ("tp", "pp", "ep", "dp", "batch")
INVALID_LOSS = 1e3      # loss of a padded or non-dividing candidate (finite: no NaN in logsumexp)


@dataclasses.dataclass(frozen=True)
class Schedule:
    """Annealing: each value moves geometrically from start to end over the run.

    tau: smooth-min temperature (log-objective units). hinge: softplus
    sharpness k (per log unit). sharpness: p of the smooth roofline max.
    penalty: W, the weight of a constraint's log-violation. It must end
      well above any objective gain from a violation (an exterior penalty
      method): with W = 1000 and k = 3000 the optimum sits ~0.2% inside.
    lr: Adam step size in log space (cosine decay to lr_end).
    """

    tau: tuple = (0.3, 0.002)
    hinge: tuple = (20.0, 3000.0)
    sharpness: tuple = (8.0, 300.0)
    penalty: tuple = (10.0, 1000.0)
    lr: tuple = (0.08, 0.001)


@pytree_dataclass
class Problem:
    """Everything a co-design run needs: a pytree (so one compiled program
    serves every problem of the same shapes), objective and profile static.

    Attributes:
      model, workload: what is served (workload batch is replaced per candidate).
      base: the template chip: network levels beyond the scale-up link,
        efficiencies, TCO figures. Its memory level 0 must be HBM.
      tech: `Technology` (one node, one HBM generation).
      lo, hi: box of x in SI units (the space's order, spaces.SPACES);
        lo == hi fixes a number.
      cand: dict of [C] float32 arrays for CANDIDATE_KEYS; valid: [C] bool.
      objective: one of OBJECTIVES (or ct.TRAIN_OBJECTIVES when task is
        "train"). budget: max deployment capex in USD (inf: none).
      deadline: training only, max seconds to train the tokens (inf: none).
      profile: cost-model profile ('default' or 'genz').
      task: "infer" (workload: a serving `Workload`, cand: CANDIDATE_KEYS)
        or "train" (workload: a `TrainWorkload`, cand: ct.TRAIN_CANDIDATE_KEYS,
        costed by cost.training.train_step with pipeline `schedule`,
        `moe_dispatcher` and `sp` (cost.training.SP_MODES), as TrainOptions
        and `jaxplat train --sp` name them).
      space: the design variables, "chip" (PARAMS) or "array" (systolic
        array rows, cols, cores, SRAM per core, stacks, link; jaxplat.design.spaces).
    """

    model: Model
    workload: Workload
    base: Hardware
    tech: Technology
    lo: jax.Array
    hi: jax.Array
    cand: dict
    valid: jax.Array
    budget: jax.Array = dataclasses.field(default_factory=lambda: jnp.float32(jnp.inf))
    deadline: jax.Array = dataclasses.field(default_factory=lambda: jnp.float32(jnp.inf))
    objective: str = static("cost_per_mtok")
    profile: str = static("default")
    space: str = static("chip")
    task: str = static("infer")
    schedule: str = static("1f1b")
    moe_dispatcher: str = static("alltoall")
    sp: str = static("regather")

    @property
    def params(self) -> tuple:
        """Names of the design variables, in the order of x."""
        return spaces.SPACES[self.space]

    @property
    def exact(self) -> Options:
        return Options(profile=self.profile)

    @property
    def smooth(self) -> Options:
        return Options(profile=self.profile, smooth=True)


# ------------------------------------------------------------ the chip


def chip_numbers(x, tech: Technology, space: str = "chip", base: Hardware | None = None):
    """Area (mm²), TDP (W) and price (USD) of the design x (PARAMS order, or
    the order of `space` on the `base` chip)."""
    v = spaces.chip_vector(x, space, base)
    return money.chip_numbers(tech, v[0], v[1], v[2], v[3], cores=spaces.cores(x, space))


def chip_hardware(x, tech: Technology, base: Hardware, space: str = "chip") -> Hardware:
    """`Hardware` of the chip x = [4] (bf16 FLOP/s, SRAM bytes, HBM stacks,
    link bytes/s per direction), or of the design x of `space`, other numbers
    from `base`. Traced, smooth in x."""
    v = spaces.chip_vector(x, space, base)
    flops, sram, stacks, link = v[0], v[1], v[2], v[3]
    area, tdp, price = chip_numbers(x, tech, space, base)
    return replace(
        base, **spaces.array_fields(x, space), flops=flops * tech.flops_ratio, sram_size=sram,
        sram_bw=flops * tech.sram_bw_per_flops,
        mem_size=base.memory.size.at[0].set(stacks * tech.stack_bytes),
        mem_bw=base.memory.bandwidth.at[0].set(stacks * tech.stack_bw),
        net_bw=base.network.bandwidth.at[0].set(link),
        price=price, **money.technology_power(base, tech, area, tdp))


def design_hardware(x, prob: Problem) -> Hardware:
    """`chip_hardware` of the design x in the problem's space."""
    return chip_hardware(x, prob.tech, prob.base, prob.space)


def design_numbers(x, prob: Problem):
    """`chip_numbers` of the design x in the problem's space."""
    return chip_numbers(x, prob.tech, prob.space, prob.base)


def _candidate(prob: Problem, i=None):
    """(Parallel, Workload) of candidate i, or of all candidates ([C] leaves);
    a `TrainWorkload` in a training problem."""
    if prob.task == "train":
        return ct.candidate(prob.cand, prob.workload, i)
    pick = (lambda v: v) if i is None else (lambda v: v[i])
    c = {k: pick(jnp.asarray(v)) for k, v in prob.cand.items()}
    par = Parallel(tp=c["tp"], pp=c["pp"], ep=c["ep"], dp=c["dp"])
    wl = replace(prob.workload, batch=c["batch"])
    shape = c["tp"].shape  # every leaf gets the candidate axis, so vmap(in_axes=0) applies
    return jax.tree.map(lambda v: jnp.broadcast_to(v, shape), (par, wl))


def served_evaluate(model, hw, par, wl, options, sharpness=DEFAULT_SHARPNESS):
    """(`evaluate`'s metrics with memory as a serving engine holds the batch,
    fill): serving.engine_memory (the activations of one iteration of the
    engine's token budget, not of every prompt at once; fill <= 1 when it
    fits), as the sweep engine checks memory (search.engine.served_metrics)."""
    m = evaluate(model, hw, par, wl, options, sharpness)
    if options.profile != "default":  # GenZ's own footprint (it has no serving model)
        return m, m.memory_bytes / m.capacity_bytes
    return engine_memory(model, hw, par, wl, m, options, sharpness=sharpness)


def candidate_metrics(prob: Problem, hw: Hardware, par, wl, options: Options, sharpness=DEFAULT_SHARPNESS):
    """(metrics, memory fill) of one candidate on the chip `hw`: a serving
    deployment (`served_evaluate`: Metrics) or, in a training problem, a
    training step (`ct.metrics`: TrainMetrics)."""
    if prob.task == "train":
        return ct.metrics(prob.model, hw, par, wl, options, prob.schedule, sharpness, prob.moe_dispatcher, prob.sp)
    return served_evaluate(prob.model, hw, par, wl, options, sharpness)


def objective_value(m, hw: Hardware, objective: str):
    """The number to minimize, in its unit: USD per Mtok, USD per (token/s)
    of capex, J per token; USD or days to train (ct.TRAIN_OBJECTIVES)."""
    if objective in ct.TRAIN_OBJECTIVES:
        return ct.objective_value(m, objective)
    if objective == "cost_per_mtok":
        return m.cost_per_mtok_usd
    if objective == "usd_per_tok_s":
        return m.chips * hw.cost.price / jnp.maximum(m.throughput, 1e-30)
    return m.power_w / jnp.maximum(m.throughput, 1e-30)


# ------------------------------------------------------------ the loss


def _hinge(u, k):
    """Smooth hinge softplus(k·u)/k of a log-violation u (0 inside, u outside)."""
    return jax.nn.softplus(k * u) / k


def _log(v):
    return jnp.log(jnp.maximum(v, 1e-30))


def candidate_losses(z, prob: Problem, k, p, w):
    """[C] smooth losses of the chip exp(z) on every candidate, and its chip loss."""
    x = jnp.exp(z)
    hw = design_hardware(x, prob)
    par, wl = _candidate(prob)
    m, fill = jax.vmap(lambda pa, w: candidate_metrics(prob, hw, pa, w, prob.smooth, p))(par, wl)
    if prob.task == "train":
        pen = ct.penalty(m, fill, hw, prob.budget, prob.deadline, k, _hinge, _log)
    else:
        pen = (_hinge(_log(m.ttft / wl.ttft_slo), k) + _hinge(_log(m.tpot / wl.tpot_slo), k)
               + _hinge(_log(fill), k))
        pen = pen + _hinge(_log(m.chips * hw.cost.price / jnp.minimum(prob.budget, 1e30)), k)  # inf: no budget
    ok = jnp.asarray(prob.valid)
    loss = jnp.where(ok, _log(objective_value(m, hw, prob.objective)) + w * pen, INVALID_LOSS)
    area, tdp, _ = design_numbers(x, prob)
    chip_pen = _hinge(_log(area / prob.tech.reticle), k) + _hinge(_log(tdp / prob.tech.power_limit), k)
    return loss, w * chip_pen


def loss_fn(z, prob: Problem, tau, k, p, w):
    """Scalar smooth loss: smooth minimum over candidates + chip limits."""
    losses, chip_pen = candidate_losses(z, prob, k, p, w)
    return -tau * jax.nn.logsumexp(-losses / tau) + chip_pen


def _geom(pair, t):
    return pair[0] * (pair[1] / pair[0]) ** t


@functools.partial(jax.jit, static_argnames=("loss", "steps", "schedule"))
def _run(loss, args, z0, lo, hi, steps, schedule):
    """Compiled optimizer run: one `lax.scan` over the steps of a vmapped step."""
    lr = optax.cosine_decay_schedule(schedule.lr[0], steps, alpha=schedule.lr[1] / schedule.lr[0])
    opt = optax.adam(lr)

    def one_step(z, state, hyper):
        val, g = jax.value_and_grad(loss)(z, args, *hyper)
        g = jnp.where(jnp.isfinite(g), g, 0.0)  # belt and braces: a bad start must not poison the others
        upd, state = opt.update(g, state, z)
        z = optax.projections.projection_box(optax.apply_updates(z, upd), lo, hi)
        return z, state, val

    def body(carry, t):
        z, state = carry
        frac = t / max(steps - 1, 1)
        hyper = tuple(_geom(pair, frac) for pair in (schedule.tau, schedule.hinge, schedule.sharpness,
                                                      schedule.penalty))
        z, state, val = jax.vmap(one_step, (0, 0, None))(z, state, hyper)
        return (z, state), (val, z) + hyper

    state0 = jax.vmap(opt.init)(z0)
    (z, _), traj = jax.lax.scan(body, (z0, state0), jnp.arange(steps, dtype=jnp.float32))
    return z, traj


def optimize_fn(loss, args, lo, hi, starts=8, steps=200, seed=0, schedule=Schedule()):
    """Adam in a box from `starts` random points at once (the step is vmapped).

    Args:
      loss: loss(z [P], args, tau, k, p, w) -> scalar, smooth in z; a
        module-level function, so that repeated runs reuse one compile.
      args: pytree passed through to `loss` (traced).
      lo, hi: [P] box of z (projection_box after every update).
    Returns:
      (z_final [starts, P], trajectory dict of numpy arrays: loss [steps,
      starts], z [steps, starts, P], tau/hinge/sharpness/penalty [steps]).
    """
    lo, hi = jnp.asarray(lo, jnp.float32), jnp.asarray(hi, jnp.float32)
    z0 = lo + (hi - lo) * jax.random.uniform(jax.random.PRNGKey(seed), (starts, lo.shape[0]))
    z, (val, zs, tau, k, p, w) = _run(loss, args, z0, lo, hi, steps, schedule)
    traj = dict(loss=np.asarray(val), z=np.asarray(zs), tau=np.asarray(tau), hinge=np.asarray(k),
                sharpness=np.asarray(p), penalty=np.asarray(w))
    return np.asarray(z), traj


def optimize(prob: Problem, starts=8, steps=200, seed=0, schedule=Schedule()):
    """`optimize_fn` on the co-design loss in log space; the trajectory also
    carries x = exp(z) [steps, starts, 4] in SI units."""
    z, traj = optimize_fn(loss_fn, prob, np.log(np.asarray(prob.lo)), np.log(np.asarray(prob.hi)),
                          starts, steps, seed, schedule)
    traj["x"] = np.exp(traj["z"])
    return z, traj


# ------------------------------------------------------- exact re-check


def exact_table(xs, prob: Problem):
    """Exact objective of chips xs [N, 4] on every candidate: ([N, C] objective
    with +inf where infeasible, [N, C] feasible)."""

    def one_chip(x):
        area, tdp, _ = design_numbers(x, prob)
        return chip_objectives(design_hardware(x, prob), (area <= prob.tech.reticle)
                                & (tdp <= prob.tech.power_limit), prob)

    return jax.vmap(one_chip)(xs)


def chip_objectives(hw: Hardware, chip_ok, prob: Problem):
    """([C] exact objective, +inf where infeasible; [C] feasible) of the chip
    `hw` on every candidate: SLOs, memory as an engine holds it, budget,
    and `chip_ok` (its own limits: area, TDP)."""
    par, wl = _candidate(prob)
    m, _ = jax.vmap(lambda pa, w: candidate_metrics(prob, hw, pa, w, prob.exact))(par, wl)
    if prob.task == "train":
        feas = jnp.asarray(prob.valid) & chip_ok & ct.meets(m, hw, prob.budget, prob.deadline)
        return jnp.where(feas, objective_value(m, hw, prob.objective), jnp.inf), feas
    feas = (jnp.asarray(prob.valid) & m.feasible & (m.ttft <= wl.ttft_slo) & (m.tpot <= wl.tpot_slo) & chip_ok
            & (m.chips * hw.cost.price <= prob.budget))
    return jnp.where(feas, objective_value(m, hw, prob.objective), jnp.inf), feas


def price_basis(tech_name: str) -> str:
    """What co-design prices every chip by (the designed ones and the base)."""
    return (f"technology model {tech_name} (die area, yield, HBM stacks, packaging, markup: "
            "jaxplat.cost.money) for the designed and the base chip alike")


def base_comparison(prob: Problem) -> dict:
    """The base chip on the same candidates, SLOs and budget, priced like the
    designed chips: by the technology model of its own numbers
    (`money.priced_chip`: price, TDP and static power), not by its street
    price, so that "cheaper than the base" compares one basis. Returns
    {"price_usd", "street_price_usd", "tdp_w", "objective" (inf when no
    candidate is feasible), "candidate" (index, or None)}."""
    hw = money.priced_chip(prob.base, prob.tech)
    obj, _ = jax.device_get(jax.jit(chip_objectives)(hw, jnp.bool_(True), prob))
    best = int(np.argmin(obj))
    finite = bool(np.isfinite(obj[best]))
    return {"price_usd": float(hw.cost.price), "street_price_usd": float(prob.base.cost.price),
            "tdp_w": float(hw.power.tdp),
            "objective": float(obj[best]) if finite else math.inf, "candidate": best if finite else None}


_exact_jit = jax.jit(exact_table)


def round_starts(z, prob: Problem, inflate=(0.98, 0.99, 0.995, 1.0, 1.005, 1.02, 1.05)):
    """Rounded variants of each start: integer variables (HBM stacks; array
    rows, cols and cores) floored and ceiled, the array's also at the powers
    of two around them (`_integer_choices`), in every combination x slightly
    larger FLOP/s and link bandwidth (the smooth optimum sits on a constraint
    boundary, which exact mode may place a hair further) and slightly smaller
    (a ceiled stack count adds die area: at a smooth optimum on the reticle,
    the FLOP/s and link give it back; Llama-3.1-405B training's optimum at
    2.48 stacks is 3 stacks at 1% fewer FLOP/s). [N, P] in SI units."""
    x = np.exp(np.asarray(z, np.float64))
    ints = [i for i, p in enumerate(prob.params) if p in spaces.INTEGER]
    grow = [i for i, p in enumerate(prob.params) if p in spaces.INFLATE]
    out = set()
    for xi in x:
        choices = [_integer_choices(xi[i], prob.params[i]) for i in ints]
        for combo in itertools.product(*choices):
            for f in inflate:
                v = xi.copy()
                v[ints] = combo
                v[grow] *= f
                out.add(tuple(np.clip(v, prob.lo, prob.hi).astype(np.float32)))
    return np.asarray(sorted(out), np.float32)


def _integer_choices(v: float, name: str) -> list:
    """Whole values to try for an integer variable at v: its floor and ceil,
    and for a systolic array's sides and core count also the powers of two
    around it. The smooth loss treats folds as fractional (ceil -> identity),
    so its optimum ignores that model dimensions are multiples of powers of
    two: an 82 x 112 array folds a 4096-wide GEMM into 50 x 37 passes with a
    ragged last one where a 64 x 128 array fits exactly 64 x 32 (SCALE-Sim's
    fold count, jaxplat.cost.microarch)."""
    out = {math.floor(v + 1e-6), math.ceil(v - 1e-6)}
    if name in ("rows", "cols", "cores"):
        out |= {2 ** math.floor(math.log2(max(v, 1.0)) + 1e-9), 2 ** math.ceil(math.log2(max(v, 1.0)) - 1e-9)}
    return sorted(out)


@dataclasses.dataclass
class Result:
    """Best chip found: x [4] (PARAMS order, SI), candidate index, its exact
    objective, and how many cost-model evaluations it took."""

    x: np.ndarray
    candidate: int
    objective: float
    evaluations: int
    trajectory: dict = None


def _safe_chunk(chunk: int, prob: Problem) -> int:
    """Chips per vmapped call, so that chips x candidates stays within the
    device's cap (search.max_block: 2^15 on XLA:CPU, none elsewhere)."""
    from jaxplat.search import max_block  # noqa: PLC0415 (search imports heavy modules)

    cap = max_block(jax.default_backend())
    return chunk if cap is None else max(1, min(chunk, cap // max(1, len(prob.valid))))


def exact_objectives(xs, prob: Problem, chunk=256) -> np.ndarray:
    """[N, C] exact objective of chips xs [N, 4] on every candidate (+inf where
    infeasible), in fixed-size chunks so that every call reuses one compile."""
    xs = np.asarray(xs, np.float32)
    chunk = _safe_chunk(chunk, prob)
    out = []
    for s in range(0, len(xs), chunk):
        part = xs[s:s + chunk]
        pad = np.concatenate([part, np.repeat(part[:1], chunk - len(part), axis=0)])
        out.append(np.asarray(_exact_jit(jnp.asarray(pad), prob)[0])[:len(part)])
    return np.concatenate(out)


def best_exact(xs, prob: Problem):
    """(x, candidate, objective, evaluations) of the best exactly feasible pair
    (x None when there is none)."""
    obj = exact_objectives(xs, prob)
    i, c = np.unravel_index(np.argmin(obj), obj.shape)
    best = (np.asarray(xs[i]), int(c), float(obj[i, c])) if np.isfinite(obj[i, c]) else (None, -1, math.inf)
    return best + (obj.size,)


# Exact-mode pattern search after rounding: each round tries every continuous number at POLISH_POINTS
# factors within [1/span, span] of its value, the others held; spans narrow to about +-4% (the last
# round's step ~0.5%).
POLISH_SPANS = (2.0, 1.41, 1.19, 1.09, 1.044)
POLISH_POINTS = 17


def polish(x, c, obj, prob: Problem):
    """Refine the rounded best (x [P] SI, candidate c, exact objective obj)
    in exact mode, one number at a time (HBM stacks and array sides at
    their neighbouring integers): the smooth optimum mixes candidates, so the
    candidate that wins exactly may want less FLOP/s or link than the
    mixture did (Llama-3.1-70B chat: batch 1 keeps its TTFT SLO at 2/3 of
    the FLOP/s). Keeps only strict improvements, so it never returns worse
    or infeasible. (x, c, obj, evaluations)."""
    n = 0
    for span in POLISH_SPANS:
        for i, name in enumerate(prob.params):
            lo, hi = float(prob.lo[i]), float(prob.hi[i])
            if lo == hi:
                continue
            if name in spaces.INTEGER:
                vals = np.array([x[i] - 1.0, x[i] + 1.0])
            else:
                vals = x[i] * np.geomspace(1.0 / span, span, POLISH_POINTS)
            xs = np.repeat(np.asarray(x, np.float32)[None], len(vals), axis=0)
            xs[:, i] = np.clip(vals, lo, hi)
            o = exact_objectives(xs, prob)
            n += o.size
            k, cc = np.unravel_index(np.argmin(o), o.shape)
            if o[k, cc] < obj * (1.0 - 1e-6):
                x, c, obj = xs[k], int(cc), float(o[k, cc])
    return x, c, obj, n


def codesign(prob: Problem, starts=8, steps=200, seed=0, schedule=Schedule()) -> Result:
    """Optimize the chip, round, re-check and polish in exact mode. Raises
    SpecError when no start gives an exactly feasible chip (never returns an
    infeasible one)."""
    from jaxplat.specs import SpecError

    z, traj = optimize(prob, starts, steps, seed, schedule)
    x, c, obj, n_exact = best_exact(round_starts(z, prob), prob)
    if x is None:
        raise SpecError("codesign found no feasible chip: loosen the SLOs, widen the parameter bounds "
                        "or add parallel/batch candidates")
    x, c, obj, n_polish = polish(x, c, obj, prob)
    return Result(x=x, candidate=c, objective=obj,
                  evaluations=starts * steps * len(prob.valid) + n_exact + n_polish, trajectory=traj)


# ----------------------------------------------------------------- grid


def grid_axes(prob: Problem, points) -> list[np.ndarray]:
    """Per-parameter grid values: log-spaced (`points[name]` of them), HBM
    stacks on every integer, array rows, cols and cores on every integer
    when there are at most `points[name]`, else on the integers nearest the
    log-spaced points; a fixed parameter has one value."""
    axes = []
    for i, name in enumerate(prob.params):
        lo, hi = float(prob.lo[i]), float(prob.hi[i])
        if lo == hi:
            axes.append(np.array([lo]))
        elif name == "hbm_stacks":
            axes.append(np.arange(math.ceil(lo), math.floor(hi) + 1, dtype=np.float64))
        elif name in spaces.INTEGER:  # every integer if there are few enough, else the nearest to log-spaced points
            n = int(points.get(name, 16))
            ints = np.arange(math.ceil(lo), math.floor(hi) + 1, dtype=np.float64)
            axes.append(ints if len(ints) <= n else np.unique(np.clip(np.round(np.geomspace(lo, hi, n)), lo, hi)))
        else:
            axes.append(np.geomspace(lo, hi, int(points.get(name, 16))))
    return axes


def grid_search(prob: Problem, points, chunk=256, progress=True):
    """Dense exact-mode grid over the box: (x, candidate, objective, evaluations).

    TODO: move onto the sweep engine (jaxplat.search) once it can drive
    technology-derived hardware; this is a chunked vmap over the same
    `evaluate`, not a second cost model.

    `chunk` x candidates stays within search.max_block: a vmap of evaluate
    wider than 2^15 points returns wrong decode times on XLA:CPU (jax 0.10.2:
    its YNNPACK fusion; experiments/xla_cpu_vmap_repro.py), while the same
    arithmetic outside one jitted evaluate is right.
    """
    chunk = _safe_chunk(chunk, prob)
    axes = grid_axes(prob, points)
    shape = tuple(len(a) for a in axes)
    n = int(np.prod(shape))
    tables = tuple(jnp.asarray(a, jnp.float32) for a in axes)
    best = (None, -1, math.inf)
    starts = range(0, n, chunk)
    if progress:
        from tqdm import tqdm
        starts = tqdm(starts, desc="grid", unit="chunk", leave=False)
    for s in starts:
        o, x, c = jax.device_get(_grid_chunk(jnp.int32(s), tables, prob, shape, chunk))
        if o < best[2]:
            best = (np.asarray(x), int(c), float(o))
    return best + (n * len(prob.valid),)


@functools.partial(jax.jit, static_argnames=("shape", "chunk"))
def _grid_chunk(start, tables, prob, shape, chunk):
    """Best (objective, x, candidate) of grid points start .. start+chunk-1."""
    n = int(np.prod(shape))
    idx = start + jnp.arange(chunk)
    live = idx < n
    digits = jnp.unravel_index(jnp.minimum(idx, n - 1), shape)  # mixed-radix decode on device
    xs = jnp.stack([t[d] for t, d in zip(tables, digits)], axis=-1)
    obj, _ = exact_table(xs, prob)
    obj = jnp.where(live[:, None], obj, jnp.inf)
    flat = jnp.argmin(obj)
    return obj.reshape(-1)[flat], xs[flat // obj.shape[1]], flat % obj.shape[1]


def candidate_validity(model: Model, base: Hardware, workload: Workload, cand: dict, profile="default") -> np.ndarray:
    """[C] bool: the candidate is feasible apart from memory (degrees divide
    what they split, chips exist): the cost model's own `feasible` flag on
    `base` with unbounded memory, evaluated once on the host."""
    roomy = replace(base, mem_size=base.memory.size.at[0].set(1e30))
    prob = Problem(model=model, workload=workload, base=roomy, tech=None, lo=None, hi=None, cand=cand,
                   valid=None)
    par, wl = _candidate(prob)
    m = jax.vmap(lambda pa, w: evaluate(model, roomy, pa, w, Options(profile=profile)))(par, wl)
    return np.asarray(m.feasible)


__all__ = ["PARAMS", "OBJECTIVES", "Schedule", "Problem", "Result", "chip_numbers", "chip_hardware",
           "design_hardware", "design_numbers",
           "candidate_losses", "loss_fn", "optimize_fn", "optimize", "exact_table", "exact_objectives",
           "chip_objectives", "base_comparison", "price_basis", "served_evaluate", "candidate_metrics",
           "round_starts", "best_exact", "polish", "codesign",
           "grid_axes", "grid_search", "hardware_numbers", "elasticities", "candidate_validity"]
