"""The shipped calibration's error on its declared held-out rows stays what its
report says (issue 39 item 6).

specs/calibration/default.yaml records, under `fit.validation` and `fit.test`
(and in its header), the median |error| and median signed error of its
predictions on the validation and test rows of
data/measured/inference_2026-12.csv (split: data/measured/inference_split.yaml),
per stack and kind of row, as experiments/calibration_check.py --test --write
computed them once the fit was frozen. Here they are computed again from the
shipped file and today's model (no fit: one vmapped program per model and
load) and must agree within 1 percentage point, with the same row counts. A
change to the cost model or to the file that moves a headline figure fails
here until the report is regenerated. Checked: with `compute` 10% higher in a
temporary copy of the file (parameters.compute x 1.1) the comparison finds 5
mismatches (validation, own stack: static batch e2e signed +3.1% against the
recorded -0.4%, MI300X signed -6.5% against -11.5%, closed-loop TTFT 7.9% /
+5.7% against 11.4% / +11.4%; default stack TTFT signed -0.6% against +7.4%).
About 16 s on 2 cores (3 programs compiled: one per model structure and load; no fit).
"""

from pathlib import Path

import pytest
import yaml
from helpers import import_script

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "specs/calibration/default.yaml"
ROLES = ("validation", "test")
TOLERANCE = 0.01  # one percentage point


@pytest.fixture(scope="module")
def check():
    return import_script(ROOT / "experiments", "calibration_check")


def mismatches(recorded: dict, got: dict) -> list[str]:
    """What differs between two {role: {stack: {category: {n, median_abs, median_signed}}}}."""
    out = []
    for role, stacks in recorded.items():
        for stack, cats in stacks.items():
            for cat, want in cats.items():
                have = got.get(role, {}).get(stack, {}).get(cat)
                where = f"{role} / {stack} / {cat}"
                if have is None or have["n"] != want["n"]:
                    out.append(f"{where}: rows {have and have['n']} vs {want['n']} recorded")
                    continue
                for k in ("median_abs", "median_signed"):
                    if abs(have[k] - want[k]) > TOLERANCE:
                        out.append(f"{where}: {k} {100 * have[k]:+.1f}% vs {100 * want[k]:+.1f}% recorded")
    return out


def test_shipped_calibration_error_on_its_held_out_rows_is_what_its_report_says(check):
    fit = yaml.safe_load(SHIPPED.read_text())["fit"]
    recorded = {role: fit[role] for role in ROLES}
    assert all(recorded[r]["own"] and recorded[r]["default"] for r in ROLES)
    got = check.figures(ROLES, SHIPPED)
    assert mismatches(recorded, got) == []


def test_a_new_round_replaces_the_figures_in_place(check, tmp_path):
    """`calibration_check.py --write --replace` swaps the figures a file holds (header lines and
    `fit.<role>`) for a new round: written back with the figures it holds, the shipped file comes out
    byte for byte the same; without --replace the write is refused."""
    copy = tmp_path / "default.yaml"
    copy.write_text(SHIPPED.read_text())
    fit = yaml.safe_load(SHIPPED.read_text())["fit"]
    held = {role: fit[role] for role in ROLES}
    with pytest.raises(SystemExit, match="already holds figures"):
        check.write(copy, held)
    check.write(copy, held, replace=True)
    assert copy.read_text() == SHIPPED.read_text()
    moved = {role: {s: {c: dict(v, median_abs=v["median_abs"] + 0.05) for c, v in cats.items()}
                    for s, cats in held[role].items()} for role in ROLES}
    check.write(copy, moved, replace=True)
    new, old = yaml.safe_load(copy.read_text()), yaml.safe_load(SHIPPED.read_text())
    assert new["fit"]["test"] == moved["test"] and new["fit"]["validation"] == moved["validation"]
    assert {k: v for k, v in new["fit"].items() if k not in ROLES} == {k: v for k, v in old["fit"].items()
                                                                      if k not in ROLES}
    assert all(new[k] == old[k] for k in old if k != "fit")
    assert copy.read_text().count("#  test rows (") == 1


def test_a_variant_s_figures_are_never_written(check, capsys):
    """`--gemm-overlap` predicts the rows under a modelling variant (Options.gemm_overlap); its figures
    are not the shipped model's, so `--write` with it is refused before anything runs."""
    with pytest.raises(SystemExit) as exit_:
        check.main(["--write", "--replace", "--gemm-overlap", "3"])
    assert exit_.value.code == 2 and "not with --gemm-overlap" in capsys.readouterr().err
