"""Study specs: YAML -> a validated `Study` (the design space of a sweep).

A study names models, workloads, a hardware base and axes over any traced
number of the cost model, plus constraints and an objective. Its size is the
product of the axes' lengths. Example (see specs/studies/):

    name: what-if
    models: [llama-3.1-70b]
    workloads: [chatbot]
    hardware: h200-sxm          # or a list of chips: an outer axis 'hardware'
    axes:
      tp: [1, 2, 4, 8]
      batch: {pow2: [1, 256]}
      hbm_bandwidth: {log: [1e12, 1.6e13], count: 64}
    constraints: {max_chips: 64, ttft: workload, tpot: workload}
    objective: {maximize: throughput_per_chip}
    pareto: [tpot, throughput_per_chip]

Numbers are SI (FLOP/s, bytes, bytes/s, seconds). Models may mix
architecture kinds (GQA, MoE, MLA: search.Engine evaluates each kind's
blocks with that kind's program). Everything here runs on the host;
`jaxplat.search` turns a `Study` into device code.
"""

import dataclasses
import hashlib
import json
import math

import jax
import jax.numpy as jnp
import numpy as np

from jaxplat.model import (
    PROFILES,
    Options,
    chip_software_stack,
    default_calibration,
    get,
    hardware_from_dict,
    load_hardware,
    load_model,
    load_software,
    load_technology,
    load_workload,
    replace,
    workload_from_dict,
)
from jaxplat.model.software_spec import default_software
from jaxplat.search.train_metrics import TRAIN_METRICS
from jaxplat.specs import SpecError, check_keys, choice, number, read_yaml, spec_label, units

# ------------------------------------------------------------------ axes
#
# Each axis sets one number (or a few tied numbers) of one pytree. `group`
# says which: 'hardware' axes vary fastest in the flat index (they never
# change the operator table, so the search vmaps them innermost and the table
# is built once per outer point).


def _set_at(field, i):
    def setter(tree, v):  # field: a pytree field or a "group.field" path (Hardware)
        return replace(tree, **{field: get(tree, field).at[i].set(v)})
    return setter


def _set(field):
    return lambda tree, v: replace(tree, **{field: v})


def _set_flops(hw, v):
    # v is the bf16 peak; every other dtype keeps the base chip's ratio to it.
    base = hw.chip.flops
    return replace(hw, flops=base * (v / base[units.DTYPES.index("bf16")]))


_BYTES = np.array([units.BYTES_PER_ELEMENT[d] for d in units.DTYPES], np.float32)
# Indexed over units.WEIGHT_DTYPES, which begins with units.DTYPES in their order: the weight_dtype
# and experts_dtype axes may also take a storage format (mxfp4), the other dtype axes compute dtypes only.
_WEIGHT_BYTES = np.array([units.WEIGHT_BYTES_PER_ELEMENT[d] for d in units.WEIGHT_DTYPES], np.float32)


_WEIGHT_FIELDS = ("bytes_weight", "bytes_expert_weight")
_WEIGHT_AXES = ("weight_dtype", "experts_dtype")


def _set_dtype(fields):
    def setter(wl, v):  # v: index into units.DTYPES (a float; units.WEIGHT_DTYPES for weights' axes)
        i = v.astype(jnp.int32)
        b, bw = jnp.asarray(_BYTES)[jnp.minimum(i, len(_BYTES) - 1)], jnp.asarray(_WEIGHT_BYTES)[i]
        changes = {f: bw if f in _WEIGHT_FIELDS else b for f in fields if f != "compute_dtype"}
        if "compute_dtype" in fields:
            # one dtype for everything: the routed experts' weights too (Workload.bytes_expert_weight)
            changes.update(compute_dtype=v, bytes_expert_weight=0.0)
        return replace(wl, **changes)
    return setter


