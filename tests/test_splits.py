"""The inference test split (data/measured/inference_split.yaml) loads, holds
the A100 out whole, and bad split files give one-line errors naming the file
and the row or rule (issue 37, "Bad input")."""

import pytest

from jaxplat.design.splits import INFERENCE_CSV, assign_split, load_inference_split, read_csv_rows, row_keys
from jaxplat.specs import SpecError


def test_shipped_split_holds_the_a100_out():
    rows, roles = load_inference_split()
    assert len(rows) == 4416
    a100 = {ro for r, ro in zip(rows, roles) if r["load_kind"] == "static_batch" and r["chip"] == "A100"}
    assert a100 == {"test"}
    assert {"fit", "validation", "test"} == set(roles)


def test_keys_are_unique_with_repeat_index():
    keys = row_keys(read_csv_rows(INFERENCE_CSV))
    assert len(set(keys)) == len(keys) == 4416


def _rows():
    return [{"source": "s", "model": "m", "chip": "c", "engine": "e", "chips": "1", "tp": "1", "isl": "128",
             "osl": "128", "concurrency_or_batch": "1", "metric": "x", "load_kind": "kernel"}] * 2


def test_repeated_rows_get_an_index_and_rows_override_rules():
    spec = {"rules": [{"split": "validation", "where": {"chip": "c"}}],
            "rows": {"test": ["s | m | c | e | 1 | 1 | 128 | 128 | 1 | x #2"]}}
    assert assign_split(_rows(), spec, "f.yaml") == ["validation", "test"]


def test_unknown_row_names_file_and_row():
    spec = {"rows": {"test": ["s | m | c | e | 1 | 1 | 128 | 128 | 1 | y"]}}
    with pytest.raises(SpecError) as e:
        assign_split(_rows(), spec, "f.yaml")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("f.yaml: rows.test: row 's | m | c | e") and "not in the data" in msg


def test_rule_matching_nothing_and_bad_role_and_column():
    with pytest.raises(SpecError, match=r"^f.yaml: rules\[0\] .* matches no row"):
        assign_split(_rows(), {"rules": [{"split": "test", "where": {"chip": "A100"}}]}, "f.yaml")
    with pytest.raises(SpecError, match=r"^f.yaml: rules\[0\]: split 'held' unknown \(allowed: fit, validation, test\)"):
        assign_split(_rows(), {"rules": [{"split": "held", "where": {"chip": "c"}}]}, "f.yaml")
    with pytest.raises(SpecError, match=r"^f.yaml: rules\[0\].where: column 'gpu' not in the data"):
        assign_split(_rows(), {"rules": [{"split": "test", "where": {"gpu": "c"}}]}, "f.yaml")


def test_split_file_with_a_row_the_data_lacks(tmp_path):
    bad = tmp_path / "split.yaml"
    bad.write_text('rows:\n  test:\n    - "nope | m | c | e | 1 | 1 |  |  |  | x"\n')
    with pytest.raises(SpecError, match=r"split.yaml: rows.test: row 'nope \| m"):
        load_inference_split(bad)
