"""`jaxplat calibrate MEASURED.csv --out calibration.yaml`: fit the efficiency
parameters to measured rows, report the fit and the leave-one-group-out
error, write a file that `estimate`, `sweep` and `codesign` take with
`--calibration FILE`."""

import json
import sys
import time
from pathlib import Path

import numpy as np
import yaml

from jaxplat.design import calibration as cal
from jaxplat.design.measured import chip_ratio_errors, read_rows
from jaxplat.model import EFFICIENCY_PARAMS
from jaxplat.report import table
from jaxplat.serving import SATURATED
from jaxplat.specs import SpecError


def register(sub):
    p = sub.add_parser("calibrate", help="fit efficiency parameters to measured throughput and latency",
                       description="Fit the efficiency parameters (log space, bounded, Huber loss on the log "
                                   "ratio, optax L-BFGS) to measured rows (schema in the README), print the fit "
                                   "and the leave-one-model-out and leave-one-chip-out errors, write a "
                                   "calibration file.")
    p.add_argument("measured", help="measured CSV (e.g. data/measured/calibration_rows.csv)")
    p.add_argument("--out", help="calibration YAML to write (for --calibration FILE)")
    p.add_argument("--fit", nargs="+", default=list(cal.DEFAULT_FIT), metavar="NAME",
                   help=f"parameters to fit (default: {' '.join(cal.DEFAULT_FIT)}; any of {', '.join(cal.BOUNDS)})")
    p.add_argument("--engine-fit", nargs="+", default=[], metavar="NAME",
                   help="of the --fit parameters, those fitted once more for each engine in --engines (as a "
                        "factor on the global value; e.g. compute)")
    p.add_argument("--engines", nargs="+", default=[], metavar="ENGINE",
                   help="values of the measured rows' engine column (or parts of it joined by +, e.g. rocm in "
                        "vllm-0.7+rocm: such a row takes the product of its parts' factors) whose rows get their own "
                        "--engine-fit values (written under engines:, used by --engine ENGINE); other rows share the "
                        "global ones")
    p.add_argument("--steps", type=int, default=40, help="L-BFGS iterations per fit (default 40)")
    p.add_argument("--train", nargs="+", default=[], metavar="COLUMN=VALUE",
                   help="fit only on rows matching all of these (e.g. hardware=h100-sxm); the rest are held out")
    p.add_argument("--loads", nargs="+", default=list(cal.FIT_LOADS),
                   choices=("offline", "concurrency", "batch", "rate"),
                   help=f"kinds of load whose rows the fit uses (default: {' '.join(cal.FIT_LOADS)}; the others are "
                        "predicted and reported, never fitted)")
    p.add_argument("--no-holdout", action="store_true", help="skip the leave-one-group-out refits")
    p.add_argument("--starts", type=int, default=1, metavar="N",
                   help="fit from N starting points (the usual one and N - 1 drawn inside the bounds) and flag the "
                        "parameters whose values differ by more than x1.5 among fits of the same loss (within 1%%): "
                        "values the rows do not pin (default 1: no check; each start costs one fit)")
    p.add_argument("--holdout-steps", type=int, default=None,
                   help="L-BFGS iterations of each leave-one-group-out refit (default: --steps); each refit "
                        "starts where the full fit started, never from its result")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    p.add_argument("--predictions", metavar="CSV",
                   help="write each row's predictions (before, fit, leave-one-group-out) to this CSV "
                        "(experiments/calibration_report.py plots them)")
    p.set_defaults(func=run)


def _key(column):
    return lambda r: getattr(r, column) if hasattr(r, column) else r.par.get(column)