@dataclasses.dataclass(frozen=True)
class AxisKind:
    """One kind of axis: the pytree it changes, how, and its unit for reports."""

    group: str          # 'model', 'workload', 'chip', 'parallel' or 'hardware'
    setter: object      # (tree, traced value) -> tree; None for model/workload choice
    unit: str
    doc: str
    categorical: bool = False
    # Which way a hardware number helps: "more" (FLOP/s, bandwidths, sizes: a
    # requirement is the smallest value that works), "less" (latencies, price,
    # power: the largest value that works); None for other axes.
    better: str | None = None


AXIS_KINDS = {
    # choices among the study's models / workloads / chips (values are indices)
    "model": AxisKind("model", None, "", "which of `models`", categorical=True),
    "workload": AxisKind("workload", None, "", "which of `workloads`", categorical=True),
    "hardware": AxisKind("chip", None, "", "which of `hardware` (the chip every hardware axis edits)",
                         categorical=True),
    # the chips a deployment must use exactly (tp*pp*ep*dp*sp == chips): a
    # parallelism search that fills the machine it is given
    "chips": AxisKind("chips", None, "chips", "chips used, exactly"),
    # parallel degrees (jaxplat.parallel.Parallel)
    **{k: AxisKind("parallel", _set(k), "", f"{k} degree") for k in ("tp", "pp", "ep", "dp", "cp", "microbatches")},
    "sp": AxisKind("parallel", _set("cp"), "", "cp degree (context parallel; sp is its former name)"),
    "overlap": AxisKind("parallel", _set("overlap"), "", "fraction of communication hidden"),
    "moe_ep": AxisKind("parallel", _set("moe_ep"), "", "experts split over the tp chips (MoE TP = tp / moe_ep)"),
    "moe_gather": AxisKind("parallel", _set("moe_gather"), "",
                           "1: MoE tokens by all-gather/reduce-scatter, 0: all-to-all"),
    # workload numbers (jaxplat.workload.Workload)
    "batch": AxisKind("workload", _set("batch"), "seq", "sequences per replica"),
    "prompt": AxisKind("workload", _set("prompt"), "tok", "prompt tokens"),
    "output": AxisKind("workload", _set("output"), "tok", "output tokens"),
    "beams": AxisKind("workload", _set("beams"), "", "beams per sequence"),
    "dtype": AxisKind("workload", _set_dtype(("bytes_weight", "bytes_act", "bytes_kv", "compute_dtype")), "",
                      "one dtype for weights, activations (compute) and KV", categorical=True),
    "weight_dtype": AxisKind("workload", _set_dtype(("bytes_weight",)), "", "weight dtype", categorical=True),
    "kv_dtype": AxisKind("workload", _set_dtype(("bytes_kv",)), "", "KV-cache dtype", categorical=True),
    "experts_dtype": AxisKind("workload", _set_dtype(("bytes_expert_weight",)), "",
                              "routed experts' weight dtype (gpt-oss: mxfp4)", categorical=True),
    # hardware numbers (jaxplat.hardware.Hardware), SI
    "flops": AxisKind("hardware", _set_flops, "FLOP/s", "dense bf16 peak (other dtypes keep the chip's ratio)",
                      better="more"),
    "hbm_bandwidth": AxisKind("hardware", _set_at("memory.bandwidth", 0), "B/s", "main-memory bandwidth",
                              better="more"),
    "hbm_size": AxisKind("hardware", _set_at("memory.size", 0), "B", "main-memory capacity", better="more"),
    "sram_size": AxisKind("hardware", _set("memory.sram_size"), "B", "on-chip SRAM capacity", better="more"),
    "sram_bandwidth": AxisKind("hardware", _set("memory.sram_bandwidth"), "B/s", "on-chip SRAM bandwidth",
                               better="more"),
    "link_bandwidth": AxisKind("hardware", _set_at("network.bandwidth", 0), "B/s",
                               "scale-up link, per chip per direction", better="more"),
    "link_latency": AxisKind("hardware", _set_at("network.latency", 0), "s", "scale-up link latency", better="less"),
    "domain": AxisKind("hardware", _set_at("network.domain", 0), "chips", "scale-up domain size", better="more"),
    "scaleout_bandwidth": AxisKind("hardware", _set_at("network.bandwidth", 1), "B/s", "scale-out link, per chip",
                                   better="more"),
    "scaleout_latency": AxisKind("hardware", _set_at("network.latency", 1), "s", "scale-out latency", better="less"),
    **{f"eff_{k}": AxisKind("hardware", _set(f"efficiency.{k}"), "", f"achievable fraction of {what}", better="more")
       for k, what in (("compute", "peak FLOP/s"), ("memory", "memory bandwidth"), ("network", "link bandwidth"))},
    "price": AxisKind("hardware", _set("cost.price"), "USD", "price per chip", better="less"),
    "tdp": AxisKind("hardware", _set("power.tdp"), "W", "board power", better="less"),
    # compute structure (the spec's `chip:` section; array axes need a chip with systolic arrays)
    "array_rows": AxisKind("hardware", _set("chip.array_rows"), "PEs", "systolic array rows", better="more"),
    "array_cols": AxisKind("hardware", _set("chip.array_cols"), "PEs", "systolic array columns", better="more"),
    "cores": AxisKind("hardware", _set("chip.cores"), "", "systolic array cores", better="more"),
    "clock": AxisKind("hardware", _set("chip.clock_hz"), "Hz", "systolic array clock", better="more"),
    "vector_flops": AxisKind("hardware", _set("chip.vector_flops"), "FLOP/s", "element-wise (vector) unit",
                             better="more"),
    "exp_rate": AxisKind("hardware", _set("chip.exp_rate"), "exp/s",
                         "special-function units' exponentials (attention's softmax)", better="more"),
    "host_flops": AxisKind("hardware", _set("host.flops"), "FLOP/s", "offload host", better="more"),
    "host_bandwidth": AxisKind("hardware", _set("host.bandwidth"), "B/s", "link to the offload host", better="more"),
}
_ARRAY_AXES = ("array_rows", "array_cols", "cores", "clock")

