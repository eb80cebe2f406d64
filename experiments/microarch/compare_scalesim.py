"""Our systolic-array cycles beside SCALE-Sim's, with the error per dataflow.

Reads tests/data/scalesim/gemm_cycles.csv (written by scalesim_reference.py,
SCALE-Sim 3.0.0's "Total Cycles") and evaluates jaxplat.cost.microarch.gemm_cycles
in exact mode on every row, vmapped per dataflow.

    python experiments/microarch/compare_scalesim.py          # summary, worst rows
    python experiments/microarch/compare_scalesim.py --all    # every row
"""

import argparse
import csv
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from jaxplat.cost.microarch import DATAFLOWS, gemm_cycles

CSV = Path(__file__).resolve().parents[2] / "tests" / "data" / "scalesim" / "gemm_cycles.csv"
DIMS = ("m", "n", "k", "rows", "cols")


def load(path=CSV):
    with open(path) as f:
        return list(csv.DictReader(f))


def ours(rows, dataflow):
    """gemm_cycles on the CSV rows of one dataflow (float64 numpy, via float32)."""
    cols = [jnp.asarray([float(r[d]) for r in rows]) for d in DIMS]
    f = jax.jit(jax.vmap(lambda m, n, k, a, b: gemm_cycles(m, n, k, a, b, dataflow)))
    return np.asarray(f(*cols), dtype=np.float64)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--all", action="store_true", help="print every row")
    ap.add_argument("--csv", type=Path, default=CSV)
    args = ap.parse_args()
    table = load(args.csv)
    print(f"{args.csv.name}: {len(table)} rows, scalesim {sorted({r['scalesim_version'] for r in table})}")
    print(f"{'dataflow':8} {'rows':>5} {'median |err| %':>15} {'worst |err| %':>14} {'exact':>7}")
    shown = []
    for df in DATAFLOWS:
        rows = [r for r in table if r["dataflow"] == df]
        ref = np.array([float(r["cycles"]) for r in rows])
        got = ours(rows, df)
        err = np.abs(got - ref) / ref * 100
        print(f"{df:8} {len(rows):5d} {np.median(err):15.4f} {err.max():14.4f} {int((got == ref).sum()):7d}")
        order = range(len(rows)) if args.all else np.argsort(-err)[:3]
        shown += [(rows[i], got[i], err[i]) for i in order]
    print("\n" + ("every row" if args.all else "worst rows per dataflow"))
    print(f"{'m':>5} {'n':>5} {'k':>5} {'array':>8} {'df':>3} {'scalesim':>10} {'ours':>10} {'err %':>7}  source")
    for r, g, e in shown:
        print(f"{r['m']:>5} {r['n']:>5} {r['k']:>5} {r['rows'] + 'x' + r['cols']:>8} {r['dataflow']:>3} "
              f"{r['cycles']:>10} {g:10.0f} {e:7.3f}  {r['source']}")


if __name__ == "__main__":
    main()
