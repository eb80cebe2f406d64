"""Training studies: `task: train` in a study YAML (issue 38).

A training study sweeps the flags of `jaxplat train` (tp, pp, vp, cp, ep,
micro_batch, global_batch, seq, dtype, recompute, zero, chips) and the
hardware axes inference studies have, through the same sweep engine: the
engine's per-configuration function is a static choice (`Study.task`), here
`measure`, which costs a configuration with `cost.training.train_step`.

    name: train-405b
    task: train
    models: [llama-3.1-405b]
    hardware: dgx-h100-pod
    tokens: 15.6e12                 # to train on: train_time_s, train_cost_usd, train_energy_j
    axes:
      chips: [8192, 16384]          # dp = chips / (tp·pp·cp)
      tp: [4, 8]
      pp: {pow2: [4, 32]}
      global_batch: [2048]          # sequences per step
      seq: [8192]
      recompute: [none, selective, full]
      zero: [0, 1, 3]
      dtype: [bf16, fp8]
    constraints: {max_chips: 16384, max_memory_fraction: 1.0}
    objective: {maximize: tokens_per_s_per_chip}
    pareto: [train_time_s, train_cost_usd]

chips, global_batch and seq are required; the other flags default to
`jaxplat train`'s defaults (one-value axes). recompute_layernorm,
recompute_mla_up_proj, recompute_moe_act and recompute_mlp ([0, 1]) sweep
`--recompute-modules`; dp_shard ([0, 8, ...]) sweeps `--dp-shard` (HSDP). A configuration is feasible when
every check of `training_memory.checks` holds (chips divisible by tp·pp·cp,
ep dividing dp and the experts, the global batch by micro_batch·dp,
pp·vp <= layers, ...) and it fits in memory; `max_memory_fraction` and
`max_chips` are the study's constraints.
"""

import dataclasses
import math

import jax.numpy as jnp
import numpy as np

from jaxplat.cost.attention_kernels import ATTENTION_KERNELS, kernel_fields
from jaxplat.cost.training import (
    MOE_DISPATCHERS,
    RECOMPUTE,
    SCHEDULES,
    SP_MODES,
    TrainOptions,
    TrainWorkload,
    fold_experts,
    sp_mode,
    sp_options,
    train_step,
)
from jaxplat.cost.training_memory import RECOMPUTE_MODULES, checks
from jaxplat.cost.training_moe import fold_valid
from jaxplat.model import replace
from jaxplat.search import study as infer
from jaxplat.search.study import AXIS_KINDS, METRICS, Axis, AxisKind, Study, _fingerprint
from jaxplat.search.train_metrics import TRAIN_METRIC_NAMES, TRAIN_METRICS
from jaxplat.specs import SpecError, check_keys, choice, number, read_yaml, units

TRAIN_DTYPES = ("bf16", "fp8", "fp4", "int8")
# Default configurations per block on an accelerator (the engine's, when neither the study nor the
# command sets one): a training step keeps far more per configuration than devices.BYTES_PER_CONFIG
# allows for. On one H200 (jax 0.11.2), training-llama405b-16k.yaml's 1,382,400 configurations ran
# in blocks of 46,080 (2^16 asked) at 5.99e6 configurations/s (13.6 s compile), in blocks of 829,440
# at 2.36e6 (12 s); the device default, one block of all 1,382,400, was killed after 303 s (exit 137).
ACCEL_BLOCK = 2**16
ZERO_STAGES = (0, 1, 2, 3)
# `--dtype` recipes of `jaxplat train` (GEMM operand bytes, units.DTYPES name, elements per scale; -1: the
# chip's FP8 recipe, per-tensor scaling on Hopper, MXFP8 blocks of 32 where the chip has FP4 (Blackwell));
# NVFP4 stores an FP8 scale per 16 elements (0.5 + 1/16 bytes per element).
RECIPES = {"bf16": (2.0, "bf16", 0.0), "fp8": (1.0, "fp8", -1.0), "fp4": (0.5 + 1.0 / 16.0, "fp4", 16.0),
           "int8": (1.0, "int8", 0.0)}
_RECIPE = np.array([[RECIPES[d][0], units.DTYPES.index(RECIPES[d][1]), RECIPES[d][2]] for d in TRAIN_DTYPES],
                   np.float32)


def _set(field):
    return lambda tree, v: replace(tree, **{field: v})


def _set_recipe(twl, v):
    row = jnp.asarray(_RECIPE)[v.astype(jnp.int32)]
    return replace(twl, bytes_act=row[0], compute_dtype=row[1], scale_block=row[2])


