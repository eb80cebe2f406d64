"""Which fitted parameters the rows cannot tell apart: the eigenvectors of
JᵀWJ at a calibration's fitted values (issue 37 item 4).

J[i, k] = d log(predicted_i) / d log(value_k) over the rows the fit used
(the calibration's own Predictor and programs, `design.calibration`), W the
fit's per-row weights (each source the same total weight). An eigenvalue
small beside the largest is a direction in log-parameter space the rows
hardly see: the parameters with large weight in its eigenvector trade off
against each other (a product or ratio pinned, not each value). Values at a
bound are left out (the bound pins them).

    .venv/bin/python experiments/calibration_jtwj.py MEASURED.csv CALIBRATION.yaml

Same MEASURED.csv and --fit / --engine-fit / --engines as the calibration's
`description` (read from the file), so the programs come from the compile cache
a refit left.
"""

import argparse
import shlex
import sys
from pathlib import Path

import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from jaxplat.design import calibration as cal
from jaxplat.design.measured import read_rows
from jaxplat.search import enable_compilation_cache


def _args_of(description: str) -> dict:
    words, out, key = shlex.split(description), {}, None
    for w in words:
        if w.startswith("--"):
            key = w[2:]
            out[key] = []
        elif key:
            out[key].append(w)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("measured")
    ap.add_argument("calibration")
    args = ap.parse_args(argv)
    enable_compilation_cache()
    doc = yaml.safe_load(Path(args.calibration).read_text())
    opts = _args_of(doc["description"])
    rows = read_rows(args.measured)
    pred = cal.Predictor(rows, opts["fit"], engine_fit=opts.get("engine-fit", []), engines=opts.get("engines", []))
    values = {n: doc["parameters"][n] for n in pred.globals}
    for e in pred.engines:
        for p in pred.engine_fit:
            values[f"{p}@{e}"] = doc["engines"][e][p] / doc["parameters"][p]
    z = cal.z_of(pred, values)
    train = np.array([r.load in cal.FIT_LOADS for r in rows])
    w = cal.source_weights(rows, train)
    p, jz = pred.predict_and_jac(z)
    lo_hi = np.array([np.log(cal.bounds(n)[1] / cal.bounds(n)[0]) for n in pred.names])
    s = 1.0 / (1.0 + np.exp(-np.asarray(z, float)))
    dlogv_dz = lo_hi * s * (1.0 - s)
    free = np.array([not cal.at_bound(n, values[n]) for n in pred.names])
    jl = (jz / p[:, None])[:, free] / dlogv_dz[free]
    names = [n for n, f in zip(pred.names, free) if f]
    h = jl[train].T @ (w[train, None] * jl[train]) / w[train].sum()
    ev, vec = np.linalg.eigh(h)
    print(f"JᵀWJ over {int(train.sum())} fitted rows, {len(names)} free parameters "
          f"(at a bound, left out: {', '.join(n for n, f in zip(pred.names, free) if not f) or 'none'})")
    print(f"{'eigenvalue':>11s}  {'/ largest':>9s}  direction (components over 0.25)")
    for k in range(len(ev)):
        comps = sorted(((vec[i, k], names[i]) for i in range(len(names)) if abs(vec[i, k]) > 0.25),
                       key=lambda t: -abs(t[0]))
        print(f"{ev[k]:11.3g}  {ev[k] / ev[-1]:9.2g}  " + ", ".join(f"{c:+.2f} {n}" for c, n in comps))
    print("diagonal (loss curvature of each value alone):")
    for n, d in sorted(zip(names, np.diag(h)), key=lambda t: t[1]):
        print(f"  {n:32s} {d:.3g}")


if __name__ == "__main__":
    main()
