"""Llama-3.1-405B on 64 H200s (DGX H200 nodes, NVLink 8 + InfiniBand): which
TP x PP x DP, and how fast? Every split that uses all 64 chips, evaluated with
the one cost model (default profile), feasible ones ranked by throughput with
their TTFT and TPOT. Prints a table; the last line names the best split.

Run: .venv/bin/python experiments/parallelism_405b_h200.py
"""

import itertools

import jax

import jaxplat as jp
from jaxplat.model import workload_from_dict
from jaxplat.report import table
from jaxplat.specs.units import fmt_time

CHIPS = 64


def main():
    model, hw = jp.load_model("llama-3.1-405b"), jp.load_hardware("dgx-h200-pod")
    wl = workload_from_dict({"batch": 64, "prompt": 2048, "output": 256, "dtype": "fp8"})
    rows = []
    for tp, pp in itertools.product((1, 2, 4, 8, 16), (1, 2, 4, 8, 16)):
        if CHIPS % (tp * pp):
            continue
        dp = CHIPS // (tp * pp)
        par = jp.Parallel(tp=tp, pp=pp, dp=dp, microbatches=max(pp, 1))
        m = jax.device_get(jp.evaluate(model, hw, par, wl))
        rows.append((bool(m.feasible), float(m.throughput), tp, pp, dp, float(m.ttft), float(m.tpot),
                     float(m.memory_bytes) / 1e9))
    rows.sort(key=lambda r: (not r[0], -r[1]))
    print(table(["feasible", "tokens/s", "tp", "pp", "dp", "TTFT", "TPOT", "GB/chip"],
                [[str(f), f"{t:.0f}", tp, pp, dp, fmt_time(a), fmt_time(b), f"{g:.0f}"]
                 for f, t, tp, pp, dp, a, b, g in rows], "lrrrrrrr"))
    best = rows[0]
    print(f"best: tp={best[2]} pp={best[3]} dp={best[4]}: {best[1]:.0f} tokens/s, "
          f"TTFT {fmt_time(best[5])}, TPOT {fmt_time(best[6])}")


if __name__ == "__main__":
    main()