# ---------------------------------------------------------------- metrics
#
# name -> (Metrics field or derived, better direction, unit). Derived ones are
# computed in jaxplat.search from Metrics fields only.
METRICS = {
    "throughput_per_chip": ("derived", "max", "tok/s/chip"),
    "throughput": ("throughput", "max", "tok/s"),
    "ttft": ("ttft", "min", "s"),
    "tpot": ("tpot", "min", "s"),
    "e2e": ("e2e", "min", "s"),
    "chips": ("chips", "min", "chips"),
    "memory_bytes": ("memory_bytes", "min", "B"),
    "memory_fraction": ("derived", "min", ""),
    "cost_per_mtok_usd": ("cost_per_mtok_usd", "min", "USD/Mtok"),
    "energy_per_token_j": ("energy_per_token_j", "min", "J/tok"),
    **TRAIN_METRICS,  # a training study's (search.train_study)
}

_STUDY_KEYS = ("name", "description", "models", "workloads", "hardware", "options", "axes", "constraints",
               "objective", "pareto", "top_k", "group_by", "engine", "price", "technology", "software")
# Hardware axes that change what a chip costs to make: with `price: technology`
# (the default when a study varies one of them) every point's price, TDP and
# static power come from the technology model of its own numbers
# (cost.money.priced_chip, the pricing co-design uses), not the base chip's.
PRICED_AXES = ("flops", "hbm_bandwidth", "hbm_size", "sram_size", "link_bandwidth", "array_rows", "array_cols", "cores",
               "clock")
PRICINGS = ("fixed", "technology")
_CONSTRAINT_KEYS = ("max_chips", "ttft", "tpot", "max_memory_fraction")
_ENGINE_KEYS = ("block", "blocks_per_step", "pareto_points", "histogram_bins", "histogram_range", "fast_compile")
_RANGE_KEYS = ("linear", "log", "pow2", "count")


