"""Training co-design against its grid oracle (issue 38 item 5): for each
co-design study with a training objective, the gradient search's best chip
(`jaxplat.design.codesign.codesign`, the study's starts and steps) and the
dense exact-mode grid over the same box (`codesign.grid_search`, the study's
grid points), the gap between them and the evaluations each took: what
`jaxplat codesign STUDY` prints on its "grid:" line, without the chip file,
plot and sensitivities.

    .venv/bin/python experiments/training/codesign_oracle.py
    .venv/bin/python experiments/training/codesign_oracle.py specs/studies/codesign-training-llama405b.yaml

The bar (issue 38): the optimizer within 1% of the grid's best.
"""

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from jaxplat.cli.codesign import OBJECTIVE_UNITS  # noqa: E402
from jaxplat.design import codesign as cd  # noqa: E402
from jaxplat.design import codesign_train as ct  # noqa: E402
from jaxplat.design.codesign_study import problem_from_dict  # noqa: E402
from jaxplat.specs import read_yaml  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("studies", nargs="*", help="co-design study YAMLs (default: specs/studies/codesign-training-*.yaml)")
    args = ap.parse_args(argv)
    paths = args.studies or sorted(str(p) for p in (ROOT / "specs/studies").glob("codesign-training-*.yaml"))
    worst = 0.0
    for path in paths:
        prob, cfg = problem_from_dict(read_yaml(path), src=path)
        t0 = time.time()
        res = cd.codesign(prob, starts=cfg["starts"], steps=cfg["steps"], seed=cfg["seed"])
        t_opt = time.time() - t0
        t0 = time.time()
        x, c, obj, n = cd.grid_search(prob, cfg["grid"], progress=False)
        t_grid = time.time() - t0
        gap = (res.objective - obj) / obj
        worst = max(worst, gap)
        unit = OBJECTIVE_UNITS[prob.objective]
        way = ct.describe(prob.cand, res.candidate) if prob.task == "train" else {}
        print(f"{Path(path).stem}: {prob.objective} ({unit})")
        print(f"  optimizer {res.objective:.6g} with {res.evaluations:,} evaluations ({t_opt:.0f} s): "
              f"{x_text(res.x)}; {way_text(way)}")
        print(f"  grid      {obj:.6g} with {n:,} evaluations ({t_grid:.0f} s): {x_text(x)}; "
              f"{way_text(ct.describe(prob.cand, c)) if prob.task == 'train' else ''}")
        print(f"  gap {gap * 100:+.3f}% (negative: optimizer better); bar +1%: {'met' if gap <= 0.01 else 'MISSED'}")
    return 0 if worst <= 0.01 else 1


def x_text(x) -> str:
    """FLOP/s, SRAM, stacks, link of a design x (chip space) with units."""
    return (f"{x[0] / 1e12:.4g} TFLOP/s bf16, SRAM {x[1] / 1e6:.3g} MB, {x[2]:g} HBM stacks, "
            f"link {x[3] / 1e9:.4g} GB/s")


def way_text(w: dict) -> str:
    if not w:
        return ""
    return (f"{w['chips']:g} chips, tp {w['tp']:g} pp {w['pp']:g} vp {w['vp']:g} cp {w['cp']:g} dp {w['dp']:g}, "
            f"recompute {w['recompute']}, ZeRO {w['zero']:g}")


if __name__ == "__main__":
    sys.exit(main())