def _category(r) -> str:
    """Kind of measurement. Rows whose mean input length is assumed (MLPerf)
    stand apart: the fit takes them up to one factor per benchmark
    (`calibration.assumed_input_groups`), so their absolute error measures
    the assumption; they are judged by the per-chip ratios."""
    kind = (f"throughput, {r.load}" if r.metric == "throughput_tok_s" else
            f"{r.metric[:-2].upper()}, {'Poisson load' if r.load == 'rate' else r.load}")
    return kind + (", input assumed" if cal.input_assumed(r) else "")


def _stable(pred, rows):
    """[rows] True where the prediction is a number: a latency at a load the
    model finds beyond the deployment's capacity is SATURATED seconds
    ('unstable'); a throughput (tokens/s, often above SATURATED) always is."""
    pred = np.asarray(pred, float)
    latency = np.array([r.metric != "throughput_tok_s" for r in rows])
    return np.isfinite(pred) & ~(latency & (pred >= SATURATED))


def _rows_table(title, pred, rows, mask, key):
    """Median errors per group over the rows in `mask` whose prediction is a
    number (a load the model finds beyond the deployment's capacity predicts
    no latency: counted apart as 'unstable')."""
    pred = np.asarray(pred, float)
    stable = _stable(pred, rows)
    groups = sorted({key(r) for r, m in zip(rows, mask) if m})
    out = []
    for g in groups + ["all"]:
        sel = np.asarray(mask) & np.array([g == "all" or key(r) == g for r in rows])
        s = cal.summarize(pred, rows, sel & stable)
        out.append([str(g), int(sel.sum()), int((sel & ~stable).sum()),
                    f"{100 * s['median_abs']:.1f}%", f"{100 * s['median_signed']:+.1f}%"])
    return f"{title}\n" + table(["group", "rows", "unstable", "median |error|", "median signed"], out, "lrrrr")


def _summary(pred, rows, mask):
    pred = np.asarray(pred, float)
    mask = np.asarray(mask) & _stable(pred, rows)
    cats = sorted({_category(r) for r in rows})
    return {c: cal.summarize(pred, rows, mask & np.array([_category(r) == c for r in rows]))
            for c in cats} | {"all": cal.summarize(pred, rows, mask)}


def _command(args) -> str:
    """The command line that reproduces this fit."""
    parts = [f"jaxplat calibrate {args.measured}", f"--fit {' '.join(args.fit)}", f"--steps {args.steps}"]
    if args.engine_fit:
        parts.append(f"--engine-fit {' '.join(args.engine_fit)} --engines {' '.join(args.engines)}")
    if args.train:
        parts.append(f"--train {' '.join(args.train)}")
    if list(args.loads) != list(cal.FIT_LOADS):
        parts.append(f"--loads {' '.join(args.loads)}")
    if args.holdout_steps is not None:
        parts.append(f"--holdout-steps {args.holdout_steps}")
    if args.starts > 1:
        parts.append(f"--starts {args.starts}")
    return " ".join(parts)


def _fitted_stack(params: dict, fitted, command: str, out: Path) -> Path | None:
    """Write the software stack a calibration's fixed costs were fitted as,
    beside it (`<out stem>-software.yaml`, which the calibration's `software:`
    names): the fitted fixed costs, every other key as in the stack the rows
    ran on (the shipped calibration's, else graph-captured). None, with a note
    on stderr, when no fixed cost was fitted or a fitted one lies outside a
    software spec's bounds."""
    from jaxplat.model import default_calibration
    from jaxplat.model.software_spec import DEFAULT_STACK, SOFTWARE_KEYS, software_from_dict
    from jaxplat.specs import read_yaml, resolve

    keys = [k for k in SOFTWARE_KEYS if k in fitted]
    if not keys:
        return None
    shipped = default_calibration()
    base = shipped.software if shipped is not None and shipped.software else DEFAULT_STACK
    d = read_yaml(resolve("software", base))
    path = out.with_name(f"{out.stem}-software.yaml")
    d["name"] = path.stem
    d["description"] = (f"The fixed costs fitted with {out.name} ({command}); the other keys as in the "
                        f"stack its rows ran on ({base}).")
    source = f"fitted {time.strftime('%Y-%m-%d', time.gmtime())} ({command})"  # UTC, as the file's header
    for k in keys:
        d[k] = {"value": float(f"{params[k]:.6g}"), "source": source}
    try:
        software_from_dict(d, src=str(path))
    except SpecError as e:
        print(f"jaxplat: note: no software stack written beside {out}: {e}", file=sys.stderr)
        return None
    path.write_text(yaml.safe_dump(d, sort_keys=False))
    return path


