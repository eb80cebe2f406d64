"""Co-design study files (specs/studies/codesign-*.yaml) -> `Problem`.

Validation and the run settings of `jaxplat codesign`; the optimizer, the
exact re-check and the grid oracle are jaxplat.design.codesign's.
"""

import math

import jax.numpy as jnp
import numpy as np

from jaxplat.design import spaces
from jaxplat.design.codesign import (
    CANDIDATE_KEYS,
    OBJECTIVES,
    PARAMS,
    Problem,
    candidate_validity,
)
from jaxplat.model import PROFILES, load_technology

_STUDY_KEYS = ("name", "description", "model", "workload", "technology", "hbm", "base", "objective", "budget_usd",
               "profile", "software",
               "params", "candidates", "optimizer", "grid")


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
    from jaxplat.specs import SpecError, check_keys, integer, number

    if "axes" in d and "params" not in d:  # a sweep study (jaxplat.search), not a codesign one
        raise SpecError(f"{src}: this is a sweep study; run it with `jaxplat sweep {src}`")
    check_keys(src, "", d, _STUDY_KEYS, required=("model", "workload", "params", "candidates"))
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
    if float(base.sram_size) <= 0 or float(base.mem_size[0]) <= 0:
        raise SpecError(f"{src}: base chip must list an sram level, then its HBM (e.g. h100-sxm)")
    objective = d.get("objective", "cost_per_mtok")
    if objective not in OBJECTIVES:
        raise SpecError(f"{src}: objective {objective!r} unknown; allowed: {', '.join(OBJECTIVES)}")
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
    if space == "array" and not base.dataflow:
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
    cd = d["candidates"]
    if not isinstance(cd, dict):
        raise SpecError(f"{src}: candidates must map {', '.join(CANDIDATE_KEYS)} to lists")
    check_keys(src, "candidates.", cd, CANDIDATE_KEYS)
    lists = []
    for k in CANDIDATE_KEYS:
        v = cd.get(k, [1])
        v = v if isinstance(v, list) else [v]
        lists.append([number(src, f"candidates.{k}", e) for e in v])
    combos = np.array(np.meshgrid(*lists, indexing="ij")).reshape(len(CANDIDATE_KEYS), -1)
    n = combos.shape[1]
    pad = _pow2(n)  # bucketed size: studies with similar candidate counts share one compile
    combos = np.concatenate([combos, np.repeat(combos[:, :1], pad - n, axis=1)], axis=1).astype(np.float32)
    cand = {k: combos[i] for i, k in enumerate(CANDIDATE_KEYS)}
    model, workload = load_model(d["model"]), load_workload(d["workload"])
    profile = d.get("profile", "default")
    if profile not in PROFILES:
        raise SpecError(f"{src}: profile {profile!r} unknown; allowed: {', '.join(PROFILES)}")
    valid = candidate_validity(model, base, workload, cand, profile) & (np.arange(pad) < n)
    if not valid.any():
        raise SpecError(f"{src}: no candidate divides the model (check tp against the heads, ep against the experts)")
    budget = number(src, "budget_usd", d["budget_usd"]) if "budget_usd" in d else math.inf
    prob = Problem(model=model, workload=workload, base=base, tech=tech,
                   lo=np.array(lo, np.float32), hi=np.array(hi, np.float32), cand=cand, valid=valid,
                   objective=objective, budget=jnp.float32(budget), profile=profile, space=space)
    check_keys(src, "grid.", grid, tuple(p for p in names if p != "hbm_stacks"))
    run = dict(**settings, name=d.get("name", str(src)), model=d["model"],
               workload=d["workload"], technology=d.get("technology", "n5"), hbm=d.get("hbm"),
               base=d.get("base", "h100-sxm"), candidates=n)
    return prob, run


__all__ = ["problem_from_dict"]
