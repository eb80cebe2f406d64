"""The sweep engine: a study's grid, evaluated in blocks on every device.

Layout of the work (all shapes static, so one compiled program per study):

* The grid is outer x inner: outer axes change the operator table (model,
  workload, parallel degrees, chips), inner axes are hardware-only. The flat
  index is `o * n_inner + i`. A *block* is a (Co, Ci) tile of it: whole
  rows of inner points when they fit (Ci = n_inner), else one row cut in
  pieces of Ci. Blocks cover contiguous flat ranges in increasing order.
* A block is generated on the device from its id (mixed-radix decode of the
  outer and inner ranges), evaluated with the one `jaxplat.evaluate` mapped
  twice (outer with jax.vmap; inner with batching.grid_map over the block's
  own grid of hardware axes, so each intermediate is computed only over the
  hardware axes it depends on: an SRAM tiling once per SRAM size), and
  reduced on the device to a fixed-size `Summary`: counts, top-k, a 2-D
  Pareto front, per-axis counts and best objective, a histogram of the
  objective.
* The operator tables, which only the outer axes fix, are built in a step
  of their own when the study has hardware axes (search.served:
  `served_tables`, then `served_point` prices them): once per outer point
  before the sweep by a program of their own, compiled with XLA's cheapest
  settings while the step compiles; a block gathers its outer points'
  tables and prices them (`Engine.compile`).
* A *step* runs `blocks_per_step` blocks on each device (`lax.scan`, carry =
  a running summary) under `jax.shard_map` over a 1-D mesh of all devices,
  on one host or many (`jax.distributed`). Every device runs the same local
  program on the same block shape, so a block's numbers do not depend on how
  many devices there are. The host merges the per-device summaries.
* Merges only add integers, take maxima and select by a total order
  (score, then flat index), so the result is exactly the same for any device
  count, step size or interruption. The host state is written atomically
  after every step and a rerun resumes from the next block.
"""

import dataclasses
import functools
import math
import time
from concurrent.futures import ThreadPoolExecutor

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from jaxplat.cost import Metrics, priced_chip, safe_div
from jaxplat.model import Parallel
from jaxplat.search import train_study
from jaxplat.search.devices import device_profile
from jaxplat.search.grid import Grid
from jaxplat.search.gridmap import block_grid, digits, grid_map, vary_over, varying_axes, vmap_last
from jaxplat.search.merge import AMONG_ALL, COUNTERS, Merging
from jaxplat.search.reduce import identity, pick, variadic_reduce
from jaxplat.search.runtime import compile_once, shard_map
from jaxplat.search.served import served_metrics, served_point, served_tables  # noqa: F401 (served_metrics)
from jaxplat.search.study import METRICS, Study
from jaxplat.search.values_program import ValuesProgram, chunk_size
from jaxplat.specs import SpecError

# Build the operator tables apart (Engine.compile) while those of every outer
# point take at most HOIST_BYTES per device and there are at most
# HOIST_POINTS outer points (Engine._outer_tables makes one call for each).
HOIST_BYTES = 32 << 20
HOIST_POINTS = 4096
# A study without hardware axes and at most this many configurations compiles
# with fast_compile unless it says otherwise: its step is `evaluate` batched
# over outer points, which the older emitters run almost as fast, so the
# compile dominates (`jaxplat sweep` prints both, e.g. on
# specs/studies/parallelism-llama405b-h200.yaml with and without --fast-compile).
FAST_COMPILE_UP_TO = 1_000_000


# --------------------------------------------------------------- metrics


def available_metrics(study=None) -> tuple:
    """Metric names this build of the cost model can report for `study` (see METRICS)."""
    if getattr(study, "task", "infer") == "train":
        return train_study.TRAIN_METRIC_NAMES
    fields = {f.name for f in dataclasses.fields(Metrics)}
    return tuple(k for k, (src, _, _) in METRICS.items() if src == "derived" or src in fields)