def _header(command, summary, flags, engines=None) -> str:
    """Comment lines opening a calibration file: how it was made, when, and
    its errors per kind of measurement (median |error|, median signed, rows)."""
    lines = ["Efficiency parameters fitted by `jaxplat calibrate` (meanings: README, 'Efficiency and",
             "calibration'); use with --calibration FILE.",
             f"Made {time.strftime('%Y-%m-%d', time.gmtime())} with: {command}",
             "Errors: median |predicted/measured - 1|, median signed error, rows (unstable latencies apart)."]
    labels = {"fit": "fit (rows it saw)", "held_out_rows": "rows the fit did not see (other loads, outside --train)",
              "leave_one_hardware_out": "leave one chip out", "leave_one_model_out": "leave one model out"}
    for k in (k for k in labels if k in summary):
        lines.append(f"  {labels[k]}:")
        for cat, s in summary[k].items():
            if s["n"]:
                lines.append(f"    {cat:39s} {100 * s['median_abs']:5.1f}%  {100 * s['median_signed']:+6.1f}%  "
                             f"n={s['n']}")
    if "chip_ratio_median_abs" in summary:
        lines.append(f"  per-chip MLPerf offline throughput ratios: median |error| "
                     f"{100 * summary['chip_ratio_median_abs']:.1f}%")
    for e, own in (engines or {}).items():
        lines.append(f"Engine {e} (its rows, --engine {e}): " + ", ".join(f"{n} {v:.3g}" for n, v in own.items()))
    notes = [f"{n} {f}" for n, f in flags.items() if f]
    if notes:
        lines.append("Flags (modelling signals, not results): " + "; ".join(notes))
    return "".join(f"# {line}\n" for line in lines)


def _write_predictions(path, rows, train, sets: dict):
    """One line per measured row: where it is in the CSV, what it measures,
    whether the fit saw it, and each set's prediction (NaN: none)."""
    import csv
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["line", "model", "hardware", "load", "metric", "source", "value", "fitted_on"] + list(sets))
        for i, r in enumerate(rows):
            w.writerow([r.line, r.model, r.hardware, r.load, r.metric, r.source, r.value, int(train[i])]
                       + [f"{float(p[i]):.6g}" for p in sets.values()])


