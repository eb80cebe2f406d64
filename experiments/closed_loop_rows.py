"""Closed-loop rows of the measured set (the dstack DeepSeek-R1 sweep): measured
against predicted TTFT, TPOT and throughput, and the requests decoding and
waiting that Little's law gives from each side's numbers.

    PYTHONPATH=. python experiments/closed_loop_rows.py [--csv data/measured/calibration_rows.csv]

Predictions come from `design.calibration.predict_one` (the path `jaxplat
calibrate --predictions` takes) with the shipped calibration (no refit).

Little's law, one client's cycle: a closed-loop client always has one request
in flight, so with X = throughput / O requests/s of the deployment the N
clients satisfy N = X (TTFT + (O - 1) TPOT) (mean latency of a request is
TTFT plus O - 1 inter-token gaps, TPOT = (E2E - TTFT) / (O - 1) as vllm bench
serve defines it). The part X (O - 1) TPOT is the mean number of requests
past their first token (decoding); X TTFT the mean number waiting for or in
their prefill. Their sum falls short of N where the run's tail (the last
partial wave of 500 prompts) has fewer than N clients.
"""

import argparse

import jax
import numpy as np

from jaxplat.design.calibration import OPTS, predict_one
from jaxplat.design.measured import read_rows, row_pytrees
from jaxplat.model import load_model
from jaxplat.serving import capacity


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csv", default="data/measured/calibration_rows.csv")
    args = ap.parse_args()
    rows = [r for r in read_rows(args.csv) if r.load == "concurrency"]
    configs = {}
    for r in rows:
        configs.setdefault(r.config_key(), {})[r.metric] = r
    fn = {}
    err = {m: [] for m in ("ttft_s", "tpot_s", "throughput_tok_s")}
    print(f"{'engine':11s} {'chip':9s} {'N':>4s} | {'TTFT s meas/pred':>17s} {'err':>6s} | {'TPOT ms meas/pred':>17s} {'err':>6s} "
          f"| {'thr tok/s meas/pred':>19s} {'err':>6s} | {'dec m/p':>9s} {'wait m/p':>9s} {'slots':>5s}")
    for by in configs.values():
        r = next(iter(by.values()))
        model = fn.setdefault(r.model, (load_model(r.model),))[0]
        hw, par, wl, srv = row_pytrees(r)
        f = fn.setdefault((r.model, "f"), jax.jit(lambda h, p, w, s, a, model=model: predict_one(model, h, p, w, s, "loop", a)))
        thr, ttft, tpot = (float(v) for v in f(hw, par, wl, srv, np.float32(r.amount)))
        cap = float(fn.setdefault((r.model, "c"), jax.jit(lambda h, p, w, s, model=model: capacity(model, h, p, w, s, OPTS)[0]))(hw, par, wl, srv))
        meas = {m: by[m].value for m in by}
        O = r.output

        def little(x_tok, t1, t2, O=O):
            x = x_tok / O
            return x * (O - 1) * t2, x * t1
        dm, wm = little(meas["throughput_tok_s"], meas["ttft_s"], meas["tpot_s"])
        dp_, wp = little(thr, ttft, tpot)
        out = []
        for m, p in (("ttft_s", ttft), ("tpot_s", tpot), ("throughput_tok_s", thr)):
            e = p / meas[m] - 1.0
            err[m].append(e)
            out.append(e)
        print(f"{r.engine:11s} {r.hardware:9s} {r.amount:4.0f} | {meas['ttft_s']:8.2f}/{ttft:8.2f} {out[0]:+6.0%} | "
              f"{meas['tpot_s']*1e3:8.1f}/{tpot*1e3:8.1f} {out[1]:+6.0%} | {meas['throughput_tok_s']:9.0f}/{thr:9.0f} {out[2]:+6.0%} | "
              f"{dm:4.0f}/{dp_:4.0f} {wm:4.0f}/{wp:4.0f} {cap:5.0f}")
    for m, e in err.items():
        e = np.array(e)
        print(f"{m:17s} median |err| {np.median(np.abs(e)):6.1%}  median signed {np.median(e):+6.1%}  ({len(e)} rows)")


if __name__ == "__main__":
    main()
