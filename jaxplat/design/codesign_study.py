"""Co-design study files (specs/studies/codesign-*.yaml) -> `Problem`.

Validation and the run settings of `jaxplat codesign`; the optimizer, the
exact re-check and the grid oracle are jaxplat.design.codesign's.
"""

import math

import jax.numpy as jnp
import numpy as np

from jaxplat.design import codesign_train as ct
from jaxplat.design import spaces
from jaxplat.design.codesign import (
    CANDIDATE_KEYS,
    OBJECTIVES,
    PARAMS,
    Problem,
    candidate_validity,
)
from jaxplat.model import PROFILES, load_technology

_STUDY_KEYS = ("name", "description", "task", "model", "workload", "train", "technology", "hbm", "base", "objective",
               "budget_usd", "profile", "software", "params", "candidates", "optimizer", "grid")
# A training co-design's `train:` block: the run (tokens per sequence, sequences per step, GEMM recipe, tokens
# to train on, pipeline schedule) and its deadline in days (none when absent).
MAX_CANDIDATES = 4096
_TRAIN_KEYS = ("seq", "global_batch", "dtype", "tokens", "schedule", "moe_dispatcher", "sp", "max_days")


def _pow2(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


def problem_from_dict(d: dict, src="study", calibration=None, software=None) -> tuple[Problem, dict]:
    """Validate a codesign study (specs/studies/codesign-*.yaml) and build the
    `Problem`, plus the run settings {starts, steps, seed, grid points, names}.
    `calibration`: efficiency parameters for the base chip (`--calibration`).
    `software`: the software stack the designed chips run (`--engine`; else
    the study's `software:`, else the base chip's default); settings'
    "software" names it."""
    from jaxplat.model import chip_software_stack, load_hardware, load_model, load_software, load_workload
    from jaxplat.specs import SpecError, check_keys, choice, integer, number

    if "axes" in d and "params" not in d:  # a sweep study (jaxplat.search), not a codesign one
        raise SpecError(f"{src}: this is a sweep study; run it with `jaxplat sweep {src}`")
    task = d.get("task", "train" if d.get("objective") in ct.TRAIN_OBJECTIVES else "infer")
    if task not in ("infer", "train"):
        raise SpecError(f"{src}: task must be infer or train, got {task!r}")
    check_keys(src, "", d, _STUDY_KEYS,
               required=("model", "workload" if task == "infer" else "train", "params", "candidates"))
    if task == "train" and "workload" in d:
        raise SpecError(f"{src}: workload is an inference key; a training co-design describes its run under train:")
    opt, grid = d.get("optimizer", {}) or {}, d.get("grid", {}) or {}
    for key, v in (("optimizer", opt), ("grid", grid)):
        if not isinstance(v, dict):
            raise SpecError(f"{src}: {key} must be a mapping, got {v!r}")
    check_keys(src, "optimizer.", opt, ("starts", "steps", "seed"))
    settings = dict(starts=integer(src, "optimizer.starts", opt.get("starts", 8)),
                    steps=integer(src, "optimizer.steps", opt.get("steps", 200)),
                    seed=integer(src, "optimizer.seed", opt.get("seed", 0), minimum=0),
                    grid={k: integer(src, f"grid.{k}", v) for k, v in grid.items()})
    tech = load_technology(d.get("technology", "n5"), d.get("hbm"))
    if software is None and d.get("software") is not None:
        software = load_software(d["software"])
    base = load_hardware(d.get("base", "h100-sxm"), calibration, software)
    settings["software"] = chip_software_stack(d.get("base", "h100-sxm"), software, calibration)
    if float(base.memory.sram_size) <= 0 or float(base.memory.size[0]) <= 0:
        raise SpecError(f"{src}: base chip must list an sram level, then its HBM (e.g. h100-sxm)")
    objective = d.get("objective", "cost_per_mtok" if task == "infer" else "train_cost_usd")
    allowed = OBJECTIVES if task == "infer" else ct.TRAIN_OBJECTIVES
    choice(f"{src}: objective (task {task})", objective, allowed)
    params = d["params"]
    every = sorted(set(spaces.SPACES["chip"]) | set(spaces.SPACES["array"]))
    if not isinstance(params, dict):
        raise SpecError(f"{src}: params must map {', '.join(PARAMS)} (or the array space's "
                        f"{', '.join(spaces.SPACES['array'])}) to [min, max] or a fixed number")
    check_keys(src, "params.", params, every)
    space = spaces.space_of(params)
    if not space:
        raise SpecError(f"{src}: params mix the chip space ({', '.join(PARAMS)}) with the array space "
                        f"({', '.join(spaces.SPACES['array'])}); use one")
    if space == "array" and not base.chip.dataflow:
        raise SpecError(f"{src}: params {', '.join(params)} need a base chip with systolic arrays "
                        "(a compute.array block, e.g. base: npu-case-study-iv)")
    names = spaces.SPACES[space]
    defaults = spaces.defaults(space, base, tech)
    lo, hi = [], []
    for name in names:
        v = params.get(name, defaults[name])
        if isinstance(v, (list, tuple)):
            if len(v) != 2:
                raise SpecError(f"{src}: params.{name} must be [min, max] or a number, got {v!r}")
            a, b = (number(src, f"params.{name}", e) for e in v)
            if a > b:
                raise SpecError(f"{src}: params.{name} has min {a:g} above max {b:g}")
        else:
            a = b = number(src, f"params.{name}", v)
        lo.append(a)
        hi.append(b)
    top = hi[names.index("hbm_stacks")]
    if top > float(tech.max_stacks):
        raise SpecError(f"{src}: params.hbm_stacks max {top:g} exceeds the technology's {float(tech.max_stacks):g}")
    keys = CANDIDATE_KEYS if task == "infer" else ct.TRAIN_CANDIDATE_KEYS
    cand, n = _candidates(src, d["candidates"], keys, task)
    pad = len(cand[keys[0]])
    model = load_model(d["model"])
    profile = choice(f"{src}: profile", d.get("profile", "default"), PROFILES)
    if task == "train":
        workload, schedule, dispatcher, sp, deadline = _train_run(src, d["train"])
        dtype = d["train"].get("dtype", "bf16")
        valid = ct.validity(model, workload, cand) & (np.arange(pad) < n)
        if not valid.any():
            raise SpecError(f"{src}: no candidate is a valid way to train (chips divisible by tp·pp·cp, tp dividing "
                            "the heads, global_batch by micro_batch·dp, pp·vp <= layers, 2·cp dividing seq)")
    else:
        workload, schedule, deadline, dtype = load_workload(d["workload"]), "1f1b", math.inf, None
        dispatcher, sp = "alltoall", "regather"
        valid = candidate_validity(model, base, workload, cand, profile) & (np.arange(pad) < n)
        if not valid.any():
            raise SpecError(f"{src}: no candidate divides the model (check tp against the heads, "
                            "ep against the experts)")
    budget = number(src, "budget_usd", d["budget_usd"]) if "budget_usd" in d else math.inf
    prob = Problem(model=model, workload=workload, base=base, tech=tech,
                   lo=np.array(lo, np.float32), hi=np.array(hi, np.float32), cand=cand, valid=valid,
                   objective=objective, budget=jnp.float32(budget), deadline=jnp.float32(deadline),
                   profile=profile, space=space, task=task, schedule=schedule, moe_dispatcher=dispatcher, sp=sp)
    check_keys(src, "grid.", grid, tuple(p for p in names if p != "hbm_stacks"))
    label = d["workload"] if task == "infer" else f"train {float(workload.tokens):.4g} tokens"
    run = dict(**settings, name=d.get("name", str(src)), model=d["model"],
               workload=label, technology=d.get("technology", "n5"), hbm=d.get("hbm"),
               base=d.get("base", "h100-sxm"), candidates=n, dtype=dtype)
    return prob, run


def _candidates(src, cd, keys, task) -> tuple[dict, int]:
    """({key: [pad] float32} of the Cartesian product of the candidate lists,
    padded to a power of two with copies of the first; n real ones)."""
    from jaxplat.cost.training import RECOMPUTE
    from jaxplat.specs import SpecError, check_keys, choice, number

    if not isinstance(cd, dict):
        raise SpecError(f"{src}: candidates must map {', '.join(keys)} to lists")
    check_keys(src, "candidates.", cd, keys, required=("chips",) if task == "train" else ())
    lists = []
    for k in keys:
        v = cd.get(k, ["none"] if k == "recompute" else [0] if k == "zero" else [1])
        v = v if isinstance(v, list) and v else [v]
        if k == "etp" and k not in cd:
            lists.append([0.0])  # expert tensor parallelism at tp: no folding
        elif k == "recompute":
            for e in v:
                choice(f"{src}: candidates.recompute", e, RECOMPUTE)
            lists.append([float(RECOMPUTE.index(e)) for e in v])
        elif k == "zero":
            vals = [number(src, "candidates.zero", e, allow_zero=True) for e in v]
            if any(x not in (0, 1, 2, 3) for x in vals):
                raise SpecError(f"{src}: candidates.zero must list ZeRO stages among 0, 1, 2, 3, got {v!r}")
            lists.append(vals)
        else:
            vals = [number(src, f"candidates.{k}", e) for e in v]
            if task == "train" and any(x != round(x) for x in vals):
                raise SpecError(f"{src}: candidates.{k} must list whole numbers >= 1, got {v!r}")
            lists.append(vals)
    if math.prod(len(v) for v in lists) > MAX_CANDIDATES:
        raise SpecError(f"{src}: candidates give {math.prod(len(v) for v in lists):,} combinations; at most "
                        f"{MAX_CANDIDATES:,} (each is costed on every chip the optimizer and the grid try)")
    combos = np.array(np.meshgrid(*lists, indexing="ij")).reshape(len(keys), -1)
    n = combos.shape[1]
    pad = _pow2(n)  # bucketed size: studies with similar candidate counts share one compile
    combos = np.concatenate([combos, np.repeat(combos[:, :1], pad - n, axis=1)], axis=1).astype(np.float32)
    return {k: combos[i] for i, k in enumerate(keys)}, n


def _train_run(src, t) -> tuple:
    """(TrainWorkload, schedule, MoE dispatcher, sp mode, deadline in s) of a training co-design's
    `train:` block (_TRAIN_KEYS); dtype as `jaxplat train --dtype` means it
    (search.train_study.RECIPES: fp8 is the chip generation's recipe)."""
    from jaxplat.cost.training import MOE_DISPATCHERS, SCHEDULES, SP_MODES, TrainWorkload
    from jaxplat.search.train_study import RECIPES
    from jaxplat.specs import SpecError, check_keys, choice, integer, number, units

    check_keys(src, "train.", t, _TRAIN_KEYS, required=("seq", "global_batch", "tokens"))
    dtype = choice(f"{src}: train.dtype", t.get("dtype", "bf16"), RECIPES)
    schedule = choice(f"{src}: train.schedule", t.get("schedule", "1f1b"), SCHEDULES)
    dispatcher = choice(f"{src}: train.moe_dispatcher", t.get("moe_dispatcher", "alltoall"), MOE_DISPATCHERS)
    sp = choice(f"{src}: train.sp", t.get("sp", "regather"), SP_MODES)
    days = number(src, "train.max_days", t["max_days"]) if "max_days" in t else math.inf
    if days == 0:
        raise SpecError(f"{src}: train.max_days must be positive, got 0")
    bytes_act, name, block = RECIPES[dtype]
    twl = TrainWorkload(global_batch=float(integer(src, "train.global_batch", t["global_batch"])),
                        micro_batch=1.0, seq=float(integer(src, "train.seq", t["seq"])),
                        tokens=number(src, "train.tokens", t["tokens"]), bytes_act=bytes_act,
                        compute_dtype=float(units.DTYPES.index(name)), scale_block=block)
    return twl, schedule, dispatcher, sp, days * ct.SECONDS_PER_DAY


__all__ = ["problem_from_dict"]