def run(args) -> int:
    from jaxplat.search import enable_compilation_cache
    enable_compilation_cache()  # the fit's programs compile in minutes; a rerun reads them back
    rows = read_rows(args.measured)
    train = np.ones(len(rows), bool)
    for cond in args.train:
        col, _, val = cond.partition("=")
        if not val:
            raise SpecError(f"--train expects COLUMN=VALUE, got {cond!r}")
        train &= np.array([str(_key(col)(r)) == val for r in rows])
    train &= np.array([r.load in args.loads for r in rows])
    if not train.any():
        raise SpecError(f"--train {' '.join(args.train)} --loads {' '.join(args.loads)} matches no row of "
                        f"{args.measured}")
    if args.starts < 1:
        raise SpecError(f"--starts is a number of fits, at least 1, got {args.starts}")
    if bool(args.engine_fit) != bool(args.engines):
        raise SpecError("--engine-fit and --engines go together: which parameters, for which engines")
    parts = {e for r in rows for e in cal.Predictor.parts(r)}
    missing = [e for e in args.engines if e not in parts]
    if missing:
        raise SpecError(f"--engines {missing[0]}: no row of {args.measured} has that engine; engines there: "
                        f"{', '.join(sorted(parts))}")
    log = (lambda *a: None) if args.json else (lambda *a: print(*a, file=sys.stderr, flush=True))
    t0 = time.time()
    pred = cal.Predictor(rows, args.fit, engine_fit=args.engine_fit, engines=args.engines)
    log(f"{len(rows)} rows, {len(pred.configs)} configurations, {len(pred.groups)} programs")
    before = np.asarray(pred.predict(cal.z_of(pred, pred.base)))
    weights = cal.source_weights(rows, train)  # each source counts the same
    values, loss, hist = cal.fit(pred, weights, args.steps,
                                 log=lambda i, v: log(f"  fit step {i}: loss {v:.5f}"))
    fitted = np.asarray(pred.predict(cal.z_of(pred, values)))
    others = cal.multistart(pred, weights, args.steps, args.starts,
                            log=lambda k, i, v: log(f"  start {k}: step {i} loss {v:.5f}"))
    held = {}
    if not args.no_holdout:
        for col in ("model", "hardware"):
            p, per = cal.held_out_predictions(pred, _key(col), args.holdout_steps or args.steps,
                                              log=lambda g, i, v: log(f"  leave out {g}: step {i} loss {v:.5f}"),
                                              weights=weights)
            held[col] = (p, per)
    seconds = time.time() - t0
    if args.predictions:
        _write_predictions(args.predictions, rows, train,
                           {"before": before, "fit": fitted, **{f"leave_one_{c}_out": p for c, (p, _) in held.items()}})

    params = {**pred.base, **values}
    engines = cal.engine_values(params, args.engine_fit, args.engines)
    flags = {n: "at its bound" if cal.at_bound(n, v) else "" for n, v in values.items()}
    for e, own in engines.items():  # an engine's value is held to the parameter's physical maximum too
        for n, v in own.items():
            if v > cal.PHYSICAL_MAX.get(n, np.inf) and not flags[f"{n}@{e}"]:
                flags[f"{n}@{e}"] = "above the physical maximum"
    ident = cal.identification(pred, values, weights)
    for n, rise in ident.items():  # a value the loss hardly sees is not a measurement of the hardware
        if rise < cal.IDENTIFIED and not flags[n]:
            flags[n] = (f"weakly identified (x{cal.IDENTIFY_FACTOR:g} or /{cal.IDENTIFY_FACTOR:g}: "
                        f"loss +{100 * rise:.2g}%)")
    spans = cal.unpinned([(values, loss)] + others) if others else {}
    for n, (lo, hi) in spans.items():  # a valley of equal loss: the rows pin a combination, not this value
        flags[n] = "; ".join(f for f in (flags[n], f"not pinned ({lo:.3g}-{hi:.3g} at equal loss, "
                                                   f"{args.starts} starts)") if f)
    summary = {"rows": len(rows), "fitted_rows": int(train.sum()), "loss": loss, "steps": len(hist),
               "seconds": seconds, "before": _summary(before, rows, train), "fit": _summary(fitted, rows, train),
               "identification": ident}
    if others:
        summary["starts"] = [{"loss": lo, "values": {n: float(f"{v:.4g}") for n, v in vals.items()}}
                             for vals, lo in [(values, loss)] + others]
    if not train.all():
        summary["held_out_rows"] = _summary(fitted, rows, ~train)
    for col, (p, per) in held.items():
        summary[f"leave_one_{col}_out"] = _summary(p, rows, ~np.isnan(p))
        if per:  # what each leave-out fit found: a value that moves far when one
            # group leaves is identified by that group alone (its held-out error says so)
            summary[f"leave_one_{col}_out_values"] = {g: {n: float(f"{v:.4g}") for n, v in vals.items()}
                                                      for g, (_, vals) in per.items()}
    ratio_src = held.get("hardware", (fitted,))[0]
    ratios = chip_ratio_errors(np.nan_to_num(ratio_src, nan=1.0), rows)
    if ratios:
        summary["chip_ratio_median_abs"] = float(np.median([abs(x.error) for x in ratios]))

    if args.out:
        command = _command(args)
        doc = {"description": command,
               "parameters": {n: float(f"{params[n]:.6g}") for n in EFFICIENCY_PARAMS}}
        if engines:
            doc["engines"] = {e: {n: float(f"{v:.6g}") for n, v in own.items()} for e, own in engines.items()}
        stack = _fitted_stack(params, args.fit, command, Path(args.out))
        if stack is not None:  # the file's own rows, and runs with --calibration FILE, use the fitted fixed costs
            doc["software"] = stack.name
        doc["fit"] = json.loads(json.dumps(summary))
        Path(args.out).write_text(_header(command, summary, flags, engines) + yaml.safe_dump(doc, sort_keys=False))
    if args.json:
        print(json.dumps({"parameters": params, "engines": engines, "flags": flags, **summary,
                          "chip_ratios": [{"pair": f"{x.benchmark}: {x.chips}", "measured": x.measured,
                                           "predicted": x.predicted, "error": x.error} for x in ratios]}))
        return 0

    print(f"\nFitted on {int(train.sum())} of {len(rows)} rows in {seconds:.0f} s ({len(hist)} steps, loss {loss:.4g})")
    print(table(["parameter", "value", "bounds", "meaning", "note"],
                [[n, f"{params[n]:.4g}" + (" s" if EFFICIENCY_PARAMS[n][2] == "s" else ""),
                  f"{cal.BOUNDS[n][0]:g}..{cal.BOUNDS[n][1]:g}" if n in values else "not fitted",
                  EFFICIENCY_PARAMS[n][3], flags.get(n, "")] for n in EFFICIENCY_PARAMS], "lrrll"))
    if engines:
        print()
        print(table(["engine", "parameter", "value", "x global", "note"],
                    [[e, n, f"{v:.4g}", f"{params[f'{n}@{e}']:.3f}", flags.get(f"{n}@{e}", "")]
                     for e, own in engines.items() for n, v in own.items()], "llrrl"))
    print()
    print(_rows_table("Before the fit (parameters as loaded)", before, rows, train, _category))
    print()
    print(_rows_table("Fit (rows it saw), by kind of measurement", fitted, rows, train, _category))
    print()
    print(_rows_table("Fit, by source", fitted, rows, train, lambda r: r.source))
    if not train.all():
        print()
        print(_rows_table(f"Held out: rows outside --train {' '.join(args.train)}", fitted, rows, ~train, _category))
    for col, (p, per) in held.items():
        print()
        print(_rows_table(f"Leave one {col} out: each row predicted by the fit without its {col}",
                          p, rows, ~np.isnan(p), _category))
        print(_rows_table(f"  ... by {col}", p, rows, ~np.isnan(p), _key(col)))
        if not per:
            continue
        names = [n for n in pred.names if "@" not in n]
        print(f"  ... values fitted without each {col}")
        print(table([f"without {col}"] + names, [[g] + [f"{vals[n]:.3g}" for n in names] for g, (_, vals) in
                                                  per.items()], "l" + "r" * len(names)))
    if ratios:
        print()
        print("Per-chip offline throughput ratios between chips in the same MLPerf round"
              + (" (leave-one-chip-out predictions)" if "hardware" in held else ""))
        print(table(["pair", "measured", "predicted", "error"],
                    [[a, f"{b:.3g}", f"{c:.3g}", f"{100 * e:+.1f}%"] for a, b, c, e in ratios], "lrrr"))
        print(f"median |error| of the ratios: {100 * summary['chip_ratio_median_abs']:.1f}%")
    if args.out:
        print(f"\nwrote {args.out}")
    return 0