@dataclasses.dataclass(frozen=True)
class Axis:
    """One axis: its name, values (float64, SI) and labels for categorical ones."""

    name: str
    values: np.ndarray
    labels: tuple = ()

    @property
    def kind(self) -> AxisKind:
        return AXIS_KINDS[self.name]

    def __len__(self):
        return len(self.values)

    def label(self, i: int):
        return self.labels[i] if self.labels else float(self.values[i])


@dataclasses.dataclass(frozen=True)
class Study:
    """A validated study. `outer` axes change the operator table (model,
    workload, parallel); `inner` axes are hardware-only. The flat index is
    row-major over outer + inner, in this order (inner vary fastest)."""

    name: str
    models: tuple          # Model pytrees (any mix of architecture kinds: search.Engine)
    model_names: tuple
    workloads: tuple       # Workload pytrees
    workload_names: tuple
    hardware: object       # Hardware pytree: the first chip of `hardwares`
    hardware_name: str
    options: Options
    outer: tuple           # Axis, ...
    inner: tuple
    max_chips: float       # inf when unbounded
    ttft: object           # 'workload', None or seconds
    tpot: object
    max_memory_fraction: float
    objective: str
    maximize: bool
    pareto: tuple          # two metric names
    top_k: int
    block: int | None            # None: the device's default (search.devices)
    blocks_per_step: int | None
    pareto_points: int
    histogram_bins: int
    histogram_range: tuple  # (lo, hi) of the objective, log-spaced bins
    fingerprint: str
    group_by: int = -1     # index into `outer` of the axis per-axis summaries are split by (-1: none)
    fast_compile: bool | None = None  # CPU: XLA's older loop emitters; None: automatic (search.Engine)
    pricing: str = "fixed"  # "fixed": the base chip's price and TDP; "technology": priced per point
    technology: object = None  # Technology pytree when pricing == "technology"
    technology_name: str = ""
    hardwares: tuple = ()  # every chip of `hardware:` (a list: the outer axis 'hardware'); () = (hardware,)
    hardware_names: tuple = ()
    software: str = ""     # the software stack its chips run (specs/software)

    @property
    def chips(self) -> tuple:
        """The study's chips (Hardware pytrees): the values of its 'hardware' axis."""
        return self.hardwares or (self.hardware,)

    @property
    def pricing_text(self) -> str:
        """One line saying how chips were priced (for summaries)."""
        if self.pricing == "technology":
            return (f"chip price, TDP and static power: technology model {self.technology_name} of each point's "
                    "FLOP/s, SRAM, HBM stacks and links (price: technology)")
        if self.hardwares:
            return f"chip price and TDP: fixed, each chip's own ({', '.join(self.hardware_names)}; price: fixed)"
        return f"chip price and TDP: fixed, {self.hardware_name}'s (price: fixed)"

    @property
    def n_groups(self) -> int:
        return len(self.outer[self.group_by]) if self.group_by >= 0 else 1

    @property
    def axes(self) -> tuple:
        return self.outer + self.inner

    @property
    def n_outer(self) -> int:
        return math.prod(len(a) for a in self.outer)

    @property
    def n_inner(self) -> int:
        return math.prod(len(a) for a in self.inner)

    @property
    def size(self) -> int:
        return self.n_outer * self.n_inner

    def decode(self, flat) -> dict:
        """Axis values of flat indices (host, numpy int64 array) -> {name: array}."""
        flat = np.asarray(flat, np.int64)
        out = {}
        rest = flat.copy()
        for a in reversed(self.axes):
            d = rest % len(a)
            rest //= len(a)
            out[a.name] = (np.array(a.labels, object)[d] if a.labels else a.values[d])
        return {a.name: out[a.name] for a in self.axes}