# Axis kinds of a training study. Order: the axes that shape the forward table first, then those that
# only scale it (chips: dp; the batch; recomputation; ZeRO), so that the engine maps the latter as the
# block's grid (engine.layout: each table is built once per point of the former).
TRAIN_AXIS_KINDS = {
    "tp": AxisKind("parallel", _set("tp"), "", "tensor-parallel degree (with sequence parallelism)"),
    "pp": AxisKind("parallel", _set("pp"), "", "pipeline stages"),
    "vp": AxisKind("parallel", _set("vp"), "", "virtual pipeline stages per rank (interleaved 1F1B)"),
    "cp": AxisKind("parallel", _set("cp"), "", "context-parallel degree (ring attention)"),
    "ep": AxisKind("parallel", _set("ep"), "", "expert-parallel degree, carved out of dp"),
    # etp is held in Parallel.moe_ep until `measure` folds it (moe_ep = tp/etp, the table's ep = ep/moe_ep)
    "etp": AxisKind("parallel", _set("moe_ep"), "", "expert tensor-parallel degree, a divisor of tp (without the "
                    "axis: tp; below tp the experts split over the tp ranks and ep counts them)"),
    "micro_batch": AxisKind("workload", _set("micro_batch"), "seq", "sequences per micro-batch per dp rank"),
    "seq": AxisKind("workload", _set("seq"), "tok", "tokens per sequence"),
    "dtype": AxisKind("workload", _set_recipe, "", f"GEMM recipe ({', '.join(TRAIN_DTYPES)})", categorical=True),
    "overlap": AxisKind("parallel", _set("overlap"), "", "share of TP/PP communication hidden"),
    "ep_overlap": AxisKind("workload", _set("ep_overlap"), "", "share of the EP all-to-alls hidden "
                           "(two micro-batches interleaved)"),
    # the engine passes chips to `measure` (engine.Engine._configure), which sets dp; the setter (dp = chips
    # until then) lets engine.layout map it on the block's grid
    "chips": AxisKind("parallel", _set("dp"), "chips", "chips in the job (dp = chips / (tp·pp·cp))"),
    "global_batch": AxisKind("workload", _set("global_batch"), "seq", "sequences per optimizer step"),
    "recompute": AxisKind("workload", _set("recompute"), "", f"recomputation ({', '.join(RECOMPUTE)})",
                          categorical=True),
    "zero": AxisKind("workload", _set("zero"), "", "ZeRO stage (1: distributed optimizer, 3: FSDP)"),
    "dp_shard": AxisKind("workload", _set("dp_shard"), "", "hybrid sharding (HSDP): ZeRO states sharded over groups "
                         "of this many dp ranks, replicated over the rest (0: the whole group)"),
    **{f"recompute_{mod}": AxisKind("workload", _set(f"recompute_{mod}"), "",
                                    f"1: recompute {mod} besides (Megatron-Core's recompute_modules), 0: keep it")
       for mod in RECOMPUTE_MODULES},
}
TRAIN_AXES = tuple(TRAIN_AXIS_KINDS)
# The axes that shape the forward table (cost.training.forward_table: its tensor, pipeline, context and
# expert split, the micro-batch's tokens, the GEMM recipe); the others only scale what it costs
TABLE_AXES = ("tp", "pp", "vp", "cp", "ep", "etp", "micro_batch", "seq", "dtype")
REQUIRED_AXES = ("chips", "global_batch", "seq")
DEFAULTS = {"tp": [1], "pp": [1], "vp": [1], "cp": [1], "ep": [1], "micro_batch": [1], "dtype": ["bf16"],
            "recompute": ["none"], "zero": [0]}
# Axes that are `jaxplat train` flags with a default of 0, named in its command only where they are not 0
SHARE_FLAGS = ("overlap", "ep_overlap")
# Axes that are 0/1 switches, gathered into jaxplat train's --recompute-modules where 1
MODULE_AXES = tuple(f"recompute_{mod}" for mod in RECOMPUTE_MODULES)
# top_k.csv's columns of a training study, named by `jaxplat train`'s flags (dp derived)
FLAG_COLUMNS = ("chips", "tp", "pp", "vp", "cp", "ep", "dp", "micro_batch", "global_batch", "seq", "dtype",
                "recompute", "zero")
_KEYS = ("name", "description", "task", "models", "hardware", "axes", "constraints", "objective", "pareto",
         "top_k", "group_by", "engine", "price", "technology", "software", "tokens", "options")
_HARDWARE_AXES = tuple(k for k, v in AXIS_KINDS.items() if v.group == "hardware")


class TrainAxis(Axis):
    """An axis of a training study (its kind from TRAIN_AXIS_KINDS)."""

    @property
    def kind(self) -> AxisKind:
        return TRAIN_AXIS_KINDS[self.name]


