"""`jaxplat codesign STUDY.yaml`: the best chip for a workload, by gradients,
checked against a dense grid over the same design space."""

import math
import time
from pathlib import Path

import jax
import numpy as np
import yaml

from jaxplat.cli.cache_args import add_cache_arguments, use_cache
from jaxplat.cli.calibration_args import add_calibration_arguments
from jaxplat.design import codesign as cd
from jaxplat.design import codesign_train as ct
from jaxplat.design import spaces
from jaxplat.design.codesign_study import problem_from_dict
from jaxplat.model import EFFICIENCY_PARAMS, select_engine
from jaxplat.model.hardware_layout import flat_layout, grouped_layout
from jaxplat.model.pytree import get
from jaxplat.report import json_text, table
from jaxplat.specs import SpecError, read_yaml, resolve, spec_label, units
from jaxplat.specs.units import J_PER_KWH, SECONDS_PER_YEAR

METRIC_ROWS = (  # Metrics field, label, formatter
    ("ttft", "TTFT", units.fmt_time), ("tpot", "TPOT", units.fmt_time),
    ("throughput", "throughput", lambda v: f"{v:.4g} tokens/s"),
    ("energy_per_token_j", "energy per token", lambda v: f"{v:.4g} J"),
    ("power_w", "average power", lambda v: f"{v:.4g} W"),
    ("cost_per_mtok_usd", "cost per million tokens", lambda v: f"${v:.4g}"),
    ("memory_bytes", "memory per chip", units.fmt_bytes), ("chips", "chips", lambda v: f"{v:g}"),
)
TRAIN_METRIC_ROWS = (  # TrainMetrics field, label, formatter (training co-design)
    ("step_time_s", "step time", units.fmt_time),
    ("tokens_per_s_per_chip", "throughput", lambda v: f"{v:.4g} tokens/s per chip"),
    ("mfu", "MFU (6N + attention FLOPs / peak)", lambda v: f"{v * 100:.1f}%"),
    ("memory_bytes", "memory per chip", units.fmt_bytes), ("power_w", "average power per chip", lambda v: f"{v:.4g} W"),
    ("train_time_s", "time to train", lambda v: f"{v / ct.SECONDS_PER_DAY:.4g} days"),
    ("train_energy_j", "energy to train (IT)", lambda v: f"{v / J_PER_KWH / 1e6:.4g} GWh"),
    ("train_cost_usd", "cost to train", lambda v: f"${v:,.0f}"), ("chips", "chips", lambda v: f"{v:g}"),
)
TRAIN_ELASTIC = ("step_time_s", "train_time_s", "train_cost_usd", "memory_bytes")
OBJECTIVE_UNITS = {"cost_per_mtok": "USD per million tokens", "usd_per_tok_s": "USD of capex per token/s",
                   "joules_per_token": "J per token", "train_cost_usd": "USD to train the tokens",
                   "train_days": "days to train the tokens"}
COST_BASIS = ("cost to train = time to train x (chips x price / lifetime + chips x average power x PUE x USD/kWh): "
              "capex amortized over the chip's lifetime and facility energy (cost.money)")


