"""experiments/heldout_check.py --pair A/B: chip A's per-chip throughput over
chip B's on each benchmark both ran, measured and predicted, whichever order
`measured.chip_ratio_errors` names the two chips in."""

import csv
from pathlib import Path

import pytest
from helpers import import_script

from jaxplat.design.measured import REQUIRED, chip_ratio_errors, read_rows

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"


@pytest.fixture(scope="module")
def hc():
    return import_script(EXPERIMENTS, "heldout_check")


def test_pair_ratios_by_hand(hc, tmp_path):
    # One benchmark (Llama-3.1-8B, 1024/64 on one page): B200 TP2 2400 tok/s (1200 per chip), GB200 TP1
    # 1500; predicted 2000 (1000 per chip) and 1600. GB200 / B200: measured 1500 / 1200 = 1.25, predicted
    # 1600 / 1000 = 1.6; the H100 row ran another benchmark (other lengths) and pairs with nothing.
    row = {"model": "llama-3.1-8b", "tp": 1, "pp": 1, "ep": 1, "moe_ep": 1, "dp": 1, "dtype": "fp8",
           "prompt": 1024, "output": 64, "batch": "", "concurrency": "", "rate": "", "offline": 1,
           "metric": "throughput_tok_s", "source": "page"}
    rows = [{**row, "hardware": "b200", "tp": 2, "value": 2400}, {**row, "hardware": "gb200", "value": 1500},
            {**row, "hardware": "h100-sxm", "output": 128, "value": 900}]
    path = tmp_path / "rows.csv"
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, list(REQUIRED) + ["source"], extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    pairs = chip_ratio_errors([2000.0, 1600.0, 1000.0], read_rows(path), "page")
    (bench, measured, predicted), = hc.pair_ratios(pairs, "gb200", "b200")
    assert bench == "llama-3.1-8b page 1024/64"
    assert (measured, predicted) == pytest.approx((1.25, 1.6))
    (_, measured, predicted), = hc.pair_ratios(pairs, "b200", "gb200")
    assert (measured, predicted) == pytest.approx((0.8, 0.625))
    assert hc.pair_ratios(pairs, "gb200", "h100-sxm") == []