@dataclasses.dataclass(frozen=True)
class TrainStudy(Study):
    """A validated training study: a `Study` whose `workloads` is the base
    `TrainWorkload` and whose configurations are costed by `measure`."""

    task: str = "train"
    tokens: float = 0.0
    train_options: TrainOptions = TrainOptions()
    attention_kernel: str = "native"  # options.attention_kernel: its speeds are in the base workload


def measure(model, hw, par, twl, chips_eq, st):
    """(TrainMetrics, feasible, named constraint failures) of one training
    configuration: the engine's per-configuration function of a training
    study (engine.Engine._point). `chips_eq`: the chips axis' value."""
    par = replace(par, dp=chips_eq / (par.tp * par.pp * par.cp))
    folds = jnp.bool_(True)
    if any(a.name == "etp" for a in (*st.outer, *st.inner)):  # MoE parallel folding: as `jaxplat train --etp`
        folds = fold_valid(par, par.moe_ep)
        par = fold_experts(par, par.moe_ep)
    m = train_step(model, hw, par, chip_recipe(twl, hw), st.train_options)
    no = jnp.bool_(False)
    ok = m.feasible & folds
    for c in checks(model, par, twl).values():
        ok = ok & c
    fails = dict(over_chips=m.chips > st.max_chips, wrong_chips=no, over_ttft=no, over_tpot=no,
                 over_memory=m.memory_bytes > st.max_memory_fraction * m.capacity_bytes)
    return m, ok, fails


def grid_merge(whole, merge: int) -> int:
    """How many of the trailing grid axes `whole` a training study's CPU grid
    merges into its minor dim (engine.Engine.merge): at most `merge`, and
    none that shapes the forward table (TABLE_AXES). Merged with one that
    does, every table is built once per point of the merged dim:
    training-llama405b-16k ran 8x slower with its dtype merged."""
    scaling = len(whole) - max((i + 1 for i, a in enumerate(whole) if a.name in TABLE_AXES), default=0)
    return max(1, min(merge, scaling))


def chip_recipe(twl, hw):
    """The FP8 recipe of the chip's generation (scale_block -1: MXFP8 blocks
    of 32 where the chip has an FP4 peak above its FP8 one, else per-tensor)."""
    fp4, fp8 = hw.chip.flops[units.DTYPES.index("fp4")], hw.chip.flops[units.DTYPES.index("fp8")]
    return replace(twl, scale_block=jnp.where(twl.scale_block < 0, jnp.where(fp4 > fp8, 32.0, 0.0), twl.scale_block))


# ------------------------------------------------------------- the YAML


def _axis(src, name, spec) -> TrainAxis:
    where = f"{src}: axes.{name}"
    if name in ("dtype", "recompute"):
        allowed = TRAIN_DTYPES if name == "dtype" else RECOMPUTE
        if not isinstance(spec, list) or not spec or any(v not in allowed for v in spec) or len(set(spec)) < len(spec):
            raise SpecError(f"{where} must be a list of distinct values among {', '.join(allowed)}, got {spec!r}")
        return TrainAxis(name, np.array([allowed.index(v) for v in spec], np.float64), tuple(spec))
    if isinstance(spec, dict) and set(spec) == {"pow2"}:
        try:
            lo, hi = (int(number(src, f"axes.{name}.pow2", x)) for x in spec["pow2"])
        except (TypeError, ValueError):
            raise SpecError(f"{where}.pow2 must be [lo, hi], got {spec['pow2']!r}") from None
        if not 1 <= lo <= hi or hi > 2**30:
            raise SpecError(f"{where}.pow2 needs 1 <= lo <= hi <= 2^30, got [{lo}, {hi}]")
        spec = [2**k for k in range(math.ceil(math.log2(lo)), int(math.log2(hi)) + 1)]
    if not isinstance(spec, list) or not spec:
        raise SpecError(f"{where} must be a non-empty list of numbers or {{pow2: [lo, hi]}}")
    vals = np.array([number(src, f"axes.{name}", v,
                            allow_zero=name in ("zero", "dp_shard", *SHARE_FLAGS, *MODULE_AXES))
                     for v in spec], np.float64)
    if name in MODULE_AXES:
        if any(v not in (0.0, 1.0) for v in vals):
            raise SpecError(f"{where} must list 0 (keep) and/or 1 (recompute), got {spec!r}")
    elif name in SHARE_FLAGS:
        if np.any((vals < 0) | (vals > 1)):
            raise SpecError(f"{where} must lie in [0, 1]")
    elif name == "zero":
        if any(v not in ZERO_STAGES for v in vals):
            raise SpecError(f"{where} must list ZeRO stages among 0, 1, 2, 3, got {spec!r}")
    elif name == "dp_shard":
        if np.any((vals < 0) | (vals != np.round(vals))):
            raise SpecError(f"{where} must list whole numbers >= 0 (0: the whole data-parallel group), got {spec!r}")
    elif np.any((vals < 1) | (vals != np.round(vals))) or np.any(vals >= 2**31):
        raise SpecError(f"{where} must list whole numbers >= 1, got {spec!r}")
    if len(set(vals.tolist())) < len(vals):
        raise SpecError(f"{where} lists a value twice")
    return TrainAxis(name, vals)


