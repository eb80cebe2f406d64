"""Gradient calibration of the efficiency parameters on measured rows.

The parameters (`jaxplat.model.EFFICIENCY_PARAMS`: what each means
physically) are fitted globally, the same for every chip: a chip's own
numbers (peaks, bandwidths, SMs, tile, dtype support) then give its
per-operator efficiencies through `jaxplat.cost.efficiency`, so a chip that
was never measured is predicted by the same function, and leaving a chip's
rows out of the fit (leave-one-group-out) measures exactly that.

Each parameter is optimized in log space inside physical bounds
(`BOUNDS`): value = exp(log lo + (log hi - log lo) sigmoid(z)). The loss is
the mean Huber loss of log(predicted / measured) (robust to the odd
outlier: quadratic inside `HUBER_DELTA`, linear beyond), minimized with
optax's L-BFGS. Rows whose mean input length is an assumption (MLPerf's datasets) count up to
one free factor per benchmark (`assumed_input_groups`): they compare chips, not set efficiency.
Predictions come from the one cost model: offline rows from
`serving.max_load`, closed-loop rows from `serving.closed_loop`, Poisson
rows from `serving.queueing`, static batches from `evaluate`; rows of one
model and one kind of load are one vmapped, jitted program.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxplat.cost import evaluate
from jaxplat.design.measured import METRICS, Row, row_pytrees
from jaxplat.model import (
    EFFICIENCY_PARAMS,
    Options,
    chip_software,
    default_calibration,
    engine_parts,
    get,
    load_model,
    replace,
)
from jaxplat.search import compile_lowered
from jaxplat.serving import capacity, closed_loop, queueing
from jaxplat.specs import SpecError

# Upper values no real kernel exceeds on these chips (throttling at TDP, DRAM refresh, protocol overheads).
PHYSICAL_MAX = {"compute": 0.9, "memory": 0.92, "network": 0.9, "narrow_dtype": 1.0, "narrow_fp4": 1.0,
                "attention": 1.0, "attention_compute": 1.33, "moe": 1.0, "moe_memory": 1.0, "moe_fp4": 1.0, "scan": 1.0}
# Bounds of the fit (log space): the efficiencies stop at their physical
# maximum, so a fit cannot ship an unphysical value; one that presses
# against a bound (`at_bound`) says the model lacks something, not that the
# chip reaches it.
BOUNDS = {
    "compute": (0.2, PHYSICAL_MAX["compute"]),  # share of dense peak on large 16-bit GEMMs
    "memory": (0.3, PHYSICAL_MAX["memory"]),    # share of HBM peak on long streams
    "network": (0.2, PHYSICAL_MAX["network"]),  # share of link bandwidth on large collectives
    "narrow_dtype": (0.3, 1.0),     # 8-bit kernels relative to 16-bit ones
    "narrow_fp4": (0.3, 1.0),       # FP4 kernels relative to FP8 ones
    "attention": (0.1, 1.0),        # attention kernels relative to GEMMs (memory time)
    "attention_compute": (0.2, PHYSICAL_MAX["attention_compute"]),  # attention's matmuls / GEMMs (x compute <= 1)
    "attention_overlap": (1.0, 16.0),  # p-norm of a multi-query attention kernel's compute and memory (1: their sum)
    "moe": (0.05, 1.0),             # routed experts' grouped GEMMs relative to dense GEMMs (compute)
    "moe_memory": (0.05, 1.0),      # the same, streaming the experts' weights
    "moe_fp4": (0.3, 1.0),          # FP4 grouped GEMMs relative to FP8 ones, on top of `moe`
    "scan": (0.02, 1.0),            # state-space scan kernels relative to GEMMs
    "kernel_latency": (1e-7, 1e-4),  # s per GEMM/attention kernel (launch ~2-5 us without graphs)
    "expert_latency": (1e-8, 1e-4),  # s per routed expert of a grouped GEMM (a tile pipeline's ramp: ~1 us)
    "tile_latency": (1e-8, 1e-5),  # s per GEMM output tile outside its k-loop (an HBM round trip: ~0.5-1 us)
    "iteration_overhead": (1e-5, 0.05),  # s per engine iteration (scheduling, sampling)
    "collective_latency": (1e-7, 1e-4),  # s per collective call (nccl-tests small messages: ~10-20 us)
    "sequence_overhead": (1e-7, 2e-4),  # host s per sequence per iteration (C++ ~1 us, Python ~10-100 us)
}
# Share of a bound's log range within which a fitted value counts as at the bound: the sigmoid's slope
# there is under 1% of its peak, so the fit can press no further.
AT_BOUND = 0.01
# Where a fit starts: inside every bound (a sigmoid at its bound has no
# gradient), at typical values (dense GEMMs ~70% of peak, HBM ~80%, launch
# latency of a graph-captured kernel ~2 us, a scheduler step ~1 ms). The host's
# time per sequence starts at 40 us, above an 8B model's GPU time per decoded
# sequence (~30 us on H100): where the GPU step is longer the max() that
# overlaps them has no gradient in it, so a fit started below would stay put.
START = {"compute": 0.7, "memory": 0.8, "network": 0.8, "narrow_dtype": 0.9, "narrow_fp4": 0.9, "attention": 0.8,
         "attention_compute": 0.8, "attention_overlap": 2.0, "moe": 0.8, "moe_memory": 0.8, "moe_fp4": 0.9, "scan": 0.5,
         "kernel_latency": 2e-6, "expert_latency": 1e-6, "tile_latency": 3e-7, "iteration_overhead": 1e-3,
         "sequence_overhead": 4e-5, "collective_latency": 5e-6}
# Loads whose rows the fit uses by default. Poisson-load latencies are left
# to check it: measured at the highest rate the SLOs allow, they sit where
# latency diverges, so they test capacity (the offline rows do that) with a
# loss that jumps as the load crosses the model's stability edge.
FIT_LOADS = ("offline", "concurrency", "batch")
DEFAULT_FIT = ("compute", "memory", "narrow_dtype", "narrow_fp4", "attention", "moe", "moe_memory", "kernel_latency",
               "iteration_overhead", "sequence_overhead", "collective_latency")
# Per-engine parameters (`--engine-fit`) are fitted as factors on the global value, "name@engine": 1 is the
# reference engine the global values describe (an engine with no rows in a fit keeps it), below 1 a less tuned
# one. A fixed time (s) may be far above the reference's: a host-side scheduler step of an early release costs
# milliseconds where a tuned one costs tens of microseconds (vLLM's V0 scheduler runs in Python between GPU
# steps, what its multi-step scheduling of v0.6 and its V1 engine were built to hide).
ENGINE_FACTOR_BOUNDS = (0.05, 1.5)
ENGINE_TIME_FACTOR_BOUNDS = (0.05, 1000.0)
# Where an engine's iteration overhead starts: 10x the reference (~0.5 ms). At 1 the reference's 45 us moves a
# decode step by under 0.2%: too little a slope for the fit to leave from. Other factors start at 1.
ENGINE_START = {"iteration_overhead": 10.0}
# Parameters whose rows' gradient vanishes where they lose a max(): `fit` scans
# each over SCAN_POINTS log-spaced values of its bounds after descending.
SCANNED = ("sequence_overhead",)
SCAN_POINTS = 13  # a factor 1.9 apart over (1e-7, 2e-4) s
HUBER_DELTA = 0.1  # |log ratio| where the loss turns linear (~10%)
RIDGE = 1e-7       # pull of z towards its start (keeps unidentified parameters put; far below the data)
_LBFGS = optax.scale_by_lbfgs()
_lbfgs_update = jax.jit(_LBFGS.update)  # eagerly, optax's update compiled a new scan at every step
OPTS = Options()
QUEUE_STEPS = 24  # fixed-point steps of the queueing model (converged to ~1e-4 at the loads measured)


def bounds(name):
    """(lo, hi) of a fitted value: a parameter's BOUNDS, or an engine factor's."""
    if "@" not in name:
        return BOUNDS[name]
    timed = EFFICIENCY_PARAMS[name.split("@")[0]][2] == "s"
    return ENGINE_TIME_FACTOR_BOUNDS if timed else ENGINE_FACTOR_BOUNDS


def at_bound(name, value) -> bool:
    """Whether a fitted value sits at (within AT_BOUND of) either bound."""
    lo, hi = bounds(name)
    u = (np.log(value) - np.log(lo)) / (np.log(hi) - np.log(lo))
    return bool(u < AT_BOUND or u > 1.0 - AT_BOUND)


def to_z(name, value):
    lo, hi = bounds(name)
    u = (np.log(np.clip(value, lo * 1.0001, hi * 0.9999)) - np.log(lo)) / (np.log(hi) - np.log(lo))
    return float(np.log(u / (1.0 - u)))


def from_z(name, z):
    lo, hi = bounds(name)
    return jnp.exp(jnp.log(lo) + (jnp.log(hi) - jnp.log(lo)) * jax.nn.sigmoid(z))


def engine_values(values: dict, engine_fit, engines) -> dict:
    """{engine: {parameter: global value x the engine's factor}}: what the
    calibration file's `engines:` holds."""
    return {e: {p: values[p] * values[f"{p}@{e}"] for p in engine_fit} for e in engines}


def _stack(trees):
    return jax.tree.map(lambda *x: jnp.stack(x), *trees)


def predict_one(model, hw, par, wl, srv, kind, amount, offline=False, cap=None, opts=OPTS):
    """[3] (throughput tok/s of the deployment, mean TTFT s, mean TPOT s) of
    one measured configuration. kind: "batch" (amount = batch per replica),
    "rate" (requests/s of the deployment), "loop" (clients of the
    deployment, or every slot busy where `offline`). `cap`: the engine's
    slots if known (`capacity`; no efficiency parameter changes them).
    `opts`: the cost model's static options (default: as `estimate` runs)."""
    if kind == "batch":
        m = evaluate(model, hw, par, replace(wl, batch=amount), opts)
        return jnp.stack([m.throughput, m.ttft, m.tpot])
    cap, _, _ = capacity(model, hw, par, wl, srv, opts) if cap is None else (cap, None, None)
    if kind == "rate":
        sm = queueing(model, hw, par, wl, replace(srv, rate=amount / par.dp), opts, cap, QUEUE_STEPS)
        return jnp.stack([amount * wl.output, sm.ttft_mean, sm.tpot_mean])
    clients = jnp.where(offline, jnp.maximum(cap, 1.0), amount / par.dp)
    cl = closed_loop(model, hw, par, wl, srv, clients, opts, cap)
    return jnp.stack([cl.throughput, cl.ttft, cl.tpot])


@dataclasses.dataclass
class _Group:
    model_name: str
    load: str
    configs: list          # indices into Predictor.configs
    args: tuple            # stacked (hw, par, wl, srv, amount, offline, slots)
    jac: object = None     # values -> ([configs, 3, params], [configs, 3])


class Predictor:
    """Predictions of every row as a function of the fitted parameters.

    Rows sharing a deployment and load share one prediction (`configs`);
    configurations of one model and one kind of load are one vmapped program
    and its forward-mode Jacobian in the parameters (few parameters, and
    fixed-point loops: forward mode is the cheaper to compile and run). The
    engine's slots (`capacity`) depend on no efficiency parameter and are
    computed once.

    `engine_fit` (a subset of `names`) are fitted once more for each engine
    in `engines`, as factors "name@engine" on the global value for the rows
    whose `engine` column is that engine or has it among its "+" parts (a
    row of "vllm-0.7+rocm" takes the product of both factors; `names` lists
    the globals, then the factors); `software` as `row_hardware` takes it;
    `options`, the cost model's static options (a modelling variant; default
    as `estimate` runs).
    """

    def __init__(self, rows: list[Row], names=DEFAULT_FIT, calibration=None, engine_fit=(), engines=(), software=None,
                 options=OPTS):
        unknown = [n for n in names if n not in BOUNDS] + [n for n in engine_fit if n not in names]
        if unknown:
            raise SpecError(f"--fit / --engine-fit: cannot fit {unknown[0]!r}; "
                            f"parameters: {', '.join(BOUNDS)} (per-engine ones among those fitted)")
        self.globals, self.engine_fit, self.engines = tuple(names), tuple(engine_fit), tuple(engines)
        self.rows, self.options = rows, options
        self.names = self.globals + tuple(f"{p}@{e}" for e in self.engines for p in self.engine_fit)
        index, self.configs = {}, []
        for r in rows:
            index.setdefault(r.config_key(), len(index))
            if len(self.configs) < len(index):
                self.configs.append(r)
        self.row_config = np.array([index[r.config_key()] for r in rows])
        self.row_metric = np.array([METRICS.index(r.metric) for r in rows])
        self.measured = np.array([r.value for r in rows])
        by = {}
        for i, r in enumerate(self.configs):
            by.setdefault((r.model, "batch" if r.load == "batch" else "rate" if r.load == "rate" else "loop"),
                          []).append(i)
        self.groups = []
        for (model_name, kind), idx in by.items():
            model = load_model(model_name)
            hw, par, wl, srv = map(_stack, zip(*(row_pytrees(self.configs[i], calibration, software) for i in idx)))
            amount = jnp.array([self.configs[i].amount for i in idx], jnp.float32)
            offline = jnp.array([self.configs[i].load == "offline" for i in idx])
            slots = (jnp.zeros_like(amount) if kind == "batch" else
                     jax.jit(jax.vmap(lambda h, p, w, s: capacity(model, h, p, w, s, options)[0]))(hw, par, wl, srv))
            engine = jnp.array([[float(e in self.parts(self.configs[i])) for e in self.engines]
                                for i in idx], jnp.float32).reshape(len(idx), len(self.engines))
            g = _Group(model_name, kind, idx, (hw, par, wl, srv, amount, offline, slots, engine))
            g.jac = self._compile(model, kind, g.args)
            self.groups.append(g)
        self.base = {n: float(jnp.mean(get(self.groups[0].args[0], EFFICIENCY_PARAMS[n][0])))
                     for n in BOUNDS}
        loaded = calibration or default_calibration()  # engine factors as loaded: its engine / global values
        for e in self.engines:
            for p in self.engine_fit:
                own = loaded.engines.get(e, {}).get(p) if loaded else None
                self.base[f"{p}@{e}"] = own / loaded.parameters[p] if own and p in loaded.parameters else 1.0

    @staticmethod
    def parts(row: Row) -> tuple:
        """The engine parts a row runs: its `engine` column's and its chip's
        `software` (rocm on AMD chips, however the row names its engine)."""
        return tuple(dict.fromkeys(engine_parts(row.engine) + engine_parts(chip_software(row.hardware))))

    def _compile(self, model, kind, args):
        """values -> ([configs, 3, params] Jacobian, [configs, 3] predictions),
        compiled with XLA's cheapest settings: it runs in milliseconds, and a
        fit evaluates it a few hundred times."""
        fields = [EFFICIENCY_PARAMS[n][0] for n in self.globals]
        G, K, E = len(self.globals), len(self.engine_fit), len(self.engines)
        pick = np.zeros((K, G), np.float32)  # [K, G]: which global each per-engine factor scales
        pick[np.arange(K), [self.globals.index(p) for p in self.engine_fit]] = 1.0

        def one(values, hw, par, wl, srv, amount, offline, slots, engine):
            v = values[:G]
            if K and E:  # the product of this row's engine parts' factors (1 for a part not in `engines`)
                factors = values[G:].reshape(E, K)
                v = v * jnp.exp((engine @ jnp.log(factors)) @ pick)
            hw = replace(hw, **dict(zip(fields, v)))
            return predict_one(model, hw, par, wl, srv, kind, amount, offline, slots, self.options)
        batched = jax.vmap(one, in_axes=(None, 0, 0, 0, 0, 0, 0, 0, 0))

        def with_aux(values, *a):
            out = batched(values, *a)
            return out, out
        values = jnp.ones((len(self.names),), jnp.float32)
        lowered = jax.jit(jax.jacfwd(with_aux, has_aux=True)).lower(values, *args)
        return compile_lowered(lowered, jax.default_backend(), cheap=True)

    def values(self, z):
        return jnp.stack([from_z(n, z[i]) for i, n in enumerate(self.names)])

    def config_predictions(self, z):
        """[configs, 3] predictions at parameters z (unconstrained)."""
        v = self.values(z)
        out = np.zeros((len(self.configs), 3))
        for g in self.groups:
            out[np.array(g.configs)] = np.asarray(g.jac(v, *g.args)[1])
        return out

    def predict(self, z):
        """[rows] predicted value of each row's metric."""
        return self.config_predictions(z)[self.row_config, self.row_metric]

    def predict_and_jac(self, z):
        """([rows] predictions, [rows, params] their derivatives in z)."""
        v = self.values(z)
        dv = np.asarray(jax.jacfwd(self.values)(z))  # [params, params], diagonal
        out = np.zeros((len(self.configs), 3))
        jac = np.zeros((len(self.configs), 3, len(self.names)))
        for g in self.groups:
            j, o = g.jac(v, *g.args)
            out[np.array(g.configs)] = np.asarray(o)
            jac[np.array(g.configs)] = np.asarray(j) @ dv
        return out[self.row_config, self.row_metric], jac[self.row_config, self.row_metric]

    def z0(self, start=None):
        start = {**START, **(start or {})}
        return jnp.array([to_z(n, start.get(n, ENGINE_START.get(n.split("@")[0], 1.0))) for n in self.names],
                         jnp.float32)


def input_assumed(r: Row) -> bool:
    """Whether the row's mean input length is the converter's assumption."""
    return "mean input assumed" in r.note


def assumed_input_groups(rows: list[Row]) -> np.ndarray:
    """[rows] benchmark group (>= 0) of rows whose mean input length is an
    assumption (the converter's note says "mean input assumed": MLPerf's
    datasets, whose mean input was not published), -1 for the rest.

    One group per model, load and metric: every MLPerf round and chip ran the
    same dataset, so they share the one unknown length. data/measured/README.md:
    "Treat the input length as unknown within its bound: a model that needs it
    exactly to fit these rows is fitting noise." The length scales a
    benchmark's throughput on every chip by about the same factor (FLOPs per
    output token 2 N (1 + P/O), Kaplan et al. 2020), so the fit takes such
    rows up to one free factor per group (`huber_log`): they still weigh the
    chips against each other (the per-chip ratios MLPerf is read for), but no
    longer set the absolute efficiency. At the assumed 512 tokens the
    Llama-2-70B Offline rows need 75-84% of the dense FP8 peak in GEMM FLOPs
    alone (H100/H200, by hand), which is what drove `compute` to its bound.
    """
    keys, out = {}, np.full(len(rows), -1)
    for i, r in enumerate(rows):
        if input_assumed(r):
            out[i] = keys.setdefault((r.model, r.load, r.metric), len(keys))
    return out


def huber_log(pred, meas, weights, groups=None):
    """Weighted mean Huber loss of log(pred / meas) (quadratic within
    HUBER_DELTA, linear beyond) and its derivative in pred.

    groups: [rows] >= 0 for rows known only up to one common factor per
    group (`assumed_input_groups`): their log ratios are taken relative to
    the group's weighted mean (the factor that fits them best in the
    quadratic range), so scaling a whole group's predictions changes nothing.
    """
    r = np.where(weights > 0, np.log(np.maximum(np.nan_to_num(pred, nan=1e30), 1e-30) / meas), 0.0)
    groups = np.full(len(r), -1) if groups is None else np.asarray(groups)
    u = r - _per_group(weights * r, groups, weights)  # r less its group's weighted mean
    a = np.abs(u)
    h = np.where(a <= HUBER_DELTA, 0.5 * u * u, HUBER_DELTA * (a - 0.5 * HUBER_DELTA))
    dh = weights * np.where(a <= HUBER_DELTA, u, HUBER_DELTA * np.sign(u))  # d(w h)/du
    dr = dh - weights * _per_group(dh, groups, weights)  # du_i/dr_k = delta_ik - w_k / W_g within a group
    total = max(float(np.sum(weights)), 1.0)
    return float(np.sum(weights * h)) / total, dr / np.maximum(pred, 1e-30) / total


def _per_group(x, groups, weights):
    """[rows] sum of x over the row's group / the group's total weight, for
    rows of a group (groups >= 0, weight > 0); 0 for the others."""
    out = np.zeros(len(x))
    for g in np.unique(groups[groups >= 0]):
        m = (groups == g) & (weights > 0)
        if m.any():
            out[m] = np.sum(x[m]) / np.sum(weights[m])
    return out


def source_weights(rows: list[Row], mask=None) -> np.ndarray:
    """[rows] weights giving each source (measurement campaign) the same
    total weight over the rows in `mask`: a sweep of 45 rows from one
    benchmark run counts as much as a table of 40 from another, not more."""
    keep = np.ones(len(rows), bool) if mask is None else np.asarray(mask, bool)
    count = {}
    for r, k in zip(rows, keep):
        if k:
            count[r.source] = count.get(r.source, 0) + 1
    w = np.array([1.0 / count[r.source] if k else 0.0 for r, k in zip(rows, keep)])
    return w * keep.sum() / max(w.sum(), 1e-30)


def _data_loss(pred: Predictor, weights):
    """[rows] predictions -> (the fit's loss without its ridge, its derivative in them)."""
    groups = assumed_input_groups(pred.rows)
    return lambda predicted: huber_log(predicted, pred.measured, weights, groups)


def fit(pred: Predictor, weights=None, steps: int = 40, start=None, log=None):
    """Fit the parameters on the rows with weight > 0 (optax L-BFGS, its
    line search on the loss). Returns ({name: value}, final loss, loss per step)."""
    w = np.ones(len(pred.rows)) if weights is None else np.asarray(weights, float)
    z0 = pred.z0(start)
    data_loss = _data_loss(pred, w)

    def loss(z):
        zz = np.asarray(z)
        return data_loss(pred.predict(z))[0] + RIDGE * float(np.sum((zz - np.asarray(z0)) ** 2))

    def loss_and_grad(z):
        p, j = pred.predict_and_jac(z)
        value, dp = data_loss(p)
        zz = np.asarray(z)
        used = w > 0  # rows left out may predict inf (an unstable load): keep them out of the sum
        g = dp[used] @ j[used] + 2.0 * RIDGE * (zz - np.asarray(z0))
        return value + RIDGE * float(np.sum((zz - np.asarray(z0)) ** 2)), jnp.asarray(g, jnp.float32)

    def descend(z, steps, history):
        # optax's L-BFGS direction; the line search runs here on the host, since
        # the predictions are compiled programs called one group at a time.
        state = _LBFGS.init(z)
        for i in range(steps):
            value, grad = loss_and_grad(z)
            history.append(value)
            if log:
                log(i, value)
            direction, state = _lbfgs_update(grad, state, z)
            slope = float(jnp.dot(grad, direction))
            if not slope > 0:  # not a descent direction: fall back to the gradient
                direction, slope = grad, float(jnp.dot(grad, grad))
            # Armijo backtracking from a unit step, then doubling while the loss
            # keeps falling: where the Huber loss is linear its curvature is nil,
            # L-BFGS falls back to the raw gradient, and a unit step would crawl.
            step, best = 1.0, None
            for _ in range(12):
                trial_loss = loss(z - step * direction)
                if trial_loss <= value - 1e-4 * step * slope:
                    best = (step, trial_loss)
                    break
                step *= 0.5
            if best is None:
                break  # no decrease along the direction: converged as far as float32 allows
            if step == 1.0:
                for _ in range(10):
                    bigger = loss(z - 2.0 * best[0] * direction)
                    if not bigger < best[1]:
                        break
                    best = (2.0 * best[0], bigger)
            z = z - best[0] * direction
            if i > 3 and abs(history[-2] - history[-1]) < 1e-6 * max(abs(history[-1]), 1e-6):
                break
        return z

    history = []
    z = descend(z0, steps, history)
    # A parameter behind a max() (the host's time beside the GPU step) has no
    # gradient where it loses: a step that overshoots below every row's GPU
    # time leaves it there. A scan over its bounds, the rest held, finds the
    # basin; L-BFGS then goes on from it.
    rescan = False
    for i, n in enumerate(pred.names):
        if n in SCANNED and steps > 0:
            lo, hi = bounds(n)
            grid = [to_z(n, v) for v in np.geomspace(lo, hi, SCAN_POINTS)]
            losses = [loss(z.at[i].set(g)) for g in grid]
            if min(losses) < loss(z) - 1e-6:
                z, rescan = z.at[i].set(grid[int(np.argmin(losses))]), True
    if rescan:
        z = descend(z, max(steps // 4, 1), history)
    vals = pred.values(z)
    return {n: float(vals[i]) for i, n in enumerate(pred.names)}, float(loss(z)), history


# How far one parameter is moved to see whether the rows pin it, and the
# least rise of the loss (as a share of the fitted loss) that counts as pinned:
# a value the loss hardly sees is the fit's start or the ridge's, not a result.
IDENTIFY_FACTOR = 1.2
IDENTIFIED = 0.01


def identification(pred: Predictor, values: dict, weights) -> dict:
    """{name: relative rise of the fit's loss (ridge apart) when only that
    parameter is multiplied or divided by IDENTIFY_FACTOR inside its bounds,
    the smaller of the two}: how firmly the rows with weight > 0 pin it. Under
    IDENTIFIED the value is weakly identified (the loss is nearly flat there)."""
    data_loss = _data_loss(pred, np.asarray(weights, float))

    def loss(vals):
        return data_loss(pred.predict(z_of(pred, vals)))[0]

    base = loss(values)
    out = {}
    for n in pred.names:
        lo, hi = bounds(n)
        moved = [float(np.clip(values[n] * f, lo * 1.001, hi * 0.999)) for f in (IDENTIFY_FACTOR, 1 / IDENTIFY_FACTOR)]
        # a direction a bound cuts short (a value at its bound) says nothing about the data
        free = [v for v in moved if abs(np.log(v / values[n])) >= 0.5 * np.log(IDENTIFY_FACTOR)]
        rises = [loss({**values, n: v}) - base for v in free or moved]
        out[n] = max(min(rises), 0.0) / max(base, 1e-6)
    return out


# A multi-start check (`multistart`): fits whose loss is within STARTS_LOSS of
# the best fit the rows equally well; a parameter whose values among them span
# more than STARTS_SPREAD (max / min) is not pinned by the rows, whatever the
# local `identification` says (a valley of equal loss, e.g. two parameters of
# which the rows see only the product).
STARTS_LOSS = 0.01
STARTS_FLOOR = 1e-5  # or within this (0.45% rms log error, below any measurement's noise): exact fits leave no 1%
STARTS_SPREAD = 1.5


def multistart(pred: Predictor, weights, steps: int, starts: int, seed: int = 0, log=None) -> list:
    """Fit from `starts` - 1 more starting points, each global parameter's
    start drawn log-uniformly inside its bounds (engine factors at their
    usual start). Returns [(values, loss)] of those fits."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(starts - 1):
        start = {n: float(np.exp(rng.uniform(*np.log(bounds(n))))) for n in pred.globals}
        vals, loss, _ = fit(pred, weights, steps, start=start,
                            log=(lambda i, v, k=k: log(k + 1, i, v)) if log else None)
        out.append((vals, loss))
    return out


def unpinned(fits: list) -> dict:
    """{name: (lowest, highest)} over the fits [(values, loss)] within
    STARTS_LOSS (or STARTS_FLOOR) of the best loss, for the parameters whose
    values there span more than STARTS_SPREAD."""
    best = min(loss for _, loss in fits)
    near = [vals for vals, loss in fits if loss <= best * (1.0 + STARTS_LOSS) + STARTS_FLOOR]
    out = {}
    for n in near[0]:
        vs = [v[n] for v in near]
        if max(vs) > STARTS_SPREAD * min(vs):
            out[n] = (min(vs), max(vs))
    return out


def z_of(pred: Predictor, values: dict):
    """z of `values` ({name: value}; an engine factor left out is 1)."""
    return jnp.array([to_z(n, values.get(n, 1.0) if "@" in n else values[n]) for n in pred.names], jnp.float32)


def summarize(pred_values, rows: list[Row], mask=None) -> dict:
    """Errors of predicted vs measured over rows (mask: which): count,
    median |error|, median signed error (predicted / measured - 1)."""
    p = np.asarray(pred_values, float)
    m = np.array([r.value for r in rows])
    keep = np.ones(len(rows), bool) if mask is None else np.asarray(mask, bool)
    e = p[keep] / m[keep] - 1.0
    if not e.size:
        return {"n": 0, "median_abs": float("nan"), "median_signed": float("nan")}
    return {"n": int(e.size), "median_abs": float(np.median(np.abs(e))), "median_signed": float(np.median(e))}


def leave_one_out(pred: Predictor, key, steps=40, start=None, log=None, weights=None):
    """Leave-one-group-out: for each value of key(row), fit without its rows
    (and only on rows with `weights` > 0) and predict them. Returns {group:
    (predictions [rows], fitted values)}."""
    out = {}
    w = np.ones(len(pred.rows)) if weights is None else np.asarray(weights, float)
    groups = sorted({key(r) for r, wi in zip(pred.rows, w) if wi > 0})
    for g in groups:
        held = np.array([key(r) == g for r in pred.rows])
        if (w * ~held).sum() == 0:
            continue
        vals, _, _ = fit(pred, weights=w * ~held, steps=steps, start=start,
                         log=(lambda i, v, g=g: log(g, i, v)) if log else None)
        vals = _unseen_engines_at_reference(pred, vals, w * ~held)
        out[g] = (np.asarray(pred.predict(z_of(pred, vals))), vals)
    return out


def _unseen_engines_at_reference(pred: Predictor, vals: dict, weights) -> dict:
    """`vals` with the factors of engines that no row of positive weight ran
    set to 1: an engine the fit never saw gets the reference's values, not
    wherever its factors started."""
    seen = {e for r, wi in zip(pred.rows, weights) if wi > 0 for e in Predictor.parts(r)}
    return {n: 1.0 if "@" in n and n.split("@", 1)[1] not in seen else v for n, v in vals.items()}


def held_out_predictions(pred: Predictor, key, steps=40, start=None, log=None, weights=None):
    """[rows] predictions of every row from the fit that left its group out
    (rows whose group is all the data keep NaN)."""
    p = np.full(len(pred.rows), np.nan)
    per = leave_one_out(pred, key, steps, start, log, weights)
    for g, (values, _) in per.items():
        held = np.array([key(r) == g for r in pred.rows])
        p[held] = values[held]
    return p, per


__all__ = ["AT_BOUND", "BOUNDS", "DEFAULT_FIT", "ENGINE_FACTOR_BOUNDS", "ENGINE_START", "ENGINE_TIME_FACTOR_BOUNDS",
           "FIT_LOADS", "HUBER_DELTA", "IDENTIFIED", "IDENTIFY_FACTOR", "PHYSICAL_MAX", "SCANNED", "SCAN_POINTS",
           "START", "STARTS_FLOOR", "STARTS_LOSS", "STARTS_SPREAD", "Predictor", "assumed_input_groups", "at_bound",
           "bounds", "engine_values", "fit", "from_z", "held_out_predictions", "huber_log",
           "identification", "input_assumed", "leave_one_out", "multistart", "predict_one", "source_weights",
           "summarize", "to_z", "unpinned", "z_of"]
