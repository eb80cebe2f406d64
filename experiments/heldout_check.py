"""Predicted vs measured on rows no calibration ever fits.

`data/measured/heldout_rows.csv` (written by data/measured/convert.py), three
sources:
  * trtllm_perf_overview_heldout.csv: the other columns of the TensorRT-LLM
    performance overview the fitted tables come from (same page, commit and
    trtllm-bench settings): Llama-3.3-70B on one B200 / GB200 in FP4,
    Llama-3.1-405B on 8 H100 / 8 H200 (FP8) and 4 B200 / 4 GB200 (FP4),
    Qwen3-235B-A22B on 8 H100 / H200 (FP8) and 8 B200 (FP4), attention data
    parallel as the page's MoE options set (`enable_attention_dp`);
  * trtllm_perf_overview_moe.csv: the page's MoE columns, Llama 4 Scout and
    Maverick, Qwen3-30B-A3B (FP4 on B200 / GB200, FP8 on H100 / H200);
  * trtllm_v0.9_static_batch.csv: TensorRT-LLM v0.9.0's page, static batches
    (throughput at a fixed batch and fixed lengths, TTFT at batch 1) of
    Llama-2-7B, Llama-2-70B and Mixtral-8x7B on H200 / H100 (FP8) and A100
    (FP16): no engine scheduler between the cost model and the number.
Models, sizes, chips and that engine release are outside the fit: the
figure a user gets for a deployment nobody measured for us.

Prints, per source and metric, per model and chip, the rows, the median
predicted/measured ratio and its range, the median |error| and median
signed error of the source, then of all rows; then the chips against each
other: per-chip throughput ratios of every two chips that ran the same
benchmark (model, ISL/OSL) on the TensorRT-LLM 1.0 page, predicted over
measured, per pair of chips (`measured.chip_ratio_errors`).

    .venv/bin/python experiments/heldout_check.py [--calibration FILE] [--engine STACK] [--rows] [--by-length]
        [--pair A/B]

--by-length adds, for the TensorRT-LLM 1.0 pages, the median ratio per
ISL/OSL for dense and for MoE models side by side: where the error sits by
how much of a request is prefill.

--pair A/B (e.g. gb200/b200) adds, for every benchmark both chips ran on
the TensorRT-LLM 1.0 page, chip A's per-chip throughput over chip B's,
measured and predicted: what the two chips' specs differ in, benchmark by
benchmark.

The rows are predicted on the calibration's own software stack (the fixed
costs it was fitted with, `software:` in the file: `fitted-2026-12` for the
shipped one) unless --engine names another (`--engine graph-captured`:
`estimate`'s default).
"""

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jaxplat.design import calibration as cal  # noqa: E402
from jaxplat.design.measured import chip_ratio_errors, read_rows  # noqa: E402
from jaxplat.model import load_calibration, load_model  # noqa: E402
from jaxplat.report import table  # noqa: E402

DATA = ROOT / "data" / "measured" / "heldout_rows.csv"
TITLES = {"trtllm-perf-overview-heldout": "TensorRT-LLM 1.0 perf overview, offline max load",
          "trtllm-perf-overview-moe": "TensorRT-LLM 1.0 perf overview, MoE models, offline max load",
          "trtllm-v0.9-static": "TensorRT-LLM v0.9.0 performance page, static batches"}
METRIC_NAMES = {"throughput_tok_s": "output tokens/s", "ttft_s": "TTFT at batch 1", "tpot_s": "TPOT"}


def _par(r) -> str:
    p = r.par
    return " ".join(f"{k}{int(p[k])}" for k in ("tp", "pp", "ep") if p.get(k, 1) > 1) or "tp1"