def _metric(src, key, name, tokens):
    choice(f"{src}: {key} (a training metric)", name, TRAIN_METRIC_NAMES)
    if name.startswith("train_") and tokens <= 0:
        raise SpecError(f"{src}: {key} {name} needs the tokens to train on (tokens: e.g. 15.6e+12)")
    return name


def train_study_from_dict(d: dict, src="study", calibration=None, software=None) -> Study:
    """Validate a training study dict (`task: train`) and build a `TrainStudy`
    (one-line SpecError otherwise). The models, hardware, hardware axes,
    engine settings and pricing are read as an inference study reads them."""
    task = d.get("task")
    if task not in ("train", "infer"):
        raise SpecError(f"{src}: task must be train or infer, got {task!r}")
    if task == "infer":
        return infer.study_from_dict({k: v for k, v in d.items() if k != "task"}, src, calibration, software)
    check_keys(src, "", d, _KEYS, required=("models", "hardware", "objective", "axes"))
    tokens = number(src, "tokens", d.get("tokens", 0.0), allow_zero=True)
    if not 0 <= tokens < math.inf:
        raise SpecError(f"{src}: tokens must be a non-negative number of tokens, got {tokens}")
    axes_raw = d["axes"]
    if not isinstance(axes_raw, dict):
        raise SpecError(f"{src}: axes must be a mapping of axis name to a list or range")
    check_keys(src, "axes.", axes_raw, TRAIN_AXES + _HARDWARE_AXES, required=REQUIRED_AXES)
    opts = d.get("options", {}) or {}
    check_keys(src, "options.", opts, ("schedule", "moe_dispatcher", "sp", "attention_kernel"))
    schedule = choice(f"{src}: options.schedule", opts.get("schedule", "1f1b"), SCHEDULES)
    dispatcher = choice(f"{src}: options.moe_dispatcher", opts.get("moe_dispatcher", "alltoall"), MOE_DISPATCHERS)
    sp = choice(f"{src}: options.sp", opts.get("sp", "regather"), SP_MODES)
    kernel = choice(f"{src}: options.attention_kernel", opts.get("attention_kernel", "native"), ATTENTION_KERNELS)
    c = d.get("constraints", {}) or {}
    check_keys(src, "constraints.", c, ("max_chips", "max_memory_fraction"))
    obj = d["objective"]
    if not isinstance(obj, dict) or len(obj) != 1 or next(iter(obj)) not in ("maximize", "minimize"):
        raise SpecError(f"{src}: objective must be {{maximize: METRIC}} or {{minimize: METRIC}}; "
                        f"training metrics: {', '.join(TRAIN_METRIC_NAMES)}")
    (sense, objective), = obj.items()
    _metric(src, "objective", objective, tokens)
    pareto = d.get("pareto", ["train_time_s", "train_cost_usd"] if tokens > 0 else ["step_time_s", "chips"])
    if not isinstance(pareto, list) or len(pareto) != 2:
        raise SpecError(f"{src}: pareto must be a list of two metrics, e.g. [train_time_s, train_cost_usd]")
    for p in pareto:
        _metric(src, "pareto", p, tokens)

    # The rest as an inference study (a placeholder workload and metrics, only the hardware axes).
    base = {k: v for k, v in d.items() if k not in ("task", "tokens", "options", "objective", "pareto", "group_by")}
    base.update(workloads=["chatbot"], objective={"maximize": "throughput"}, pareto=["tpot", "throughput"],
                axes={k: v for k, v in axes_raw.items() if k in _HARDWARE_AXES},
                constraints={"ttft": "none", "tpot": "none", **c})
    st = infer.study_from_dict(base, src, calibration, software)
    given = {**DEFAULTS, **{k: v for k, v in axes_raw.items() if k in TRAIN_AXES}}
    train_axes = tuple(_axis(src, k, given[k]) for k in TRAIN_AXES if k in given)
    outer = st.outer + train_axes
    group_by = infer.group_by_index(src, d.get("group_by"), outer)
    base_twl = TrainWorkload(global_batch=1.0, micro_batch=1.0, seq=1.0, tokens=tokens, **kernel_fields(kernel))
    study = TrainStudy(**{f.name: getattr(st, f.name) for f in dataclasses.fields(Study)}, tokens=tokens,
                       attention_kernel=kernel,
                       train_options=TrainOptions(schedule=schedule, moe_dispatcher=dispatcher, **sp_options(sp)))
    study = dataclasses.replace(study, outer=outer, workloads=(base_twl,), workload_names=("train",),
                                objective=objective, maximize=sense == "maximize", pareto=tuple(pareto),
                                group_by=group_by, ttft=None, tpot=None)
    if study.n_outer >= 2**31:
        raise SpecError(f"{src}: too many points on one side of the grid (outer {study.n_outer}); at most 2^31 - 1")
    return dataclasses.replace(study, fingerprint=_fingerprint({**d, "software": study.software}))


