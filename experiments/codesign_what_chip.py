"""What chip should we build? Co-design per (model, workload) at a fixed
deployment budget, against today's chips as they are.

For each model (Llama-3.1-70B, Llama-3.1-405B, DeepSeek-V3) and workload
(chatbot, summarization, code generation, long-context reasoning) this runs
`jaxplat.codesign` (N3 + HBM4 by default) for the lowest cost per million
tokens under the workload's TTFT/TPOT SLOs and a capex budget, then evaluates
H100, H200, B200, MI300X, Groq and Cerebras on the same candidate
parallelisms (exact mode, same SLOs and budget) and prints one table.
Problems of one model kind share one compiled optimizer (Problem is a pytree).

    .venv/bin/python experiments/codesign_what_chip.py [--budget USD] [--models ...] [--workloads ...] [--quick]
"""

import argparse
import math

import jax
import numpy as np

import jaxplat as jp
from jaxplat.design import codesign as cd
from jaxplat.design.codesign_study import problem_from_dict
from jaxplat.report import table

MODELS = ("llama-3.1-70b", "llama-3.1-405b", "deepseek-v3")
WORKLOADS = ("chatbot", "summarization", "code-generation", "long-context-reasoning")
CHIPS = ("h100-sxm", "h200-sxm", "b200", "mi300x", "groq-lpu", "cerebras-wse-3")


def study(model, workload, budget, tech, hbm):
    moe = model == "deepseek-v3"
    return {
        "name": f"{model}-{workload}", "model": model, "workload": workload, "technology": tech, "hbm": hbm,
        "base": "h100-sxm", "objective": "cost_per_mtok", "budget_usd": budget,
        "params": {"flops": [1e14, 2e15], "sram": [8e6, 2.56e8], "hbm_stacks": [1, 8], "link_bw": [5e10, 2e12]},
        "candidates": {"tp": [1, 2, 4, 8], "pp": [1, 2, 4, 8], "ep": [1, 8] if moe else [1],
                       "batch": [1, 4, 16, 64]},
    }


def existing_best(prob, chip, pp_extra=(16, 32, 64, 128)):
    """Best exact (cost per Mtok, candidate) of an existing chip on the study's
    candidates (plus deeper pipelines for SRAM-only chips), same SLOs and budget."""
    hw = jp.load_hardware(chip)
    cand = {k: np.asarray(v) for k, v in prob.cand.items()}
    extra = {k: np.repeat(v[None], len(pp_extra), 0).reshape(-1) for k, v in cand.items()}
    extra["pp"] = np.repeat(np.asarray(pp_extra, np.float32), len(cand["pp"]))
    cand = {k: np.concatenate([cand[k], extra[k]]).astype(np.float32) for k in cand}
    valid = np.concatenate([np.asarray(prob.valid), np.repeat(np.asarray(prob.valid)[None], len(pp_extra), 0)
                            .reshape(-1)])
    p = cd.Problem(model=prob.model, workload=prob.workload, base=hw, tech=prob.tech, lo=prob.lo, hi=prob.hi,
                   cand=cand, valid=valid, budget=prob.budget, objective=prob.objective, profile=prob.profile)
    par, wl = cd._candidate(p)
    m = jax.vmap(lambda pa, w: jp.evaluate(p.model, hw, pa, w, p.exact))(par, wl)
    ok = (np.asarray(m.feasible) & valid & (np.asarray(m.ttft) <= float(wl.ttft_slo[0]))
          & (np.asarray(m.tpot) <= float(wl.tpot_slo[0]))
          & (np.asarray(m.chips) * float(hw.cost.price) <= float(p.budget)))
    obj = np.where(ok, np.asarray(m.cost_per_mtok_usd), np.inf)
    i = int(np.argmin(obj))
    return float(obj[i]), {k: float(v[i]) for k, v in cand.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=float, default=5e6, help="capex budget of one deployment, USD (default 5e6)")
    ap.add_argument("--models", nargs="+", default=list(MODELS))
    ap.add_argument("--workloads", nargs="+", default=list(WORKLOADS))
    ap.add_argument("--technology", default="n3")
    ap.add_argument("--hbm", default="hbm4")
    ap.add_argument("--quick", action="store_true", help="4 starts x 60 steps (default 8 x 150)")
    a = ap.parse_args()
    starts, steps = (4, 60) if a.quick else (8, 150)
    rows = []
    for model in a.models:
        for workload in a.workloads:
            prob, _ = problem_from_dict(study(model, workload, a.budget, a.technology, a.hbm))
            try:
                res = cd.codesign(prob, starts=starts, steps=steps)
                c = {k: float(v[res.candidate]) for k, v in prob.cand.items()}
                area, tdp, price = (float(v) for v in cd.chip_numbers(res.x, prob.tech))
                ours = (f"${res.objective:.3g}", f"{res.x[0] / 1e12:.0f} TF, {res.x[2]:g}x{a.hbm}, "
                        f"{res.x[3] / 1e9:.0f} GB/s, {area:.0f} mm², ${price:,.0f}",
                        f"tp{c['tp']:g} pp{c['pp']:g} ep{c['ep']:g} b{c['batch']:g}")
            except jp.SpecError:
                ours = ("infeasible", "-", "-")
            best_existing = []
            for chip in CHIPS:
                obj, cc = existing_best(prob, chip)
                best_existing.append(f"{chip}: " + (f"${obj:.3g}" if math.isfinite(obj) else "-"))
            rows.append([model, workload, *ours, "; ".join(best_existing)])
            print(" | ".join(rows[-1]), flush=True)
    print()
    print(table(["model", "workload", "codesign $/Mtok", "chip", "parallelism",
                 "existing chips $/Mtok (same SLOs, budget)"], rows, "llrlll"))


if __name__ == "__main__":
    main()
