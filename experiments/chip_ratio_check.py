"""The A100 against the H100 on the same static batches, per model (issue 37's
"per-chip ratios between chips", for a chip no calibration saw).

`calibration_check.py --test` reports the ratio over all pairs (its category
"A100 / H100 static batch e2e ratio", which the shipped file records and
tests/test_calibration_guard.py checks); this prints it per model. Each A100
static batch of data/measured/inference_2026-12.csv (test rows) is paired with
the H100 row of the same model, engine, tensor-parallel degree, batch and
lengths (fit or validation rows), and the predicted ratio of their end-to-end
latencies, e2e(A100) / e2e(H100), is compared with the measured one: error =
predicted ratio / measured ratio - 1, on the calibration's own stack and on
the default graph-captured one. A stack's fixed time per step that both chips
pay cancels in part, so a ratio can hold where the absolute latency does not.

    .venv/bin/python experiments/chip_ratio_check.py   # about 30 s on 2 cores
"""

import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import calibration_check as cc  # noqa: E402

from jaxplat.model import load_calibration  # noqa: E402


def main():
    a100 = [r for r in cc.check_rows("test") if r.load == "batch"]
    pairs = [(a, h) for a, h in zip(a100, cc.ratio_partners(a100)) if h is not None]
    pred = cc.predictions([r for p in pairs for r in p], load_calibration(cc.DEFAULT_FILE))
    errs = defaultdict(lambda: defaultdict(list))
    for k, (a, h) in enumerate(pairs):
        for stack in cc.STACKS:
            err = cc.ratio_error(a, h, pred[stack][2 * k], pred[stack][2 * k + 1])
            errs[stack][cc.model_name(a.model)].append(err)
            errs[stack]["all"].append(err)
    print(f"A100 / H100 end-to-end latency ratio, {len(pairs)} pairs of static batches "
          "(median |error| / median signed error of predicted / measured ratio - 1)")
    for stack in cc.STACKS:
        print(f"  {stack} stack")
        for name, e in sorted(errs[stack].items(), key=lambda kv: kv[0] == "all"):
            e = np.asarray(e)
            print(f"    {name:20s} {100 * np.median(np.abs(e)):6.1f}% {100 * np.median(e):+7.1f}%  n={len(e)}")


if __name__ == "__main__":
    main()