def _values(src, name, spec) -> tuple[np.ndarray, tuple]:
    """An axis spec (list or range) -> float64 values and labels."""
    kind = AXIS_KINDS[name]
    where = f"{src}: axes.{name}"
    if kind.categorical and name in ("dtype", "kv_dtype") + _WEIGHT_AXES:
        names = units.WEIGHT_DTYPES if name in _WEIGHT_AXES else units.DTYPES
        if not isinstance(spec, list) or not spec:
            raise SpecError(f"{where} must be a non-empty list of dtypes ({', '.join(names)})")
        for v in spec:
            if v not in names:
                raise SpecError(f"{where} has unknown dtype {v!r}; allowed: {', '.join(names)}")
        return np.array([names.index(v) for v in spec], np.float64), tuple(spec)
    if isinstance(spec, list):
        if not spec:
            raise SpecError(f"{where} is an empty list")
        vals = []
        for v in spec:
            try:
                vals.append(float(v))
            except (TypeError, ValueError):
                raise SpecError(f"{where} must hold numbers, got {v!r}") from None
        vals = np.array(vals, np.float64)
    elif isinstance(spec, dict):
        check_keys(src, f"axes.{name}.", spec, _RANGE_KEYS)
        modes = [k for k in ("linear", "log", "pow2") if k in spec]
        if len(modes) != 1:
            raise SpecError(f"{where} needs exactly one of linear, log, pow2 (a [lo, hi] pair)")
        mode = modes[0]
        lohi = spec[mode]
        try:
            lo, hi = (number(src, f"axes.{name}.{mode}", x, positive=False) for x in lohi)  # finite
        except (TypeError, ValueError):
            raise SpecError(f"{where}.{mode} must be a [lo, hi] pair of numbers, got {lohi!r}") from None
        if mode == "pow2":
            if "count" in spec:
                raise SpecError(f"{where}: pow2 takes no count (it lists every power of 2 in [lo, hi])")
            if not 0 < lo <= hi < math.inf:  # (NaN fails every comparison)
                raise SpecError(f"{where}.pow2 needs 0 < lo <= hi, got [{lo:g}, {hi:g}]")
            vals = 2.0 ** np.arange(math.ceil(math.log2(lo)), math.floor(math.log2(hi)) + 1)
        else:
            n = spec.get("count")
            if not isinstance(n, int) or isinstance(n, bool) or n < 1:
                raise SpecError(f"{where}: {mode} needs a positive integer count, got {n!r}")
            if mode == "log" and (lo <= 0 or hi <= 0):
                raise SpecError(f"{where}.log needs positive bounds, got [{lo:g}, {hi:g}]")
            vals = np.geomspace(lo, hi, n) if mode == "log" else np.linspace(lo, hi, n)
    else:
        raise SpecError(f"{where} must be a list or a range mapping (linear/log with count, or pow2)")
    if not np.all(np.isfinite(vals)):
        raise SpecError(f"{where} has non-finite values")
    if name != "overlap" and np.any(vals < 0):
        raise SpecError(f"{where} must be non-negative")
    if kind.group == "parallel" and name != "overlap" and np.any(vals < 1):
        raise SpecError(f"{where}: parallel degrees are at least 1")
    return vals, ()


def _named_list(src, key, d, loader, from_dict):
    raw = d.get(key)
    if raw is None:
        raise SpecError(f"{src}: missing key {key!r}")
    if not isinstance(raw, list):
        raw = [raw]
    if not raw:
        raise SpecError(f"{src}: {key} is an empty list")
    trees, names = [], []
    for i, item in enumerate(raw):
        if isinstance(item, dict):
            trees.append(from_dict(item, src=f"{src}: {key}[{i}]"))
            names.append(str(item.get("name", f"{key}[{i}]")))
        else:
            trees.append(loader(item))
            names.append(spec_label(item) if key == "workloads" else str(item))  # a file: its name, not its path
    return tuple(trees), tuple(names)


