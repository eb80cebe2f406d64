"""The A100 against the H100 on the same static batches (issue 37's "per-chip
ratios between chips", for a chip no calibration saw).

Pairs every A100 static batch of data/measured/inference_2026-12.csv (test
rows) with the H100 row of the same model, engine, tensor-parallel degree,
batch and lengths (fit or validation rows), and compares the measured ratio
of their end-to-end latencies, e2e(A100) / e2e(H100), with the predicted one:
error = predicted ratio / measured ratio - 1, median |error| and median
signed error, on the calibration's own stack and on the default
graph-captured one (experiments/calibration_check.py's two stacks and its
prediction path). A stack's fixed time per step that both chips pay cancels
in part, so a ratio can hold where the absolute latency does not.

    .venv/bin/python experiments/chip_ratio_check.py   # about 30 s on 2 cores
"""

import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import calibration_check as cc  # noqa: E402

from jaxplat.model import load_calibration  # noqa: E402


def _name(model: str) -> str:
    """A model's name: its spec's, or its config file's without the extension (llama-3.1-8b stays whole)."""
    p = Path(model)
    return p.name[: -len(p.suffix)] if p.suffix in (".json", ".yaml") else p.name


def _key(r):
    return (_name(r.model), r.engine, r.par.get("tp"), r.amount, r.prompt, r.output)


def pairs():
    """[(A100 row, H100 row)] of static batches with the same configuration."""
    h100 = {}
    for role in ("fit", "validation"):
        for r in cc.check_rows(role):
            if r.load == "batch" and Path(r.hardware).stem == "h100-sxm":
                h100[_key(r)] = r
    a100 = [r for r in cc.check_rows("test") if r.load == "batch"]
    return [(a, h100[_key(a)]) for a in a100 if _key(a) in h100]


def main():
    ps = pairs()
    rows = [r for p in ps for r in p]
    pred = cc.predictions(rows, load_calibration(cc.DEFAULT_FILE))
    by_model = defaultdict(lambda: defaultdict(list))
    for k, (a, h) in enumerate(ps):
        # Rows carry throughput = B * OSL / e2e, so e2e(A100) / e2e(H100) = thr(H100) / thr(A100).
        measured = h.value / a.value
        for stack in cc.STACKS:
            predicted = pred[stack][2 * k + 1] / pred[stack][2 * k]
            err = predicted / measured - 1.0
            by_model[stack][_name(a.model)].append(err)
            by_model[stack]["all"].append(err)
    print(f"A100 / H100 end-to-end latency ratio, {len(ps)} pairs of static batches "
          "(median |error| / median signed error of predicted / measured ratio - 1)")
    for stack in cc.STACKS:
        print(f"  {stack} stack")
        for name, e in sorted(by_model[stack].items(), key=lambda kv: kv[0] == "all"):
            e = np.asarray(e)
            print(f"    {name:20s} {100 * np.median(np.abs(e)):6.1f}% {100 * np.median(e):+7.1f}%  n={len(e)}")


if __name__ == "__main__":
    main()