def _dtype(r) -> str:
    return "/".join(dict.fromkeys(r.dtype.values())) if isinstance(r.dtype, dict) else str(r.dtype)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(DATA), help="held-out measured rows (calibration schema)")
    ap.add_argument("--calibration", help="a calibration file instead of the shipped one")
    ap.add_argument("--engine", help="the software stack to predict with (specs/software, e.g. graph-captured, "
                                     "`estimate`'s default); default: the calibration's own, with which it was fitted")
    ap.add_argument("--rows", action="store_true", help="print every row too")
    ap.add_argument("--by-length", action="store_true",
                    help="the TensorRT-LLM 1.0 pages' median ratio per ISL/OSL, dense against MoE models")
    ap.add_argument("--pair", metavar="A/B",
                    help="per benchmark, chip A's per-chip throughput over chip B's, measured and predicted")
    args = ap.parse_args(argv)
    if args.pair is not None and args.pair.count("/") != 1:
        ap.error(f"--pair wants two chips as A/B (e.g. gb200/b200), got {args.pair!r}")
    rows = read_rows(args.data)
    calib = load_calibration(args.calibration) if args.calibration else None
    # --engine: as `estimate --engine` runs, the calibration's fractions beneath that stack's fixed costs
    pred = cal.Predictor(rows, cal.DEFAULT_FIT, calibration=calib, software=args.engine)
    p = np.asarray(pred.predict(cal.z_of(pred, pred.base)), float)
    m = np.array([r.value for r in rows])
    ratio = p / m
    if args.rows:
        print(table(["model", "chips", "dtype", "ISL/OSL", "metric", "measured", "predicted", "ratio"],
                    [[r.model, f"{_par(r)} {r.hardware}", _dtype(r), f"{r.prompt:.0f}/{r.output:.0f}", r.metric,
                      f"{r.value:.4g}", f"{q:.4g}", f"{x:.2f}"] for r, q, x in zip(rows, p, ratio)], "llllrrrr"))
        print()
    for (source, metric), which in _by(rows, lambda r: (r.source, r.metric)).items():
        out = []
        for (model, chips, dtype), idx in _by([rows[i] for i in which],
                                              lambda r: (r.model, f"{_par(r)} {r.hardware}", _dtype(r))).items():
            x = ratio[np.array(which)[idx]]
            out.append([model, chips, dtype, len(idx), f"{np.median(x):.2f}", f"{x.min():.2f}..{x.max():.2f}",
                        f"{100 * np.median(np.abs(x - 1)):.1f}%"])
        print(f"{TITLES.get(source, source)}: {METRIC_NAMES[metric]}, predicted / measured")
        print(table(["model", "chips", "dtype", "rows", "median ratio", "range", "median |error|"], out, "lllrrrr"))
        s = cal.summarize(p, rows, np.isin(np.arange(len(rows)), which))
        print(f"  {s['n']} rows: median |error| {100 * s['median_abs']:.1f}%, median signed "
              f"{100 * s['median_signed']:+.1f}%\n")
    if args.by_length:
        _by_length(rows, ratio)
    s = cal.summarize(p, rows)
    print(f"all {s['n']} rows: median |error| {100 * s['median_abs']:.1f}%, median signed "
          f"{100 * s['median_signed']:+.1f}% (calibration: {args.calibration or 'shipped'}, "
          f"software stack: {args.engine or 'its own'})")
    # Chips against each other: per-chip offline throughput ratios of chips
    # that ran the same benchmark (model, lengths) on the same page.
    pairs = chip_ratio_errors(p, rows, source="trtllm-perf-overview")
    if pairs:
        by_chips = _by(pairs, lambda x: x.chips)
        out = []
        for chips, idx in by_chips.items():
            e = np.array([pairs[i].error for i in idx])
            out.append([chips, len(idx), f"{np.median(e) + 1:.2f}", f"{100 * np.median(np.abs(e)):.1f}%"])
        print("\nPer-chip offline throughput ratios between chips on the same benchmark (model, ISL/OSL) of "
              "the TensorRT-LLM 1.0 page, predicted / measured")
        print(table(["chips", "pairs", "median", "median |error|"], out, "lrrr"))
        e = np.abs([x.error for x in pairs])
        print(f"  {len(pairs)} pairs: median |error| {100 * np.median(e):.1f}%, "
              f"{100 * np.mean(e <= 0.10):.0f}% within 10%")
    if args.pair is not None:
        a, b = args.pair.split("/")
        out = pair_ratios(pairs, a, b)
        if not out:
            sys.exit(f"heldout_check.py: --pair: no benchmark of the TensorRT-LLM 1.0 page ran on both {a} and {b}")
        print(f"\n{a} / {b}, per-chip offline throughput per benchmark (model, ISL/OSL)")
        print(table(["benchmark (model, source, ISL/OSL)", "measured", "predicted", "predicted / measured"],
                    [[bench, f"{m:.3f}", f"{q:.3f}", f"{q / m:.2f}"] for bench, m, q in out], "lrrr"))


def pair_ratios(pairs, a: str, b: str) -> list:
    """[(benchmark, measured, predicted)]: chip a's per-chip throughput over
    chip b's on each benchmark both ran, from `measured.chip_ratio_errors`'
    pairs, whichever order they name the two chips in."""
    return [(x.benchmark, *ratio) for x in pairs if (ratio := x.over(a, b)) is not None]


def moe_models(rows) -> dict:
    """{model name: whether it has routed experts} of the rows' models, each spec read once."""
    return {name: float(load_model(name).experts) > 0 for name in {r.model for r in rows}}


def _by_length(rows, ratio):
    """Median predicted / measured per ISL/OSL on the TensorRT-LLM 1.0 pages, dense and MoE models
    apart (the dense ones also split into one-GPU and tensor-parallel deployments, whose collectives
    the one-GPU rows do not have), ordered by the prompt's share of a request's tokens."""
    moe = moe_models(rows)
    keep = [i for i, r in enumerate(rows) if r.source.startswith("trtllm-perf-overview")]
    # (rows in the group, whether its row count is a column of its own)
    groups = ((lambda r: not moe[r.model], True), (lambda r: not moe[r.model] and r.par.get("tp", 1) == 1, False),
              (lambda r: not moe[r.model] and r.par.get("tp", 1) > 1, False), (lambda r: moe[r.model], True))
    out = []
    for (isl, osl), idx in sorted(_by([rows[i] for i in keep], lambda r: (r.prompt, r.output)).items(),
                                  key=lambda kv: kv[0][0] / (kv[0][0] + kv[0][1])):
        cells = []
        for want, counted in groups:
            x = ratio[[keep[i] for i in idx if want(rows[keep[i]])]]
            cells += ([len(x)] if counted else []) + [f"{np.median(x):.2f}" if len(x) else "-"]
        out.append([f"{isl:.0f}/{osl:.0f}", f"{isl / (isl + osl):.2f}", *cells])
    print("TensorRT-LLM 1.0 pages by ISL/OSL, predicted / measured (median; prompt share = ISL / (ISL + OSL);"
          " dense models also split into one GPU and tp > 1)")
    print(table(["ISL/OSL", "prompt share", "dense rows", "dense", "one GPU", "tp > 1", "MoE rows", "MoE"], out,
                "lrrrrrrr"))
    print()


def _by(rows, key) -> dict:
    """{key: [indices into rows]} in order of first appearance."""
    out = {}
    for i, r in enumerate(rows):
        out.setdefault(key(r), []).append(i)
    return out


if __name__ == "__main__":
    main()
