"""A calibration file's error on the validation and test rows of
data/measured/inference_2026-12.csv (issue 37), as its report records them.

The rows are those data/measured/convert_inference.py expresses in the
calibration schema (ANL static batches as throughput_tok_s = B*OSL/e2e,
tt-inference-server closed-loop TTFT/TPOT), by split role
(data/measured/inference_split.yaml). Each is predicted through the
calibration's own path (`design.calibration.predict_one`, the function the fit
predicts its rows with), on two software stacks, no fit:
  own       the stack the calibration was fitted with (its `software:`) and
            its engine values where the row's engine has some (what the fit
            saw; an engine the fit never saw takes the global values);
  default   graph-captured, the global values (`estimate`'s default; the
            stack issue 37's "chip never calibrated" bar is set on).
Static batches are judged on e2e latency: its error is measured throughput /
predicted throughput - 1 (e2e = B*OSL / throughput). Categories: static batch
e2e per chip, closed-loop TTFT and TPOT. Median |error| and median signed error.

    .venv/bin/python experiments/calibration_check.py [--calibration FILE] [--test] [--write [--replace]]
    .venv/bin/python experiments/calibration_check.py --loop-rows   # each closed-loop row, measured and predicted

Test rows are predicted only with --test (once, after the model is frozen).
--write stores the figures in FILE's report (header lines and `fit.validation` /
`fit.test`), where tests/test_calibration_guard.py reads them back; --replace
first drops the ones it holds (a new round of the test rows, after a change
chosen on validation rows: its note says so).
"""

import argparse
import csv
import dataclasses
import functools
import importlib.util
import json
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from jaxplat.design.calibration import OPTS, predict_one
from jaxplat.design.measured import read_rows, row_hardware, row_inputs
from jaxplat.model import load_calibration, load_model
from jaxplat.report import table
from jaxplat.specs import SpecError

DEFAULT_FILE = ROOT / "specs/calibration/default.yaml"
STACKS = ("own", "default")
LABELS = {"validation": "validation rows (inference_split.yaml; variants chosen on them)",
          "test": "test rows (inference_split.yaml; predicted once, after the fit was frozen)"}


@functools.lru_cache(maxsize=None)
def converter():
    """data/measured/convert_inference.py as a module (its row conversion and its map of the CSV's model
    names to specs), loaded once per process."""
    spec = importlib.util.spec_from_file_location("convert_inference", ROOT / "data/measured/convert_inference.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@functools.lru_cache(maxsize=None)
def check_rows(role: str):
    """Validated Rows of the inference CSV's `role` rows (spec paths made absolute); read once per
    process (figures() and ratio_partners() both ask for the validation rows), so a tuple."""
    dicts = converter().inference_rows(role)
    for d in dicts:
        for k in ("model", "hardware"):
            if "/" in d[k]:
                d[k] = str(ROOT / d[k])
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{role}.csv"
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, list(dicts[0]))
            w.writeheader()
            w.writerows(dicts)
        return tuple(read_rows(path))


def _hardware(row, cal, stack, cache: dict):
    """A row's Hardware on `stack`, built once per chip, engine and stack (`cache`)."""
    key = (row.hardware, row.engine if stack == "own" else "", stack)
    if key not in cache:
        # "default": what `estimate` gives once `cal` is the shipped file (its values beneath the stack's fixed costs)
        cache[key] = jax.device_get(row_hardware(row, cal, "graph-captured" if stack == "default" else None))
    return cache[key]


def predictions(rows, cal, options=OPTS) -> dict:
    """{stack: [rows] predicted value of each row's metric}. Models of one structure (the same
    static fields: attention kind, windowed or not) share one vmapped program per load, the model a
    batched input like the chip: 3 programs for the declared validation and test rows, not one per model."""
    out = {s: np.zeros(len(rows)) for s in STACKS}
    models = {name: jax.device_get(load_model(name)) for name in {r.model for r in rows}}
    groups = defaultdict(list)
    for i, r in enumerate(rows):
        groups[(jax.tree.structure(models[r.model]), r.load)].append(i)
    metric = {"throughput_tok_s": 0, "ttft_s": 1, "tpot_s": 2}
    # Stacked on the host: one transfer per leaf, not one small device op per row and leaf.
    stack = lambda trees: jax.tree.map(lambda *x: np.stack([np.asarray(v) for v in x]), *trees)  # noqa: E731
    # Host copies, each built once: the declared rows have ~30 distinct inputs among a thousand rows.
    chips, built, inputs = {}, {}, []
    for r in rows:
        key = repr((r.par, r.prompt, r.output, r.dtype, r.settings))  # all that row_inputs reads
        if key not in built:
            built[key] = jax.device_get(row_inputs(r))
        inputs.append(built[key])
    for (_, load), idx in groups.items():
        kind = "batch" if load == "batch" else "loop"
        items = [(s, i) for s in STACKS for i in idx]
        model = stack([models[rows[i].model] for _, i in items])
        hw = stack([_hardware(rows[i], cal, s, chips) for s, i in items])
        par, wl, srv = (stack(t) for t in zip(*[inputs[i] for _, i in items]))
        amount = jnp.array([rows[i].amount for _, i in items], jnp.float32)
        f = jax.jit(jax.vmap(lambda m, h, p, w, s, a, kind=kind: predict_one(m, h, p, w, s, kind, a,
                                                                             opts=options)))
        got = np.asarray(f(model, hw, par, wl, srv, amount))
        for k, (s, i) in enumerate(items):
            out[s][i] = got[k, metric[rows[i].metric]]
    return out