def _same_chip_structure(src, chips, names):
    """A list of chips is one categorical axis, stacked into one pytree per
    leaf (search.reduce.pick): its chips must share their static fields
    (systolic arrays or not, offload tiers) and leaf shapes (network levels)."""
    ref = jax.tree.structure(chips[0]), [np.shape(x) for x in jax.tree.leaves(chips[0])]
    for chip, name in zip(chips[1:], names[1:]):
        if (jax.tree.structure(chip), [np.shape(x) for x in jax.tree.leaves(chip)]) != ref:
            raise SpecError(f"{src}: hardware {name!r} differs in structure from {names[0]!r} (systolic "
                            "arrays, offload tiers or network levels); list such chips in separate studies")


def _slo(src, key, v):
    if v is None or v == "none":
        return None
    if v == "workload":
        return "workload"
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise SpecError(f"{src}: constraints.{key} must be seconds, 'workload' or 'none', got {v!r}") from None
    if not 0 < x < math.inf:  # no limit is 'none'
        raise SpecError(f"{src}: constraints.{key} must be positive, finite seconds, got {x}")
    return x


def _metric(src, key, name):
    return choice(f"{src}: {key}", name, METRICS)


def study_from_dict(d: dict, src="study", calibration=None, software=None) -> Study:
    """Validate a study dict and build a `Study` (one-line SpecError otherwise).
    `calibration`: efficiency parameters applied to the study's chip
    (jaxplat.model.Calibration, from `--calibration FILE`). `software`: the
    software stack its chips run (`--engine`), else the study's `software:`
    (a name in specs/software or a file), else each chip's default."""
    if "params" in d and "technology" in d:  # a codesign study (jaxplat.codesign), not a sweep
        raise SpecError(f"{src}: this is a co-design study; run it with `jaxplat codesign {src}`")
    check_keys(src, "", d, _STUDY_KEYS, required=("models", "workloads", "hardware", "objective"))
    models, model_names = _named_list(src, "models", d, load_model, _model_from_dict)
    if any(m.windowed for m in models):  # one table structure: local-attention rows for all (zero for some)
        models = tuple(dataclasses.replace(m, windowed=True) for m in models)
    workloads, workload_names = _named_list(src, "workloads", d, load_workload, workload_from_dict)
    if not isinstance(d["hardware"], (str, dict, list)) or d["hardware"] == []:
        raise SpecError(f"{src}: hardware must be a built-in chip name, a path, a mapping or a list of them")
    if isinstance(d["hardware"], list) and not all(isinstance(h, (str, dict)) for h in d["hardware"]):
        raise SpecError(f"{src}: hardware must list built-in chip names, paths or mappings")
    if software is None and d.get("software") is not None:
        software = load_software(d["software"])
    chips, chip_names = _named_list(
        src, "hardware", d, lambda name: load_hardware(name, calibration, software),
        lambda item, src: hardware_from_dict(item, src=src, calibration=calibration, defaults=default_calibration(),
                                             software=software))
    if isinstance(d["hardware"], dict):
        chip_names = (str(d["hardware"].get("name", "hardware")),)
    hardware, hw_name = chips[0], chip_names[0]
    if any(len(set(n)) < len(n) for n in (chip_names, model_names, workload_names)):
        raise SpecError(f"{src}: models, workloads and hardware must name each entry once")
    _same_chip_structure(src, chips, chip_names)

    opts = d.get("options", {}) or {}
    check_keys(src, "options.", opts, ("profile", "fused_attention"))
    choice(f"{src}: options.profile", opts.get("profile", "default"), PROFILES)
    options = Options(profile=opts.get("profile", "default"), fused_attention=bool(opts.get("fused_attention", True)))

    axes_raw = d.get("axes", {}) or {}
    if not isinstance(axes_raw, dict):
        raise SpecError(f"{src}: axes must be a mapping of axis name to a list or range")
    check_keys(src, "axes.", axes_raw, tuple(k for k in AXIS_KINDS if k not in ("model", "workload", "hardware")))
    outer, inner = [], []
    if len(models) > 1:
        outer.append(Axis("model", np.arange(len(models), dtype=np.float64), model_names))
    if len(workloads) > 1:
        outer.append(Axis("workload", np.arange(len(workloads), dtype=np.float64), workload_names))
    if len(chips) > 1:
        outer.append(Axis("hardware", np.arange(len(chips), dtype=np.float64), chip_names))
    for name, spec in axes_raw.items():
        vals, labels = _values(src, name, spec)
        next_domain = min(float(h.network.domain[1]) for h in chips)
        if name == "domain" and np.any(vals >= next_domain):
            raise SpecError(f"{src}: axes.domain must stay below the next network level's domain "
                            f"({next_domain:g} chips)")
        if name in _ARRAY_AXES and not hardware.chip.dataflow:
            raise SpecError(f"{src}: axes.{name} needs a chip with systolic arrays (a compute.array block)")
        if name == "flops" and hardware.chip.dataflow:
            raise SpecError(f"{src}: axes.flops: this chip's GEMMs run on its systolic arrays; "
                            "sweep array_rows, array_cols, cores or clock instead")
        (inner if AXIS_KINDS[name].group == "hardware" else outer).append(Axis(name, vals, labels))

    c = d.get("constraints", {}) or {}
    check_keys(src, "constraints.", c, _CONSTRAINT_KEYS)
    max_chips = number(src, "constraints.max_chips", c["max_chips"]) if c.get("max_chips") is not None else math.inf
    if max_chips <= 0:
        raise SpecError(f"{src}: constraints.max_chips must be positive")
    frac = number(src, "constraints.max_memory_fraction", c.get("max_memory_fraction", 1.0))
    if not 0 < frac <= 1:
        raise SpecError(f"{src}: constraints.max_memory_fraction must be in (0, 1], got {frac}")

    obj = d["objective"]
    if not isinstance(obj, dict) or len(obj) != 1 or next(iter(obj)) not in ("maximize", "minimize"):
        raise SpecError(f"{src}: objective must be {{maximize: METRIC}} or {{minimize: METRIC}}; "
                        f"metrics: {', '.join(METRICS)}")
    (sense, objective), = obj.items()
    _metric(src, "objective", objective)
    pareto = d.get("pareto", ["tpot", "throughput_per_chip"])
    if not isinstance(pareto, list) or len(pareto) != 2:
        raise SpecError(f"{src}: pareto must be a list of two metrics, e.g. [tpot, throughput_per_chip]")
    for p in pareto:
        _metric(src, "pareto", p)

    eng = d.get("engine", {}) or {}
    check_keys(src, "engine.", eng, _ENGINE_KEYS)
    ints = {}
    # block and blocks_per_step: None = the device's default (search.devices)
    for k, default in (("block", None), ("blocks_per_step", None), ("pareto_points", 256), ("histogram_bins", 60)):
        v = eng.get(k, default)
        if v is None and default is None:
            ints[k] = None
            continue
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise SpecError(f"{src}: engine.{k} must be a positive integer, got {v!r}")
        ints[k] = v
    hr = eng.get("histogram_range", [1e-6, 1e9])
    try:
        hlo, hhi = (float(x) for x in hr)
    except (TypeError, ValueError):
        raise SpecError(f"{src}: engine.histogram_range must be [lo, hi], got {hr!r}") from None
    if not 0 < hlo < hhi:
        raise SpecError(f"{src}: engine.histogram_range needs 0 < lo < hi")
    fast_compile = eng.get("fast_compile")
    if fast_compile is not None and not isinstance(fast_compile, bool):
        raise SpecError(f"{src}: engine.fast_compile must be true or false, got {fast_compile!r}")
    top_k = d.get("top_k", 20)
    if not isinstance(top_k, int) or isinstance(top_k, bool) or top_k < 1:
        raise SpecError(f"{src}: top_k must be a positive integer, got {top_k!r}")

    pricing, tech, tech_name = _pricing(src, d, inner)
    group_by = group_by_index(src, d.get("group_by"), outer)
    study = Study(
        name=str(d.get("name", "study")), models=models, model_names=model_names, workloads=workloads,
        workload_names=workload_names, hardware=hardware, hardware_name=hw_name, options=options,
        outer=tuple(outer), inner=tuple(inner), max_chips=max_chips, ttft=_slo(src, "ttft", c.get("ttft", "workload")),
        tpot=_slo(src, "tpot", c.get("tpot", "workload")), max_memory_fraction=frac, objective=objective,
        maximize=(sense == "maximize"), pareto=tuple(pareto), top_k=top_k, block=ints["block"],
        blocks_per_step=ints["blocks_per_step"], pareto_points=ints["pareto_points"],
        histogram_bins=ints["histogram_bins"], histogram_range=(hlo, hhi), fingerprint="", group_by=group_by,
        fast_compile=fast_compile, pricing=pricing, technology=tech, technology_name=tech_name,
        hardwares=chips if len(chips) > 1 else (), hardware_names=chip_names if len(chips) > 1 else (),
        software=_software_name(d["hardware"], software, calibration))
    if study.n_outer >= 2**31 or study.n_inner >= 2**31:
        raise SpecError(f"{src}: too many points on one side of the grid (outer {study.n_outer}, "
                        f"hardware {study.n_inner}); at most 2^31 - 1 each")
    cal = {} if calibration is None else {"calibration": [calibration.parameters, calibration.chips]}
    cal["software"] = study.software
    return dataclasses.replace(study, fingerprint=_fingerprint({**d, **cal}))