def register(sub):
    p = sub.add_parser("codesign", help="optimize a chip (and its parallelism) for a workload",
                       description="Gradient co-design of a chip's FLOP/s, SRAM, HBM stacks and link bandwidth "
                                   "with the discrete parallelism/batch choice, checked against a dense grid.")
    p.add_argument("study", help="codesign study YAML or a built-in name "
                                 "(e.g. specs/studies/codesign-llama70b-chatbot.yaml)")
    p.add_argument("--json", action="store_true", help="print one JSON object (SI units in the key names)")
    p.add_argument("--out", default="codesign-out",
                   help="folder for the chip YAML, the plot, summary.json, trajectory.csv and sensitivities.csv "
                        "(read by `jaxplat report`; default: codesign-out)")
    p.add_argument("--starts", type=int, help="random starts (overrides the study)")
    p.add_argument("--steps", type=int, help="optimizer steps (overrides the study)")
    p.add_argument("--no-grid", action="store_true", help="skip the grid oracle")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (the grid oracle's)")
    add_calibration_arguments(p)
    add_cache_arguments(p, "a rerun of the study skips most of its compiles")
    p.set_defaults(func=run)


def chip_spec(hw, x, prob: cd.Problem, base_name: str, name: str) -> dict:
    """Hardware spec dict (our YAML schema, grouped: model.hardware_layout) of the chip `hw` built from x."""
    base_d = flat_layout(read_yaml(resolve("hardware", base_name)))
    pj = lambda e: float(e) * 1e12 / 8.0  # noqa: E731  J/byte -> pJ/bit
    memory = [{"name": "sram", "size": float(hw.memory.sram_size), "bandwidth": float(hw.memory.sram_bandwidth),
               "pj_per_bit": pj(hw.power.energy_sram)},
              {"name": "hbm", "size": float(hw.memory.size[0]), "bandwidth": float(hw.memory.bandwidth[0]),
               "pj_per_bit": pj(hw.power.energy_mem[0])}]
    for i, lv in enumerate(base_d["memory"][2:], start=1):  # host / CXL levels of the base, as they are
        memory.append({**lv, "pj_per_bit": pj(hw.power.energy_mem[i])})
    network = [{**lv, "pj_per_bit": pj(hw.power.energy_net[i])} for i, lv in enumerate(base_d["network"])]
    network[0]["bandwidth"] = float(hw.network.bandwidth[0])
    # the base's compute block, with the exponential rate the design keeps written out: the loader would
    # otherwise derive it from the design's scaled FP32 peak
    compute = {**base_d.get("compute", {}),
               **({"exp_rate": float(hw.chip.exp_rate)} if float(hw.chip.exp_rate) > 0 else {})}
    area, _, _ = cd.design_numbers(x, prob)
    stacks = float(spaces.chip_vector(np.asarray(x), prob.space, prob.base)[2])
    spec = {
        "name": name,
        "description": f"co-designed chip: {float(area):.0f} mm², {stacks:g} HBM stacks (jaxplat codesign)",
        # only the dtypes the chip has units for: the others run in a wider one (hardware_spec's fallback),
        # which a peak written for them would turn into native units
        "flops": {dt: float(hw.chip.flops[i]) for i, dt in enumerate(units.DTYPES)
                  if int(hw.chip.gemm_dtype[i]) == i},
        "memory": memory, "network": network,
        "efficiency": {k: float(get(hw, path)) for k, (path, *_) in EFFICIENCY_PARAMS.items()},
        **({"compute": compute} if compute else {}),
        "tdp_w": float(hw.power.tdp), "price_usd": float(hw.cost.price),
        "energy": {"pj_per_flop": {dt: float(hw.power.energy_flop[i]) * 1e12 for i, dt in enumerate(units.DTYPES)},
                   "static_w": float(hw.power.static_power)},
        "tco": {"lifetime_years": float(hw.cost.lifetime) / SECONDS_PER_YEAR,
                "usd_per_kwh": float(hw.cost.energy_price) * J_PER_KWH, "pue": float(hw.cost.pue)},
    }
    # what the design does not change: the serving host, dataflow execution, the kernel libraries (rocm)
    spec.update({k: base_d[k] for k in ("host_cpu", "execution", "software") if k in base_d})
    if prob.space == "array":  # the base's compute block with the design's array; the peak follows from it
        spec["compute"] = {**compute, "array": [float(hw.chip.array_rows), float(hw.chip.array_cols)],
                           "cores": float(hw.chip.cores)}
        del spec["flops"]
    return grouped_layout(spec)


def plot_trajectory(traj: dict, path: Path, best_start: int, params=cd.PARAMS):
    """Loss of every start, and the best start's numbers, against the step."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    a.plot(traj["loss"], lw=0.8)
    a.plot(traj["loss"][:, best_start], lw=2.0, color="k", label="best start")
    a.set_xlabel("step")
    a.set_ylabel("smooth loss (log objective + penalties)")
    a.legend()
    x = traj["x"][:, best_start, :]
    for i, name in enumerate(params):
        b.plot(x[:, i] / x[-1, i], label=name)
    b.set_xlabel("step")
    b.set_ylabel("value / final value")
    b.set_yscale("log")
    b.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_outputs(out: Path, result: dict, traj: dict, best_start: int, labels, metric_names, grad, fd,
                  prob: cd.Problem | None = None):
    """summary.json (the --json object, non-finite numbers as null), trajectory.csv
    (one row per step and start: loss, the chip numbers in SI, the schedule) and
    sensitivities.csv (elasticities, autodiff and finite difference), for
    `jaxplat report`."""
    import pandas as pd

    (out / "summary.json").write_text(json_text({**result, "best_start": best_start}, indent=2))
    steps, starts = traj["loss"].shape
    rows = dict(step=np.repeat(np.arange(steps), starts), start=np.tile(np.arange(starts), steps),
                loss=traj["loss"].reshape(-1))
    # The chip numbers (FLOP/s, SRAM, stacks, link) in every space, and the
    # design variables of another space beside them.
    chip = traj["x"] if prob is None else np.asarray(spaces.chip_vector(traj["x"], prob.space, prob.base))
    for i, p in enumerate(cd.PARAMS):
        rows[p] = chip[:, :, i].reshape(-1)
    for i, p in enumerate(prob.params if prob is not None else ()):
        rows.setdefault(p, traj["x"][:, :, i].reshape(-1))
    for k in ("tau", "hinge", "sharpness", "penalty"):
        rows[k] = np.repeat(traj[k], starts)
    pd.DataFrame(rows).to_csv(out / "trajectory.csv", index=False)
    methods = cd.elasticity_methods(labels)  # whole-number structure: a finite difference over one step
    pd.DataFrame([dict(number=lab, metric=mn, autodiff=float(grad[i, j]), finite_difference=float(fd[i, j]),
                       method=methods[i])
                  for i, lab in enumerate(labels) for j, mn in enumerate(metric_names)]
                 ).to_csv(out / "sensitivities.csv", index=False)


def _array_keys(x, prob: cd.Problem) -> dict:
    """summary["chip"] entries of the array space (none in the chip space)."""
    if prob.space != "array":
        return {}
    return {"array_rows": float(x[0]), "array_cols": float(x[1]), "cores": float(x[2]),
            "sram_per_core_bytes": float(x[3])}


def _grid_chip(x, prob: cd.Problem) -> dict:
    v = np.asarray(spaces.chip_vector(np.asarray(x), prob.space, prob.base))
    return {"flops_bf16": float(v[0]), "sram_bytes": float(v[1]), "hbm_stacks": float(v[2]),
            "link_bytes_s": float(v[3]), **_array_keys(x, prob)}


def run(args) -> int:
    for flag in ("starts", "steps"):
        if getattr(args, flag) is not None and getattr(args, flag) < 1:
            raise SpecError(f"--{flag} must be at least 1, got {getattr(args, flag)}")
    # Every program from the first on, the sub-second ones too (94 of them): on 2 cores a rerun of
    # codesign-llama70b-chatbot took 71 s (107 CPU s) against 164 s (264 CPU s) the first time; with the
    # cache turned on only after the study was read, 80 s (experiments/rerun_from_cache.py, 2026-12-07).
    use_cache(args, min_compile_s=0.0)
    study = resolve("studies", args.study)
    calibration, software = select_engine(args.calibration, args.engine)
    prob, cfg = problem_from_dict(read_yaml(study), src=str(study), calibration=calibration, software=software)
    starts, steps = args.starts or cfg["starts"], args.steps or cfg["steps"]
    t0 = time.time()
    res = cd.codesign(prob, starts=starts, steps=steps, seed=cfg["seed"])
    t_opt = time.time() - t0
    x = res.x
    hw = cd.design_hardware(x, prob)
    par, wl = cd._candidate(prob, res.candidate)
    m = jax.device_get(cd.candidate_metrics(prob, hw, par, wl, prob.exact)[0])
    train = prob.task == "train"
    rows_of = TRAIN_METRIC_ROWS if train else METRIC_ROWS
    area, tdp, price = (float(v) for v in cd.design_numbers(x, prob))
    v = np.asarray(spaces.chip_vector(x, prob.space, prob.base))  # FLOP/s, SRAM, stacks, link

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    name = spec_label(cfg["name"])  # a study without name: its file's stem, not its path (files go in --out)
    chip_path = out / f"{name}.chip.yaml"
    spec = chip_spec(hw, x, prob, cfg["base"], f"{name}-chip")
    chip_path.write_text(f"# written by jaxplat codesign {study}\n" + yaml.safe_dump(spec, sort_keys=False))
    best_start = int(np.argmin(res.trajectory["loss"][-1]))
    plot_path = out / f"{name}.trajectory.png"
    plot_trajectory(res.trajectory, plot_path, best_start, prob.params)

    labels, metric_names, grad, fd = (design_elasticities(x, prob, res.candidate) if train else
                                      cd.elasticities(prob.model, hw, par, wl, prob.exact))
    base = cd.base_comparison(prob)  # the base chip on the same price basis as the designed one
    grid = None
    if not args.no_grid:
        t0 = time.time()
        grid = cd.grid_search(prob, cfg["grid"], progress=not (args.json or args.no_progress))
        t_grid = time.time() - t0
    cand = {k: float(v[res.candidate]) for k, v in prob.cand.items()}
    gap = (res.objective - grid[2]) / grid[2] if grid and math.isfinite(grid[2]) else None

    result = {
        "kind": "codesign", "name": name, "model": cfg["model"], "workload": cfg["workload"],
        "technology": cfg["technology"], "study": str(study), "objective_name": prob.objective,
        "objective_unit": OBJECTIVE_UNITS[prob.objective], "objective": res.objective,
        "grid_objective": grid[2] if grid else None, "gap": gap, "evaluations": res.evaluations,
        "grid_evaluations": grid[3] if grid else None, "starts": starts, "steps": steps,
        "optimizer_s": t_opt, "grid_s": t_grid if grid else None,
        "chip": {"flops_bf16": float(v[0]), "sram_bytes": float(v[1]), "hbm_stacks": float(v[2]),
                 "link_bytes_s": float(v[3]), "area_mm2": area, "tdp_w": tdp, "price_usd": price,
                 "hbm_bytes": float(hw.memory.size[0]), "hbm_bytes_s": float(hw.memory.bandwidth[0]),
                 **_array_keys(x, prob)},
        "limits": {"reticle_mm2": float(prob.tech.reticle), "power_limit_w": float(prob.tech.power_limit)},
        "bounds": {p: [float(prob.lo[i]), float(prob.hi[i])] for i, p in enumerate(prob.params)},
        "slo": ({"max_train_s": float(prob.deadline)} if train else
                {"ttft_s": float(wl.ttft_slo), "tpot_s": float(wl.tpot_slo)}),
        "grid_chip": (_grid_chip(grid[0], prob) if grid else None),
        "parallel": cand,
        **({"train": _train_summary(prob, res.candidate, chip_path, cfg)} if train else {}),
        "price_basis": cd.price_basis(cfg["technology"]),
        "software": cfg["software"],
        "base": {"name": cfg["base"], **base,  # (json_text writes a non-finite objective as null)
                 "parallel": (None if base["candidate"] is None else
                              {k: float(v[base["candidate"]]) for k, v in prob.cand.items()})},
        "metrics": {k: float(getattr(m, k)) for k, *_ in rows_of},
        "hardware_path": str(chip_path), "plot_path": str(plot_path),
        "sensitivities": {lab: {mn: float(grad[i, j]) for j, mn in enumerate(metric_names)}
                          for i, lab in enumerate(labels)},
        # how each number's row was computed: autodiff, or a finite difference over one whole
        # step for whole-number structure (SM count, tile sides: a staircase, design.sensitivity)
        "sensitivity_methods": dict(zip(labels, ["autodiff"] * len(labels) if train
                                            else cd.elasticity_methods(labels))),
    }
    write_outputs(out, result, res.trajectory, best_start, labels, metric_names, grad, fd, prob)
    if args.json:
        print(json_text(result))
        return 0

    print(f"{name}: {cfg['model']} / {spec_label(cfg['workload'])} on {cfg['technology']} "
          f"({prob.objective}, {len(prob.valid[prob.valid])} of {cfg['candidates']} candidates valid)\n")
    shape = f"{float(hw.chip.cores):g} cores x {float(hw.chip.array_rows):g} x {float(hw.chip.array_cols):g} PEs"
    array = ([["systolic arrays", f"{shape} ({hw.chip.dataflow}, {float(hw.chip.clock_hz) / 1e9:.3g} GHz)"],
              ["SRAM per core", units.fmt_bytes(float(x[3]))]] if prob.space == "array" else [])
    print(table(["chip", "value"], array + [
        ["dense bf16 FLOP/s", f"{v[0] / units.TFLOPS:.4g} TFLOP/s"],
        ["SRAM", units.fmt_bytes(float(v[1]))],
        ["HBM", f"{v[2]:g} stacks: {units.fmt_bytes(float(hw.memory.size[0]))}, "
                f"{float(hw.memory.bandwidth[0]) / units.TB:.3g} TB/s"],
        ["scale-up link", f"{v[3] / units.GB:.4g} GB/s per direction"],
        ["die area", f"{area:.0f} mm² (reticle {float(prob.tech.reticle):.0f})"],
        ["TDP", f"{tdp:.0f} W (limit {float(prob.tech.power_limit):.0f})"],
        ["price", f"${price:,.0f}"],
    ], "lr"))
    print(f"prices: {cd.price_basis(cfg['technology'])}")
    print(f"software stack: {cfg['software']} (specs/software; --engine or the study's software: to change)")
    if train:
        print(f"\nbest way to train: {result['train']['command']}")
        print(f"{COST_BASIS}\n")
    else:
        print(f"\nparallelism: tp={cand['tp']:g} pp={cand['pp']:g} ep={cand['ep']:g} dp={cand['dp']:g}, "
              f"batch {cand['batch']:g}\n")
    print(table(["metric (exact mode)", "value"], [[lab, fmt(float(getattr(m, k)))] for k, lab, fmt in rows_of],
                "lr"))
    traj = res.trajectory
    rows = [[f"{s}", f"{traj['loss'][s, best_start]:.5g}", f"{traj['tau'][s]:.3g}", f"{traj['hinge'][s]:.3g}",
             f"{traj['sharpness'][s]:.3g}"] for s in sorted({0, steps // 4, steps // 2, 3 * steps // 4, steps - 1})]
    print(f"\ntrajectory of the best start ({starts} starts x {steps} steps, {t_opt:.1f} s; plot: {plot_path})")
    print(table(["step", "loss", "tau", "hinge k", "sharpness p"], rows, "rrrrr"))
    print("\nsensitivities: elasticity d log(metric) / d log(number), autodiff (finite difference ±1%)")
    keep = np.abs(grad).max(axis=1) > 1e-4
    methods = ["autodiff"] * len(labels) if train else cd.elasticity_methods(labels)  # whole numbers: n-1..n+1
    print(table(["hardware number"] + metric_names,
                [[labels[i] + (" (whole step)" if methods[i] != "autodiff" else "")]
                 + [f"{grad[i, j]:+.3f} ({fd[i, j]:+.3f})" for j in range(len(metric_names))]
                 for i in range(len(labels)) if keep[i]], "l" + "r" * len(metric_names)))
    if not train:
        print(f"  e.g. +10% {labels[int(np.argmax(np.abs(grad[:, 1])))]} -> "
              f"{(1.1 ** grad[int(np.argmax(np.abs(grad[:, 1]))), 1] - 1) * 100:+.1f}% TPOT")
    unit = OBJECTIVE_UNITS[prob.objective]
    print(f"\noptimizer: {res.objective:.6g} {unit} with {res.evaluations:,} cost-model evaluations")
    base_obj = (f"{base['objective']:.6g} {unit}" if math.isfinite(base["objective"])
                else "no candidate meets the constraints")
    print(f"base chip {cfg['base']} at its technology-model price ${base['price_usd']:,.0f} "
          f"(street price ${base['street_price_usd']:,.0f}, not compared): {base_obj}")
    if grid:
        print(f"grid:      {grid[2]:.6g} {unit} with {grid[3]:,} evaluations ({t_grid:.1f} s); "
              f"gap {gap * 100:+.3f}% (negative: optimizer better), {grid[3] / res.evaluations:.0f}x fewer evaluations")
    use = result["train"]["command"] if train else f"jaxplat estimate --hardware {chip_path} ..."
    print(f"\nchip written to {chip_path} (use: {use})")
    return 0


def _train_summary(prob: cd.Problem, i: int, chip_path, cfg: dict) -> dict:
    """A training co-design's best way to train: `jaxplat train`'s flags
    (recompute by name, dp derived) and the command on the written chip."""
    c = ct.describe(prob.cand, i)
    twl, dtype = prob.workload, cfg["dtype"]
    flags = {"chips": c["chips"], "tp": c["tp"], "pp": c["pp"], "vp": c["vp"], "cp": c["cp"], "ep": c["ep"],
             **({"etp": c["etp"]} if c["etp"] != c["tp"] else {}),
             "micro-batch": c["micro_batch"], "global-batch": float(twl.global_batch), "seq": float(twl.seq)}
    cmd = (f"jaxplat train --model {cfg['model']} --hardware {chip_path} "
           + " ".join(f"--{k} {v:.0f}" for k, v in flags.items())
           + f" --dtype {dtype} --recompute {c['recompute']} --zero {c['zero']:.0f} --tokens {float(twl.tokens):.6g}"
           + (f" --moe-dispatcher {prob.moe_dispatcher}" if prob.moe_dispatcher != "alltoall" else "")
           + (f" --sp {prob.sp}" if prob.sp != "regather" else ""))
    apart = [f"profile {prob.profile}"] * (prob.profile != "default") + [f"schedule {prob.schedule}"] * (
        prob.schedule != "1f1b")
    if apart:  # what jaxplat train has no flag for: its numbers differ from the study's
        cmd += f"  # the study's {', '.join(apart)} are not flags of jaxplat train"
    return {"dp": c["dp"], "recompute": c["recompute"], "dtype": dtype, "schedule": prob.schedule,
            "command": cmd, "cost_basis": COST_BASIS}


def design_elasticities(x, prob: cd.Problem, i: int):
    """(labels, metric names, [P, M] autodiff, [P, M] central finite
    difference ±1%) of d log(training metric) / d log(design number) at the
    design x on candidate i, exact mode (the training study's sensitivities:
    TRAIN_ELASTIC against the searched numbers)."""
    import jax.numpy as jnp

    par, wl = cd._candidate(prob, i)

    def logs(z):
        m = cd.candidate_metrics(prob, cd.design_hardware(jnp.exp(z), prob), par, wl, prob.exact)[0]
        return jnp.log(jnp.stack([getattr(m, k) for k in TRAIN_ELASTIC]))

    z = jnp.log(jnp.asarray(x, jnp.float32))
    grad = np.asarray(jax.jit(jax.jacfwd(logs))(z)).T
    f = jax.jit(logs)
    h = np.log(1.01)
    fd = np.stack([(np.asarray(f(z.at[p].add(h))) - np.asarray(f(z.at[p].add(-h)))) / (2 * h)
                   for p in range(len(prob.params))])
    return list(prob.params), list(TRAIN_ELASTIC), grad, fd