def category(r) -> str:
    if r.load == "batch":
        return f"static batch e2e, {Path(r.hardware).stem}"
    return f"closed-loop {r.metric[:-2].upper()}, {Path(r.hardware).stem}"


def errors(rows, pred) -> np.ndarray:
    """[rows] e2e latency error of static batches (measured / predicted throughput - 1), else predicted / measured - 1."""
    meas = np.array([r.value for r in rows])
    batch = np.array([r.load == "batch" for r in rows])
    return np.where(batch, meas / pred, pred / meas) - 1.0


def model_name(model: str) -> str:
    """A row's model: its spec's name, or its config file's without the extension (llama-3.1-8b stays whole)."""
    p = Path(model)
    return p.name[: -len(p.suffix)] if p.suffix in (".json", ".yaml") else p.name


def _same_batch(r):
    return (model_name(r.model), r.engine, r.par.get("tp"), r.amount, r.prompt, r.output)


def ratio_partners(test_rows) -> list:
    """For each static batch among `test_rows` (the A100), the H100 row of the same model, engine,
    tensor-parallel degree, batch and lengths among the fit and validation rows, or None."""
    h100 = {_same_batch(r): r for role in ("fit", "validation") for r in check_rows(role)
            if r.load == "batch" and Path(r.hardware).stem == "h100-sxm"}
    return [h100.get(_same_batch(r)) if r.load == "batch" else None for r in test_rows]


RATIO = "A100 / H100 static batch e2e ratio"


def ratio_error(a, h, pred_a, pred_h) -> float:
    """Predicted over measured e2e(A100) / e2e(H100) of a pair of rows, minus 1 (`pred_*`: the rows'
    predicted throughputs). Rows carry throughput = B * OSL / e2e, so the ratio is thr(H100) / thr(A100)."""
    return (pred_h / pred_a) / (h.value / a.value) - 1.0


def predicted(roles=("validation",), cal_path=DEFAULT_FILE, options=OPTS) -> tuple:
    """(rows, [rows] role, rows and the test batches' H100 partners, [(test row, partner)] indices into the
    latter, {stack: predictions of the latter}): each role's rows predicted once, for `figures` and
    `loop_rows` both."""
    rows, role_of = [], []
    for role in roles:
        got = check_rows(role)
        rows += got
        role_of += [role] * len(got)
    # The A100 test batches' H100 partners are predicted with the rest (appended after `rows`).
    tests = [i for i, ro in enumerate(role_of) if ro == "test"]
    found = [(i, h) for i, h in zip(tests, ratio_partners([rows[i] for i in tests]) if tests else []) if h is not None]
    pairs = [(i, len(rows) + k) for k, (i, _) in enumerate(found)]
    allrows = rows + [h for _, h in found]
    return rows, role_of, allrows, pairs, predictions(allrows, load_calibration(cal_path), options)


def figures(roles=("validation",), cal_path=DEFAULT_FILE, options=OPTS, got=None) -> dict:
    """{role: {stack: {category: {n, median_abs, median_signed}}}} of each role's rows (plus 'all static
    batch e2e', and for the test rows the A100's end-to-end latency over the H100's on the same batch,
    RATIO: predicted ratio / measured ratio - 1); rows of one model structure and load are one program.
    `got`: `predicted(roles, cal_path, options)`, when the caller has it already."""
    rows, role_of, allrows, pairs, preds = got or predicted(roles, cal_path, options)
    out = {role: {} for role in roles}
    for stack, pred in preds.items():
        e = errors(rows, pred[:len(rows)])
        for role in roles:
            cats = defaultdict(list)
            for r, x, ro in zip(rows, e, role_of):
                if ro == role:
                    cats[category(r)].append(x)
                    if r.load == "batch":
                        cats["all static batch e2e"].append(x)
            if role == "test" and pairs:
                cats[RATIO] = [ratio_error(allrows[a], allrows[h], pred[a], pred[h]) for a, h in pairs]
            out[role][stack] = {c: {"n": len(v), "median_abs": float(np.median(np.abs(v))),
                                    "median_signed": float(np.median(v))} for c, v in sorted(cats.items())}
    return out