def _software_name(hardware, software, calibration) -> str:
    """The software stack's name the study's chips run (the first chip's
    default when none is named)."""
    if software is not None or (calibration is not None and calibration.software):
        return software.name if software is not None else calibration.software
    first = hardware[0] if isinstance(hardware, list) else hardware
    return default_software(first).name if isinstance(first, dict) else chip_software_stack(first)


def group_by_index(src, group_by, outer) -> int:
    """Index into `outer` of the axis a study's `group_by` names (-1 for none)."""
    if group_by is None:
        return -1
    names = [a.name for a in outer]
    if group_by not in names:
        raise SpecError(f"{src}: group_by {group_by!r} must name an axis that is not a hardware axis; "
                        f"here: {', '.join(names) or 'none'}")
    return names.index(group_by)


def _pricing(src, d, inner):
    """(pricing, Technology or None, its name) from `price` and `technology`."""
    names = {a.name for a in inner}
    explicit = d.get("price")
    if explicit is not None:
        choice(f"{src}: price", explicit, PRICINGS)
    fixed_axes = sorted(names & {"price", "tdp"})
    if explicit == "technology" and fixed_axes:
        raise SpecError(f"{src}: axes.{fixed_axes[0]} sets the chip's price or power itself; use price: fixed")
    pricing = explicit or ("technology" if names & set(PRICED_AXES) and not fixed_axes else "fixed")
    if pricing == "fixed":
        return pricing, None, ""
    tech_name = d.get("technology", "n5")
    if not isinstance(tech_name, str):
        raise SpecError(f"{src}: technology must be a built-in technology name (e.g. n5) or a path")
    return pricing, load_technology(tech_name), tech_name


def _model_from_dict(item, src):
    from jaxplat.model import model_from_config
    return model_from_config(item, src=src)


def _fingerprint(d: dict) -> str:
    """Hash of the study spec (resume refuses a state from another study)."""
    return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()[:16]


def load_study(path, calibration=None, software=None) -> Study:
    """Load and validate a study YAML file (`calibration`, `software` as in `study_from_dict`)."""
    return study_from_dict(read_yaml(path), src=str(path), calibration=calibration, software=software)


__all__ = ["AXIS_KINDS", "METRICS", "PRICED_AXES", "PRICINGS", "Axis", "Study", "study_from_dict", "load_study"]
