"""Static-batch end-to-end latency of the ANL LLM-Inference-Bench rows (issue 37).

Predicts every `e2e_batch_latency_s` row of data/measured/inference_2026-12.csv
(one static batch: B requests of exactly isl prompt and osl output tokens,
beams 1, fp16 -> bf16, tp from the row; DeepSpeed-MII rows name no tp: tp =
the chips, MII's tensor parallelism) with `jaxplat.evaluate` (Metrics.e2e, the
`estimate --json` key e2e_s), on two software stacks: the default
graph-captured one and fitted-2026-12 (the one the shipped calibration was
fitted with), shipped efficiencies both. `total_tok_s` rows are the same
measurement and are not counted twice.

Chips: H100 -> h100-sxm, MI300X -> mi300x; A100 -> the ALCF Polaris node's
A100 SXM4 40GB (experiments/specs/a100-40gb-polaris.yaml, datasheet numbers
only: ANL ran LLM-Inference-Bench on Polaris), and the built-in a100-80gb as a
second line. Both choices were made from the hardware's documentation before
any A100 row was predicted.

Models (specs/models or data/hf_configs): Llama-2-7B/70B, Llama-3-8B/70B (as
llama-3.1-8b/70b: the same dimensions, GQA and vocabulary; only RoPE scaling
and context differ), Mixtral-8x7B, Qwen2-72B (data/hf_configs/qwen2.5-72b.json:
Qwen2.5-72B keeps Qwen2-72B's architecture), huggyllama/llama-7b (LLaMA-1 7B:
Llama-2-7B's dimensions), Qwen2-7B and Mistral-7B-v0.1 (data/hf_configs, since
2026-12-05). Not mapped (no spec or config in the repository): DeciLM-7B,
Aquila-7B, GPT-J-6B, BLOOM-7B1, OPT-6.7B, Qwen1.5-7B.

Roles come from data/measured/inference_split.yaml: fit and validation rows
are printed by default; test rows (the A100, never in the calibration) only
with --test, to be run once, after nothing is changed any more.

--step-gap prints, for the batch-1 rows (one sequence: the weights stream
once per decode step, so the step is the model's own roofline plus fixed
costs), the measured time per output token minus the graph-captured stack's
prediction: the per-step software time (host scheduling, sampling, launches,
all-reduce kernels) that an engine of 2024 spent beyond a graph-captured one,
per chip, engine and tensor-parallel degree.

Run: .venv/bin/python experiments/static_batch_check.py [--test] [--roles fit,validation] [--step-gap]
(`--roles fit --step-gap`: the gap on the fit rows alone)
"""

import argparse
import statistics
import sys
from collections import defaultdict
from pathlib import Path

import jax
import jax.numpy as jnp

from jaxplat import Options, Parallel, evaluate, load_hardware, load_model
from jaxplat.cost import iteration_overhead
from jaxplat.design.splits import load_inference_split
from jaxplat.model import load_software, select_engine, workload_from_dict

sys.path.insert(0, str(Path(__file__).resolve().parent))
from calibration_check import converter  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
STACKS = ("graph-captured", "fitted-2026-12")
POLARIS = str(ROOT / "experiments/specs/a100-40gb-polaris.yaml")
CHIPS = {"H100": ("h100-sxm",), "MI300X": ("mi300x",), "A100": (POLARIS, "a100-80gb")}


def _models() -> dict:
    """The CSV's model names -> specs: data/measured/convert_inference.py's map (one map for every check
    of these rows, loaded by calibration_check.converter), its config paths made absolute."""
    return {k: str(ROOT / v) if "/" in v else v for k, v in converter().MODELS.items()}


MODELS = _models()


def chip_label(spec):
    return Path(spec).stem if spec.endswith(".yaml") else spec


def _stack(items):
    return jax.tree.map(lambda *xs: jnp.stack(xs), *items)


def predict_group(model_name, chip_spec, stack, rows):
    """[rows] predicted e2e seconds (and fits flags) of one model on one chip and stack (one vmapped call)."""
    model = load_model(model_name)
    hw = load_hardware(chip_spec, *select_engine(None, stack))
    pars = [Parallel(tp=float(r["tp"] or r["chips"])) for r in rows]
    wls = [workload_from_dict({"batch": int(r["concurrency_or_batch"]), "prompt": int(r["isl"]),
                               "output": int(r["osl"]), "beams": 1, "dtype": "bf16"}) for r in rows]
    m = jax.vmap(lambda p, w: evaluate(model, hw, p, w))(_stack(pars), _stack(wls))
    return [float(x) for x in m.e2e], [bool(x) for x in m.fits]


def predictions(rows, roles, want):
    """{(stack, chip label): [(role, chip, engine, model, pred, meas, fits)]}; unmapped model names."""
    groups, unmapped = defaultdict(list), defaultdict(int)
    for r, role in zip(rows, roles):
        if r["load_kind"] != "static_batch" or r["metric"] != "e2e_batch_latency_s" or role not in want:
            continue
        if r["model"] not in MODELS:
            unmapped[(r["model"], role)] += 1
            continue
        for spec in CHIPS[r["chip"]]:
            groups[(r["model"], spec)].append((r, role))
    out = defaultdict(list)
    for (model, spec), items in groups.items():
        for stack in STACKS:
            pred, fits = predict_group(MODELS[model], spec, stack, [r for r, _ in items])
            for (r, role), p, f in zip(items, pred, fits):
                out[(stack, chip_label(spec))].append((role, r["chip"], r["engine"], r["model"].split("/")[1], p,
                                                      float(r["value"]), f, int(r["concurrency_or_batch"]),
                                                      int(r["tp"] or r["chips"]), int(r["osl"])))
    return out, unmapped