def lines(role: str, figs: dict) -> list[str]:
    out = [f"  {LABELS[role]}:"]
    for stack, cats in figs.items():
        for c, s in cats.items():
            out.append(f"    {stack + ' stack,':14s} {c:34s} {100 * s['median_abs']:5.1f}%  "
                       f"{100 * s['median_signed']:+6.1f}%  n={s['n']}")
    return out


def _drop_figures(head: list, body: list, roles) -> tuple[list, list]:
    """The header and body without the figures of `roles` (their header block: the role's title line and
    the indented lines under it; their `fit.<role>` block: `  <role>:` and the deeper lines under it)."""
    titles = {f"#{lines(role, {})[0]}" for role in roles}
    keep_head, skipping = [], False
    for ln in head:
        skipping = ln in titles or (skipping and ln.startswith("#    "))
        if not skipping:
            keep_head.append(ln)
    keys = {f"  {role}:" for role in roles}
    start = body.index("fit:")
    keep_body, skipping = body[:start], False
    for ln in body[start:]:
        skipping = ln in keys or (skipping and ln.startswith("    "))
        if not skipping:
            keep_body.append(ln)
    return keep_head, keep_body


def write(cal_path, figs_by_role: dict, replace=False):
    """Store the figures in the calibration file (as `jaxplat calibrate --out` wrote it, `fit:` its last key):
    lines in its header before the engine and flag lines, `fit.<role>` appended to its body. `replace`
    drops the figures it already holds for those roles first (a new round, after a change chosen on
    validation rows)."""
    text = Path(cal_path).read_text().splitlines()
    n = next(k for k, ln in enumerate(text) if not ln.startswith("#"))
    head, body = text[:n], text[n:]
    if replace:
        head, body = _drop_figures(head, body, figs_by_role)
    doc = yaml.safe_load("\n".join(body))
    if any(role in doc["fit"] for role in figs_by_role):
        raise SystemExit(f"{cal_path}: already holds figures for {', '.join(figs_by_role)} (--replace: a new round)")
    cut = next((k for k, ln in enumerate(head) if ln.startswith(("# Engine ", "# Flags"))), len(head))
    extra = [f"#{ln}" for role, figs in figs_by_role.items() for ln in lines(role, figs)]
    block = yaml.safe_dump(json.loads(json.dumps(figs_by_role)), sort_keys=False).splitlines()
    Path(cal_path).write_text("\n".join(head[:cut] + extra + head[cut:] + body + ["  " + ln for ln in block]) + "\n")


def loop_rows(got) -> list[list[str]]:
    """[role, chip, model, ISL/OSL, metric, measured, own, default] of each closed-loop row of `got`
    (`predicted(...)`; milliseconds): where a category's median comes from, row by row."""
    rows, role_of, _, _, preds = got
    return [[role, Path(r.hardware).stem, Path(r.model).stem, f"{r.prompt:.0f}/{r.output:.0f}", r.metric[:-2].upper(),
             f"{1e3 * r.value:.1f}", *(f"{1e3 * preds[s][i]:.1f}" for s in STACKS)]
            for i, (role, r) in enumerate(zip(role_of, rows)) if r.load != "batch"]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calibration", default=str(DEFAULT_FILE))
    ap.add_argument("--test", action="store_true", help="also predict the test rows (once, after the model is frozen)")
    ap.add_argument("--write", action="store_true", help="store the figures in the calibration file's report")
    ap.add_argument("--replace", action="store_true", help="with --write: replace the figures the file holds")
    ap.add_argument("--loop-rows", action="store_true",
                    help="print each closed-loop row (ms): measured, and predicted on both stacks")
    ap.add_argument("--gemm-overlap", type=float, default=0.0,
                    help="a modelling variant: the weight GEMMs' p-norm (Options.gemm_overlap; 0, the max, shipped)")
    args = ap.parse_args(argv)
    if args.write and args.gemm_overlap:
        ap.error("--write stores the shipped model's figures: not with --gemm-overlap")
    try:
        options = dataclasses.replace(OPTS, gemm_overlap=args.gemm_overlap)
    except SpecError as e:
        ap.error(f"--gemm-overlap: {e}")
    roles = ("validation", "test") if args.test else ("validation",)
    got = predicted(roles, args.calibration, options)
    if args.loop_rows:
        print(table(["role", "chip", "model", "ISL/OSL", "metric", "measured ms", "own ms", "default ms"],
                    loop_rows(got), "lllllrrr"))
        print()
    figs = figures(roles, got=got)
    for role in roles:
        print("\n".join(lines(role, figs[role])))
    if args.write:
        write(args.calibration, figs, replace=args.replace)


if __name__ == "__main__":
    main()