def _metric_values(names, m: Metrics) -> jax.Array:
    """[len(names)] metric values of one configuration (SI units)."""
    out = []
    for name in names:
        src = METRICS[name][0]
        if name == "throughput_per_chip":
            out.append(safe_div(m.throughput, m.chips))
        elif name == "memory_fraction":
            out.append(safe_div(m.memory_bytes, m.capacity_bytes))
        else:
            out.append(getattr(m, src))
    return jnp.stack([jnp.asarray(v, jnp.float32) for v in out])


# ----------------------------------------------------------- the engine


class Engine(Merging):
    """Compiled evaluation of one study: `step(first_block)` -> per-device `Summary`s.

    Args:
      study: a validated `Study`.
      mesh: a 1-D `jax.sharding.Mesh` with axis 'd' (default: every device
        of every process).
      block: override the study's block size (configurations per block).
      blocks_per_step: override the blocks each device runs per step.
      fast_compile: override the study's engine.fast_compile (see `compile`);
        when neither says, on for a study without hardware axes and at most
        FAST_COMPILE_UP_TO configurations.
      regrid: map the trailing parallel and workload axes of a study without
        hardware axes as the block's grid (`layout`; False: point by point).
    """

    def __init__(self, study: Study, mesh=None, block=None, blocks_per_step=None, fast_compile=None,
                 regrid=True):
        self.study = study
        # The engine's own layout of the same flat index (`layout`): a study
        # without hardware axes has its trailing parallel and workload axes
        # mapped as a grid (grid_map) instead of point by point.
        self.st = layout(study) if regrid else study
        self.mesh = mesh or jax.make_mesh((jax.device_count(),), ("d",),
                                          axis_types=(jax.sharding.AxisType.Explicit,))
        self.n_dev = self.mesh.shape["d"]
        self.device = device_profile(self.mesh.devices.flat[0])
        fast = study.fast_compile if fast_compile is None else fast_compile
        if fast is None:
            fast = self.device.platform == "cpu" and not study.inner and study.size <= FAST_COMPILE_UP_TO
        self.fast_compile = bool(fast)
        # Architecture kinds (the static part of a Model: attention kind...),
        # in order of appearance; each kind's models stacked apart (`pick`),
        # the other kinds' places taken by its first model (never evaluated:
        # a block holds one model, so one kind).
        trees = [jax.tree.structure(m) for m in study.models]
        kinds = list(dict.fromkeys(trees))
        self.kinds = tuple(_kind_name(study.models[trees.index(t)]) for t in kinds)
        self._model_kind = np.array([kinds.index(t) for t in trees], np.int32)
        self._kind_models = [tuple(m if t == kind else next(x for x, tx in zip(study.models, trees) if tx == kind)
                                   for m, t in zip(study.models, trees)) for kind in kinds]
        training = getattr(study, "task", "infer") == "train"
        default = self.device.block
        if training and self.device.platform != "cpu":
            default = min(default, train_study.ACCEL_BLOCK)
        block = block or study.block or default
        chunk = self.device.eval_chunk
        chunk = min(chunk, block, study.n_outer // (len(study.models) if len(kinds) > 1 else 1)) \
            if chunk and not self.st.inner else 1
        block -= block % chunk  # whole chunks of outer points (_outer_points)
        self.grid = Grid.of(self.st, block, self.device.max_block, multiple=chunk,
                            segments=len(study.models) if len(kinds) > 1 else 1)
        self.eval_chunk = min(chunk, self.grid.co) if chunk > 1 else self.grid.co
        # Trailing whole grid axes that share the block grid's last dim (gridmap.block_grid).
        whole = self.st.inner[self.grid.split:]
        self.merge = _merge_count([len(a) for a in whole], self.device.grid_minor) if self.st is not study else 1
        if training:
            self.merge = train_study.grid_merge(whole, self.merge)
        # No more blocks per step than the study has for each device (a
        # step's padding blocks are evaluated too).
        bps = blocks_per_step or study.blocks_per_step or self.device.blocks_per_step
        self.blocks_per_step = max(1, min(bps, -(-self.grid.n_blocks // self.n_dev)))
        self.metrics = available_metrics(study)
        # The per-configuration function, a static choice: inference or a training step.
        self.measure = train_study.measure if training else served_point
        for name in (study.objective, *study.pareto):
            if name not in self.metrics:
                raise SpecError(f"study {study.name}: metric {name!r} is not reported by this cost model")
        # The metrics each configuration needs in the step: the objective
        # first, then the Pareto metrics (`_point`; the rest only for `values`).
        self.key_names = tuple(dict.fromkeys((study.objective, *study.pareto)))
        self.par_cols = tuple(self.key_names.index(p) for p in study.pareto)
        # Pareto axes oriented so that smaller is better.
        self.par_sign = tuple(1.0 if METRICS[p][1] == "min" else -1.0 for p in study.pareto)
        self.axis_sizes = tuple(len(a) for a in study.axes)
        self.axis_offsets = tuple(int(x) for x in np.cumsum((0,) + self.axis_sizes)[:-1])
        self.top_k = study.top_k * study.n_groups  # the study's top_k of each group-by value
        self.n_pareto = study.pareto_points
        self.bins = study.histogram_bins
        local = shard_map(self._local_step, self.mesh, in_specs=(P(), P()), out_specs=P("d"))
        self._step = jax.jit(local)
        self._compiled = None
        self._values = None   # the program of `values` (a ValuesProgram)
        self._hoisted = None  # the tables' pytree structure when they are built apart (`compile`)
        self._tables = ()     # their leaves, [n_outer, ...] each, replicated on every device

    # ---- one configuration

    def _configure(self, ov, iv, kind=0):
        """(model, hardware, parallel, workload, chips or None) of one
        configuration from its axis values (traced scalars: `ov` then `iv`
        follow the study's axes in order, split anywhere), its model one of
        kind `kind` (static index into `kinds`)."""
        st = self.st
        models = self._kind_models[kind]
        model, wl, par, hw = models[0], st.workloads[0], Parallel(), st.hardware
        chips_eq = None
        edits = []  # hardware axes edit the chosen chip: applied after the choice
        for axis, v in zip(st.axes, list(ov) + list(iv)):
            kind = axis.kind
            if axis.name == "model":
                model = pick(models, v)
            elif axis.name == "workload":
                wl = pick(st.workloads, v)
            elif axis.name == "hardware":
                hw = pick(st.chips, v)
            elif axis.name == "chips":
                chips_eq = v
            elif kind.group == "parallel":
                par = kind.setter(par, v)
            elif kind.group == "hardware":
                edits.append((kind.setter, v))
            else:
                wl = kind.setter(wl, v)
        for setter, v in edits:
            hw = setter(hw, v)
        if st.pricing == "technology":  # a hypothetical chip costs what its numbers cost to make
            hw = priced_chip(hw, st.technology)
        return model, hw, par, wl, chips_eq

    def _point(self, ov, iv, kind=0, names=None, tables=None):
        """Flags, score and Pareto keys of one configuration from its axis
        values (traced scalars), its model of kind `kind`. Only the metrics
        the study ranks by are computed (`key_names`, or `names`; XLA drops
        the rest of `evaluate`, e.g. energy when neither the objective nor
        the front needs it): the reported values of the top-k and front
        points come from `values` at the end. `tables`: the configuration's
        `served_tables` when built apart (`compile`)."""
        st = self.st
        extra = {} if tables is None else {"tables": tables}
        m, feasible, fails = self.measure(*self._configure(ov, iv, kind), st, **extra)
        keys = _metric_values(names or self.key_names, m)
        obj = keys[0]
        feasible = feasible & jnp.all(jnp.isfinite(keys))
        ok = feasible
        for f in fails.values():
            ok = ok & ~f
        score = obj if st.maximize else -obj
        return dict(keys=keys, score=score, obj=obj, feasible=feasible, ok=ok, **fails)

    def point_any_kind(self, ov, iv, names=None):
        """`_point` of a configuration whose model may be of any kind (chosen
        by its model value under lax.switch; the model axis leads `ov`)."""
        if len(self.kinds) == 1:
            return self._point(ov, iv, 0, names)
        which = jnp.asarray(self._model_kind, jnp.int32)[jnp.asarray(ov[0]).astype(jnp.int32)]
        return lax.switch(which, [functools.partial(self._point, kind=j, names=names)
                                  for j in range(len(self.kinds))], ov, iv)

    def _flat_point(self, values):
        """(every reported metric [metrics], ok, feasible) of one
        configuration from its axis values ([axes] float32, the study's axis
        order): `point_any_kind` asked for every metric."""
        n_out = len(self.st.outer)
        r = self.point_any_kind([values[j] for j in range(n_out)],
                                [values[j] for j in range(n_out, len(self.st.axes))], names=self.metrics)
        return r["keys"], r["ok"], r["feasible"]

    def axis_values(self, flat) -> np.ndarray:
        """[n, axes] float32 axis values of flat indices (host ints)."""
        flat = np.asarray(flat, np.int64).reshape(-1)
        axes = self.study.axes
        cols = [np.asarray(a.values, np.float32)[d] for a, d in zip(axes, digits(flat, [len(a) for a in axes]))]
        return np.stack(cols, axis=1) if cols else np.zeros((flat.size, 0), np.float32)

    def evaluate_flat(self, flat):
        """(vals [n, metrics] float32, ok [n], feasible [n]) of the
        configurations at these flat indices (host ints): the reported
        values of the top-k and front (`values`) and of their neighbours
        (search.alike), by `_flat_point`'s program (search.values_program:
        compiled beside the step; on the CPU for one point at a time, and
        batched for a call of more than VALUES_ONE_BY_ONE_UP_TO points)."""
        values = self.axis_values(flat)
        if not len(values):
            return np.zeros((0, len(self.metrics)), np.float32), np.zeros(0, bool), np.zeros(0, bool)
        if self._values is None:
            self._values = self._values_program()
        if not self._values.takes(len(values)):
            self._values = self._values_program(batched=True)
        return self._values(values)

    def values(self, flat) -> np.ndarray:
        """[n, metrics] float32: every reported metric of the configurations
        at these flat indices (host ints; `evaluate_flat`)."""
        return self.evaluate_flat(flat)[0]

    def _values_program(self, batched=None) -> ValuesProgram:
        """`_flat_point` compiled for this engine's devices (`ValuesProgram`; batched if `batched`)."""
        return ValuesProgram(self._flat_point, len(self.st.axes), chunk_size(self.top_k, self.n_pareto),
                             self.mesh.devices.flat[0].platform, batched)

    # ---- one block

    def _outer_values(self, o, xp=jnp):
        """Outer indices [n] -> (digits, values): one [n] array per outer axis each."""
        od = digits(o, [len(a) for a in self.st.outer])
        return od, [xp.asarray(a.values, xp.float32)[d] for a, d in zip(self.st.outer, od)]

    def _block(self, k, tables=()):
        """Evaluate block `k` (int32 scalar) -> (results [Co, Ci] (keys [Co, key metrics, Ci]), o [Co],
        i [Ci], valid [Co, Ci], outer digits [Co] per outer axis, lead digits [cl] per lead axis).
        `tables`: the operator tables built apart (their leaves, [n_outer, ...] each: `compile`)."""
        gr, st = self.grid, self.st
        seg, o0, j = gr.locate(k)
        o = o0 + jnp.arange(gr.co, dtype=jnp.int32)
        i = j * gr.ci + jnp.arange(gr.ci, dtype=jnp.int32)
        end = (seg + 1) * gr.seg_len  # blocks stop at their segment's end (Grid.n_seg)
        valid = (o < end)[:, None] & (i < gr.n_inner)[None, :]  # padded blocks: _block_summary
        oc = jnp.minimum(o, end - 1)
        od, ov = self._outer_values(oc)
        if len(self.kinds) > 1:  # one model, so one kind, per block (Grid.n_seg)
            branches = [functools.partial(self._evaluate_block, kind=kk, tables=tables)
                        for kk in range(len(self.kinds))]
            res = lax.switch(jnp.asarray(self._model_kind, jnp.int32)[seg], branches, ov, oc, j)
        else:
            res = self._evaluate_block(ov, oc, j, 0, tables)
        lead = jnp.minimum(j * gr.cl + jnp.arange(gr.cl, dtype=jnp.int32), gr.n_inner // gr.p - 1)
        ld = digits(lead, [len(a) for a in st.inner[:gr.split]])
        return res, o, i, valid, od, ld

    def _evaluate_block(self, ov, oc, j, kind, tables=()):
        """`_point` over a block: outer values `ov` ([Co] each) at outer
        indices `oc`, row-group position `j`, models of kind `kind` ->
        leaves [Co, Ci] (keys [Co, key metrics, Ci])."""
        gr, st = self.grid, self.st
        tabs = None  # the block's outer points' tables, when built apart (`compile`)
        if self._hoisted is not None:
            tabs = jax.tree.unflatten(self._hoisted, [t[oc] for t in tables])

        def point(ov, iv, tabs):
            return self._point(ov, iv, kind, tables=tabs)
        # Inner values on the block's own grid (Grid): the lead axis, then one
        # axis per whole trailing hardware axis; each value varies only along
        # its own axis, so grid_map keeps every intermediate on the axes it
        # depends on, with the points last (contiguous) in every array.
        nd = 1 + len(st.inner) - gr.split - (self.merge - 1)
        lead = jnp.minimum(j * gr.cl + jnp.arange(gr.cl, dtype=jnp.int32), gr.n_inner // gr.p - 1)
        iv = block_grid([np.asarray(a.values, np.float32) for a in st.inner],
                        digits(lead, [len(a) for a in st.inner[:gr.split]]), self.merge)
        inner = grid_map(point, in_axes=(None, -1, None), ndim=nd)

        def row(ov, tabs):
            res = inner(ov, iv, tabs)
            return {name: x.reshape(x.shape[:x.ndim - nd] + (gr.ci,)) for name, x in res.items()}
        if not st.inner:
            return self._outer_points(functools.partial(self._point, kind=kind), ov)
        if gr.co == 1:  # one outer point: no outer vmap (it costs trace time)
            return jax.tree.map(lambda x: x[None], row([v[0] for v in ov], jax.tree.map(lambda x: x[0], tabs)))
        return jax.vmap(row)(ov, tabs)  # leaves [Co, Ci]; keys [Co, key metrics, Ci]

    def _outer_points(self, point, ov):
        """A block of a study without hardware axes: `point` at every one of
        its Co outer points (values `ov`, [Co] each) -> leaves [Co, 1] (keys
        [Co, key metrics, 1]).

        Each configuration then has its own model, parallel degrees and
        workload, so every intermediate of the cost model (operator tables,
        collectives, placement) is computed per point. The points are mapped
        with the batch axis last (gridmap.vmap_last: each array's points are
        contiguous, which XLA:CPU vectorizes; jax.vmap puts them first, with
        a table's few rows as the minor axis), `eval_chunk` points at a time
        (lax.map) so that each intermediate stays in the CPU's caches while
        the block's summary covers many chunks."""
        co, chunk = self.grid.co, self.eval_chunk
        mapped = vmap_last(lambda v: point(v, []), in_axes=(-1,))
        if chunk >= co:
            res = mapped(ov)
        else:
            res = lax.map(mapped, [v.reshape(co // chunk, chunk) for v in ov])
            res = jax.tree.map(lambda x: jnp.moveaxis(x, 0, -2).reshape(x.shape[1:-1] + (co,)), res)
        return jax.tree.map(lambda x: jnp.moveaxis(x, -1, 0)[..., None], res)

    def _block_summary(self, k, tables):
        """Block `k` -> its counts, per-axis summaries and histogram, and its
        candidates for the running top-k and front (`cand`: flat [Co x Ci]
        score, Pareto keys, outer and inner index, ok)."""
        # Blocks past the end (the last step's padding) summarize nothing.
        # The conditional also makes XLA write the block's results once:
        # fused, their per-configuration arithmetic was recomputed in each of
        # the ~20 reductions of the summary (found in a profile of XLA:CPU).
        args = self._block(k, tables)
        # Under shard_map the block id varies over the devices; both branches'
        # outputs must too (a study without hardware axes can give some that
        # do not, and the padded branch's constants never do).
        axes = varying_axes(k)

        def vary(f):
            return lambda *a: jax.tree.map(lambda x: vary_over(x, axes), f(*a))
        return lax.cond(k < self.grid.n_blocks, vary(self._summarize), vary(self._summarize_none), *args)

    def _summarize_none(self, *args):
        """What `_summarize` gives for a block with no valid configuration
        (built from its shapes, so the summary is not compiled twice)."""
        shapes = jax.eval_shape(self._summarize, *args)
        full = lambda s, v: jnp.full(s.shape, v, s.dtype)  # noqa: E731
        out = {k: full(v, -jnp.inf if k == "ax_best" else 0) for k, v in shapes.items() if k != "cand"}
        out["cand"] = tuple(full(s, v) for s, v in zip(shapes["cand"], (-jnp.inf, jnp.inf, jnp.inf, 0, 0, False)))
        return out

    def _summarize(self, res, o, i, valid, od, ld):
        gr = self.grid
        ok = res["ok"] & valid
        feas = res["feasible"] & valid
        flags = [valid, feas, ok] + [res[c] & (valid if c in AMONG_ALL else feas) for c in COUNTERS[3:]]
        counts = jnp.stack(variadic_reduce([("sum", f) for f in flags]))
        best = jnp.where(ok, res["score"], -jnp.inf)
        ax_feas, ax_ok, ax_best = self._axis_summaries(feas, ok, best, od, ld)

        # Histogram of the objective over configurations that meet everything:
        # log-spaced bins, with under- and overflow bins at the ends.
        n = gr.co * gr.ci
        lo, hi = (math.log10(x) for x in self.st.histogram_range)
        lg = jnp.log10(jnp.maximum(jnp.abs(res["obj"]), 1e-30))
        b = jnp.clip(jnp.floor((lg - lo) / (hi - lo) * self.bins) + 1, 0, self.bins + 1).astype(jnp.int32)
        hist = jax.ops.segment_sum(ok.astype(jnp.int32).reshape(n), b.reshape(n), self.bins + 2)

        keys = jnp.moveaxis(res["keys"], 1, 0).reshape(-1, n)
        okf = ok.reshape(n)
        oo = jnp.broadcast_to(o[:, None], (gr.co, gr.ci)).reshape(n)
        ii = jnp.broadcast_to(i[None, :], (gr.co, gr.ci)).reshape(n)
        pa, pb = self._pareto_keys(keys, okf)
        return dict(counts=counts, ax_feas=ax_feas, ax_ok=ax_ok, ax_best=ax_best, hist=hist,
                    cand=(best.reshape(n), pa, pb, oo, ii, okf))

    def _axis_summaries(self, feas, ok, best, od, ld):
        """Per axis value (and group-by value): configurations that fit / meet
        every constraint, and the best score -> three [groups, sum of axis
        lengths]. Outer axes are segmented over the block's outer points; the
        hardware axes are reductions over the block's own grid (Grid), the
        lead axes then segmented over the block's few lead points. The three
        quantities are reduced together (`variadic_reduce`: each kernel costs
        compile time)."""
        gr, st = self.grid, self.st
        ng = st.n_groups
        gd = od[st.group_by] if st.group_by >= 0 else jnp.zeros((gr.co,), jnp.int32)
        ops = ("sum", "sum", "max")
        segs = (jax.ops.segment_sum, jax.ops.segment_sum, jax.ops.segment_max)
        out = ([], [], [])  # per axis [ng, len] each
        rows = variadic_reduce(list(zip(ops, (feas, ok, best))), 1)  # [Co] each
        for acc, x, seg in zip(out, rows, segs):
            for a, d in zip(st.outer, od):
                acc.append(seg(x, gd * len(a) + d, ng * len(a)).reshape(ng, len(a)))
        if st.inner:
            trail = tuple(len(a) for a in st.inner[gr.split:])
            hot = (gd[:, None] == jnp.arange(ng))[:, :, None]  # [Co, ng, 1]
            grids = variadic_reduce([(op, jnp.where(hot, x[:, None], identity(op, x.dtype)))
                             for op, x in zip(ops, (feas, ok, best))], 0)
            grids = [x.reshape((ng, gr.cl) + trail) for x in grids]
            per_lead = variadic_reduce(list(zip(ops, grids)), tuple(range(2, 2 + len(trail))))  # [ng, cl] each
            for acc, x, seg in zip(out, per_lead, segs):
                for a, d in zip(st.inner[:gr.split], ld):
                    acc.append(seg(x.T, d, len(a)).T)
            for t in range(len(trail)):
                kept = tuple(ax for ax in range(1, 2 + len(trail)) if ax != 2 + t)
                per_axis = variadic_reduce(list(zip(ops, grids)), kept)
                for acc, x in zip(out, per_axis):
                    acc.append(x)
        cat = lambda xs, dt: jnp.concatenate(xs, axis=1) if xs else jnp.zeros((ng, 0), dt)  # noqa: E731
        return cat(out[0], jnp.int32), cat(out[1], jnp.int32), cat(out[2], jnp.float32)

    def _pareto_keys(self, vals, ok):
        """Both Pareto metrics oriented to be minimized, inf where not ok; vals [keys, n]."""
        (ca, cb), (sa, sb) = self.par_cols, self.par_sign
        a = jnp.where(ok, sa * vals[ca], jnp.inf)
        b = jnp.where(ok, sb * vals[cb], jnp.inf)
        return a, b

    def _local_step(self, first, tables):
        """Per device: blocks first + d*G ... + G - 1, reduced into one summary."""
        d = lax.axis_index("d")
        start = first + d * self.blocks_per_step

        def body(run, gidx):
            return self._merge(run, self._block_summary(start + gidx, tables)), None

        # The carry varies over devices (each runs its own blocks).
        init = jax.tree.map(lambda x: vary_over(x, ("d",)), self.empty())
        run, _ = lax.scan(body, init, jnp.arange(self.blocks_per_step, dtype=jnp.int32))
        return jax.tree.map(lambda x: x[None], run)

    def step(self, first_block: int):
        """Dispatch one step (asynchronous); returns per-device summaries [D, ...]."""
        if self._compiled is None:
            self.compile()
        return self._compiled(np.int32(first_block), self._tables)

    def _tables_of(self, ov):
        """Step 1 of a configuration: `served_tables` at outer values `ov`
        (the chip before the hardware axes' edits, none of which changes
        its GEMM dtypes: tests/test_two_step.py)."""
        model, hw, par, wl, _ = self._configure(ov, [])
        return served_tables(model, hw, par, wl, self.st.options)

    def _outer_tables(self, build, sharding):
        """The operator tables of every outer point (`build`: the compiled
        `_tables_of`) -> tuple of [n_outer, ...] arrays (their leaves) with
        `sharding`. One call per outer point (a batched program traces and
        compiles slower than the calls take); the same on every process,
        each running it on its own devices."""
        _, ov = self._outer_values(np.arange(self.grid.n_outer), np)
        rows = [jax.tree.leaves(build([x[j] for x in ov])) for j in range(self.grid.n_outer)]
        tables = [np.stack(col) for col in zip(*jax.device_get(rows))]
        return tuple(jax.make_array_from_callback(x.shape, sharding, lambda idx, x=x: x[idx]) for x in tables)

    @property
    def blocks_per_call(self) -> int:
        return self.n_dev * self.blocks_per_step

    def compile(self):
        """Compile the step now (once; `step` runs this executable); returns seconds spent.

        When an inference study has hardware axes and few enough outer
        points, the operator tables, which only the outer axes fix, are
        built apart (`_tables_of`, step 1): compiled as their own program
        with XLA's cheapest settings, beside the step, and run once here for
        every outer point; the step gathers and prices them (step 2).
        With `fast_compile` on the CPU backend, XLA uses its older loop
        emitters for the step: less compile time and fewer configs/s
        (`experiments/bench_sweep.py --fast-compile`), for short studies.
        """
        t = time.perf_counter()
        platform = self.mesh.devices.flat[0].platform
        n_outer = self.grid.n_outer
        one = [jnp.float32(0)] * len(self.st.outer), [jnp.float32(0)] * len(self.st.inner)
        self._hoisted, self._tables, specs = None, (), ()
        # Not for a regridded study (`layout`): its outer part is the model,
        # use case and chip choices, and gathering tables for them cost
        # more than it saved (catalog-parallelism: 1.02e6 against 9.1e5
        # configurations per CPU-second pair, experiments/bench_sweep.py).
        if self.st.inner and self.st is self.study and n_outer <= HOIST_POINTS and len(self.kinds) == 1 \
                and self.measure is served_point:
            shapes = jax.eval_shape(self._tables_of, one[0])
            outer = jax.jit(self._tables_of).lower(one[0])
            if n_outer * sum(s.size * s.dtype.itemsize for s in jax.tree.leaves(shapes)) <= HOIST_BYTES:
                self._hoisted = jax.tree.structure(shapes)
                shapes = jax.tree.leaves(shapes)
                rep = NamedSharding(self.mesh, P())
                specs = tuple(jax.ShapeDtypeStruct((n_outer,) + s.shape, s.dtype, sharding=rep) for s in shapes)
        with ThreadPoolExecutor(2) as pool:
            # XLA releases the GIL: the step compiles while the program of
            # `values` compiles and the outer part compiles and runs.
            step = pool.submit(compile_once, self._step.lower(np.int32(0), specs), platform,
                               tuple(d.id for d in self.mesh.devices.flat), fast_compile=self.fast_compile)
            values = pool.submit(self._values_program) if self._values is None else None
            if self._hoisted is not None:
                self._tables = self._outer_tables(compile_once(outer, platform, cheap=True), rep)
            self._compiled = step.result()
            if values is not None:
                self._values = values.result()
        return time.perf_counter() - t


def layout(study: Study) -> Study:
    """The engine's layout of a study without hardware axes: its trailing
    parallel and workload axes (after the model, use-case and chip choices
    and the group-by axis) become the block's grid, the way hardware axes
    are (grid_map: each intermediate computed only over the axes it
    depends on: a collective's coefficients once per tp, not once per
    batch). The flat index (row-major over the axes, in order) is the same,
    so results do not depend on the layout. Other studies are unchanged."""
    if study.inner:
        return study
    movable = 0
    for pos in range(len(study.outer) - 1, study.group_by, -1):
        axis = study.outer[pos]
        if axis.kind.setter is None or axis.kind.group not in ("parallel", "workload"):
            break
        movable += 1
    if movable == 0:
        return study
    cut = len(study.outer) - movable
    return dataclasses.replace(study, outer=study.outer[:cut], inner=study.outer[cut:])


def _merge_count(sizes, most) -> int:
    """How many of the last grid axes (`sizes`) share one dim of at most
    `most` points (at least 1; 1 when `most` is None)."""
    m, points = 1, sizes[-1] if sizes else 1
    while most is not None and m < len(sizes) and points * sizes[-1 - m] <= most:
        points *= sizes[-1 - m]
        m += 1
    return m


def _kind_name(model) -> str:
    """The static fields of a model (its architecture kind), e.g. 'attention=mla'."""
    return ", ".join(f"{f.name}={getattr(model, f.name)}" for f in dataclasses.fields(model)
                     if f.metadata.get("static"))