def stats(items):
    errs = [x[4] / x[5] - 1.0 for x in items]
    return len(errs), 100 * statistics.median(abs(e) for e in errs), 100 * statistics.median(errs)


def table(out, role):
    print(f"\n== {role.upper()} rows: e2e batch latency, predicted vs measured "
          f"(median |error|, median signed error, rows; !fit: rows the model says do not fit in memory) ==")
    for (stack, chip), items in sorted(out.items()):
        mine = [x for x in items if x[0] == role]
        if not mine:
            continue
        print(f"-- stack {stack}, chip spec {chip}")
        cells = defaultdict(list)
        for x in mine:
            cells[(x[1], x[2], x[3])].append(x)
        for (c, e, mdl), xs in sorted(cells.items()):
            n, a, s = stats(xs)
            nofit = sum(1 for x in xs if not x[6])
            print(f"   {c:<7} {e:<14} {mdl:<20} {a:6.1f}% {s:+7.1f}%  n={n:<4}" + (f" !fit={nofit}" if nofit else ""))
        n, a, s = stats(mine)
        print(f"   {'all':<43} {a:6.1f}% {s:+7.1f}%  n={n}")


def done_when(out):
    """Issue 37's figure for the test chips: median |error| <= 20%, median signed within +-10%."""
    print("\n== TEST (held out by data/measured/inference_split.yaml; reported once, after the model was frozen) ==")
    for (stack, chip), items in sorted(out.items()):
        mine = [x for x in items if x[0] == "test"]
        if not mine:
            continue
        n, a, s = stats(mine)
        engines = ", ".join(sorted({x[2] for x in mine}))
        ok = "meets" if a <= 20.0 and abs(s) <= 10.0 else "misses"
        print(f"static-batch e2e_s, chip never calibrated ({chip}; engines {engines}), stack {stack}: "
              f"median |error| {a:.1f}%, median signed {s:+.1f}% (n={n}) -> {ok} the 20% / +-10% bar")


def step_gap(out, role_set):
    """Per (chip, engine, tp), and per (chip, tp) over every engine: median over the batch-1 rows of
    (measured - graph-captured predicted) e2e / output tokens, ms per decode step; beside it the engine's
    whole time per step outside the kernels, that gap plus the stack's own time per step at that tp
    (`iteration_overhead` + `rank_overhead` log2(tp): a request's output tokens take as many engine steps,
    its prefill's included, so this column does not depend on the values the stack holds), and the
    predicted ms per step."""
    software = load_software("graph-captured")
    step, rank = 1e3 * float(software.values["iteration_overhead"]), 1e3 * float(software.values["rank_overhead"])
    # the stack's own ms per step at each tp, as the cost model charges it (the stack's values; any chip)
    graph = load_hardware("h100-sxm", software=software)
    own = lambda tp: 1e3 * float(iteration_overhead(graph, Options(), float(tp)))  # noqa: E731
    cells = defaultdict(list)
    for (stack, chip), items in out.items():
        if stack != "graph-captured" or chip == "a100-80gb":
            continue
        for role, c, engine, model, pred, meas, _fits, batch, tp, osl in items:
            if batch == 1 and role in role_set:
                x = (1e3 * (meas - pred) / osl, 1e3 * pred / osl)
                cells[(c, engine, tp)].append(x)
                cells[(c, "all engines", tp)].append(x)
    print("\n== Batch 1: measured - predicted time per output token on the graph-captured stack "
          f"(ms per decode step, median over models and lengths; the stack charges {step:g} ms a step and "
          f"{rank:g} ms per doubling of tp) ==")
    print(f"   {'chip':<7} {'engine':<14} {'tp':>3} {'gap ms':>8} {'outside kernels ms':>19} "
          f"{'predicted ms':>13}  rows")
    for (c, e, tp), xs in sorted(cells.items()):
        gap, pred = statistics.median(x for x, _ in xs), statistics.median(y for _, y in xs)
        print(f"   {c:<7} {e:<14} {tp:>3} {gap:8.2f} {gap + own(tp):19.2f} {pred:13.2f}  {len(xs)}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--test", action="store_true", help="also predict the test rows (run once, at the end)")
    ap.add_argument("--roles", default="fit,validation")
    ap.add_argument("--step-gap", action="store_true", help="the batch-1 rows' per-step time beyond the "
                                                            "graph-captured stack (the --roles rows)")
    args = ap.parse_args(argv)
    want = set(args.roles.split(",")) | ({"test"} if args.test else set())
    rows, roles = load_inference_split()
    out, unmapped = predictions(rows, roles, want)
    print("not mapped (no spec or config in the repository):",
          ", ".join(f"{m} [{ro}] x{n}" for (m, ro), n in sorted(unmapped.items())))
    for role in ("fit", "validation", "test"):
        if role in want:
            table(out, role)
    if args.test:
        done_when(out)
    if args.step_gap:
        step_gap(out, set(args.roles.split(",")))


if __name__ == "__main__":
    main()