def study_from_dict(d: dict, src="study", calibration=None, software=None) -> Study:
    """Any study: a training study (`task: train`, `train_study_from_dict`)
    or an inference one (search.study.study_from_dict); same arguments."""
    if isinstance(d, dict) and "task" in d:
        return train_study_from_dict(d, src, calibration, software)
    return infer.study_from_dict(d, src, calibration, software)


def load_study(path, calibration=None, software=None) -> Study:
    """Load and validate a study YAML file, inference or training."""
    return study_from_dict(read_yaml(path), src=str(path), calibration=calibration, software=software)


def train_command(study, row) -> str:
    """The `jaxplat train` command of a top_k.csv row (`flag_frame`) of a
    one-model, one-chip training study."""
    flags = " ".join(f"--{k.replace('_', '-')} {row[k]}" for k in FLAG_COLUMNS if k != "dp")
    if "etp" in row:  # a flag of jaxplat train only where the study has the axis (default tp)
        flags += f" --etp {int(round(float(row['etp'])))}"
    for k in SHARE_FLAGS:  # flags of jaxplat train only where the study has the axis (default 0)
        if k in row and float(row[k]) != 0.0:
            flags += f" --{k.replace('_', '-')} {float(row[k]):g}"
    if "dp_shard" in row and float(row["dp_shard"]) != 0.0:  # a flag only where the study has the axis (default 0)
        flags += f" --dp-shard {int(round(float(row['dp_shard'])))}"
    modules = [k.removeprefix("recompute_") for k in MODULE_AXES if k in row and float(row[k]) == 1.0]
    if modules:
        flags += f" --recompute-modules {','.join(modules)}"
    topts = getattr(study, "train_options", TrainOptions())
    if topts.moe_dispatcher != "alltoall":
        flags += f" --moe-dispatcher {topts.moe_dispatcher}"
    if sp_mode(topts) != "regather":
        flags += f" --sp {sp_mode(topts)}"
    if getattr(study, "attention_kernel", "native") != "native":
        flags += f" --attention-kernel {study.attention_kernel}"
    model, chip = row.get("model", study.model_names[0]), row.get("hardware", study.hardware_name)
    note = " (on the base chip: hardware axes are not flags of jaxplat train)" if study.inner else ""
    return f"jaxplat train --model {model} --hardware {chip} {flags}{note}"


def flag_frame(study, df):
    """A training study's top-k / Pareto DataFrame with its configurations
    named by `jaxplat train`'s flags (FLAG_COLUMNS: dp = chips / (tp·pp·cp),
    integers; recompute and dtype as the flags spell them) first."""
    df = df.copy()
    df["dp"] = df["chips"] / (df["tp"] * df["pp"] * df["cp"])
    for k in FLAG_COLUMNS + tuple(k for k in ("etp", "dp_shard", *MODULE_AXES) if k in df.columns):
        if k not in ("dtype", "recompute"):
            df[k] = df[k].round().astype("int64")
    lead = [c for c in ("rank", "index") if c in df.columns]
    rest = [c for c in df.columns if c not in lead and c not in FLAG_COLUMNS]
    return df[lead + list(FLAG_COLUMNS) + rest]


__all__ = ["DEFAULTS", "FLAG_COLUMNS", "METRICS", "MODULE_AXES", "RECIPES", "REQUIRED_AXES", "TABLE_AXES",
           "TRAIN_AXIS_KINDS", "TRAIN_DTYPES", "TRAIN_METRICS", "TrainAxis", "TrainStudy", "flag_frame", "grid_merge",
           "load_study", "measure", "study_from_dict", "train_command", "train_study_from_dict"]
