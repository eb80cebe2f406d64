"""Sweep speed of a training study (issue 38): configurations/s of
`jaxplat sweep specs/studies/training-llama405b-16k.yaml` (1,382,400 ways to
train Llama-3.1-405B on up to 16,384 H100s), measured as the inference bench
measures its studies (experiments/bench_sweep.py: compile time, XLA temp
buffers, the engine's configurations/s over a timed run after a warm-up
step, CPU time, and a plain Python loop over the per-configuration function
for comparison). Any other study: --study FILE; the other flags are
bench_sweep.py's.

    .venv/bin/python experiments/training/bench_sweep.py [--seconds 20] [--block N] [--devices N]

The last line is `configs/s: N`.
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "experiments"))

import bench_sweep

STUDY = ROOT / "specs" / "studies" / "training-llama405b-16k.yaml"

if __name__ == "__main__":
    if "--study" not in sys.argv:
        sys.argv[1:1] = ["--study", str(STUDY)]
    bench_sweep.main()
