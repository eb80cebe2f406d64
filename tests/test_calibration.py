"""Calibration: measured rows validated with one-line errors, and the fit
recovering parameters that generated synthetic measurements."""

import csv
import functools

import jax
import numpy as np
import pytest
import yaml

import jaxplat as jp
from jaxplat.cli.app import main
from jaxplat.design.calibration import Predictor, fit, huber_log, predict_one
from jaxplat.design.measured import REQUIRED, read_rows
from jaxplat.model import load_calibration, load_software, replace, select_calibration, workload_from_dict
from jaxplat.serving import serving
from jaxplat.specs import SpecError

# The measured rows run on the software stack the shipped calibration's fixed
# costs were fitted with (its `software:`); synthetic rows are made on it too.
FITTED = load_software("fitted-2026-12")

ROW = {"model": "llama-3.1-8b", "hardware": "h100-sxm", "tp": 1, "pp": 1, "ep": 1, "moe_ep": 1, "dp": 1,
       "dtype": "fp8", "prompt": 1024, "output": 64, "batch": 4, "concurrency": "", "rate": "", "offline": "",
       "metric": "tpot_s", "value": 0.01}


def _write(path, rows, columns=None):
    columns = columns or list(REQUIRED)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, columns, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    return path


@pytest.mark.parametrize("change, message", [
    ({"model": "llama-9b"}, r"rows.csv: row 3: column model: unknown model 'llama-9b'"),
    ({"hardware": "h900"}, r"rows.csv: row 3: column hardware: unknown hardware 'h900'"),
    ({"value": -2.0}, r"rows.csv: row 3: column value: must be > 0, got -2.0"),
    ({"prompt": "many"}, r"rows.csv: row 3: column prompt: not a number: 'many'"),
    ({"rate": 3.0}, r"rows.csv: row 3: columns batch, concurrency, rate, offline: exactly one must be set"),
    ({"metric": "e2e_s"}, r"rows.csv: row 3: column metric: 'e2e_s' unknown"),
])
def test_bad_rows_name_file_row_and_column(tmp_path, change, message):
    path = _write(tmp_path / "rows.csv", [ROW, {**ROW, **change}])
    with pytest.raises(SpecError, match=message):
        read_rows(path)


def test_missing_column_is_named(tmp_path):
    path = _write(tmp_path / "rows.csv", [ROW], [c for c in REQUIRED if c != "dtype"])
    with pytest.raises(SpecError, match=r"rows.csv: row 1: missing column 'dtype'"):
        read_rows(path)


def test_huber_on_log_ratio():
    # quadratic inside 10%, linear beyond, and the same for over- and under-prediction
    meas = np.ones(2)
    small, d_small = huber_log(np.array([np.exp(0.05), np.exp(-0.05)]), meas, np.ones(2))
    big, _ = huber_log(np.array([np.exp(1.0), np.exp(-1.0)]), meas, np.ones(2))
    assert small == pytest.approx(0.5 * 0.05 ** 2) and big == pytest.approx(0.1 * (1.0 - 0.05))
    np.testing.assert_allclose(d_small, [0.05 / np.exp(0.05) / 2, -0.05 / np.exp(-0.05) / 2], rtol=1e-6)


@jax.jit
def _predict(model, hw, wl, b):
    """(throughput, TTFT, TPOT) of a static batch of b on one chip: one program for every synthetic row of
    a model kind (the model, chip and workload are arguments, not constants of the program)."""
    return predict_one(model, hw, jp.Parallel(), wl, serving(), "batch", b)


def test_fit_recovers_the_parameters_that_made_the_data(tmp_path):
    # Synthetic measurements from known efficiencies (compute 0.55, memory
    # 0.9) on compute-bound prefills and memory-bound decodes of two chips;
    # the fit starts from the shipped values and must find them again. No
    # row has a collective, so `network` is fitted too and must come out
    # weakly identified (the loss does not see it), the other two pinned.
    truth = {"eff_compute": 0.55, "eff_memory": 0.9}
    model = jp.load_model("llama-3.1-8b")
    rows = []
    predict = functools.partial(_predict, model)
    for chip in ("h100-sxm", "a100-80gb"):
        hw = replace(jp.load_hardware(chip, software=FITTED), **truth)
        for prompt, batch in ((2048, 1), (256, 32), (128, 1)):
            wl = workload_from_dict({"batch": 1, "prompt": prompt, "output": 32, "dtype": "bf16"})
            thr, ttft, tpot = (float(x) for x in predict(hw, wl, float(batch)))
            for metric, value in (("ttft_s", ttft), ("tpot_s", tpot)):
                rows.append({**ROW, "hardware": chip, "dtype": "bf16", "prompt": prompt, "output": 32,
                             "batch": batch, "metric": metric, "value": value})
    path = _write(tmp_path / "synthetic.csv", rows)
    out = tmp_path / "cal.yaml"
    assert main(["calibrate", str(path), "--out", str(out), "--fit", "compute", "memory", "network",
                 "--steps", "30"]) == 0
    doc = yaml.safe_load(out.read_text())
    # each chip's rows alone were made by the same values: the fit that left
    # the other chip out finds them too, to 3% from 6 rows (one model: no
    # leave-one-model-out)
    without = doc["fit"]["leave_one_hardware_out_values"]
    assert sorted(without) == ["a100-80gb", "h100-sxm"] and "leave_one_model_out_values" not in doc["fit"]
    for chip in without:
        assert without[chip]["compute"] == pytest.approx(0.55, rel=3e-2)
        assert without[chip]["memory"] == pytest.approx(0.9, rel=3e-2)
    ident = doc["fit"]["identification"]
    assert ident["network"] == 0.0 and min(ident["compute"], ident["memory"]) > 1.0
    assert "network weakly identified (x1.2 or /1.2: loss +0%)" in out.read_text()
    assert doc["parameters"]["compute"] == pytest.approx(0.55, rel=1e-2)
    assert doc["parameters"]["memory"] == pytest.approx(0.9, rel=1e-2)
    assert doc["fit"]["fit"]["all"]["median_abs"] < 1e-3
    # the file is a calibration estimate/sweep/codesign accept
    hw = jp.load_hardware("h100-sxm", load_calibration(out))
    assert float(hw.eff_compute) == pytest.approx(0.55, rel=1e-2)


def test_starts_flag_what_only_a_product_reaches(tmp_path, capsys):
    # FP8 prefills of Llama-3.1-8B are compute-bound GEMMs at compute x narrow_dtype of the fp8 peak
    # (attention in fp8 too; the 16-bit head only sees the last token), so TTFT rows pin that product
    # and not its factors; memory-bound batch-1 decodes pin `memory`. Made with compute 0.5 and
    # narrow_dtype 0.6: fits from other starts reach the same loss with other splits of 0.3, and
    # `--starts` says so, while the local check (x1.2 moves one value alone) calls both pinned.
    truth = {"eff_compute": 0.5, "eff_narrow": 0.6, "eff_memory": 0.85}
    model = jp.load_model("llama-3.1-8b")
    hw = replace(jp.load_hardware("h100-sxm", software=FITTED), **truth)
    predict = functools.partial(_predict, model, hw)
    rows = []
    for prompt, batch in ((4096, 1), (2048, 4), (1024, 8)):
        wl = workload_from_dict({"batch": 1, "prompt": prompt, "output": 16, "dtype": "fp8"})
        _, ttft, tpot = (float(x) for x in predict(wl, float(batch)))
        rows.append({**ROW, "dtype": "fp8", "prompt": prompt, "output": 16, "batch": batch, "metric": "ttft_s",
                     "value": ttft})
        if batch == 1:
            rows.append({**ROW, "dtype": "fp8", "prompt": prompt, "output": 16, "batch": batch,
                         "metric": "tpot_s", "value": tpot})
    path = _write(tmp_path / "product.csv", rows)
    out = tmp_path / "cal.yaml"
    assert main(["calibrate", str(path), "--out", str(out), "--fit", "compute", "narrow_dtype", "memory",
                 "--steps", "40", "--no-holdout", "--starts", "6"]) == 0
    doc, text = yaml.safe_load(out.read_text()), out.read_text()
    assert len(doc["fit"]["starts"]) == 6
    # the starts that fit the rows (loss within the `unpinned` criterion of the best: a start drawn near
    # two bounds may end pressed against them, compute 0.90 and narrow_dtype 0.30 at 7000x the loss,
    # with the 2026-12-04 calibration's other values), each through the same product and memory
    from jaxplat.design.calibration import STARTS_FLOOR, STARTS_LOSS
    best = min(s["loss"] for s in doc["fit"]["starts"])
    starts = [s for s in doc["fit"]["starts"] if s["loss"] <= best * (1 + STARTS_LOSS) + STARTS_FLOOR]
    assert len(starts) >= 3
    for s in starts:
        assert s["values"]["compute"] * s["values"]["narrow_dtype"] == pytest.approx(0.3, rel=2e-2)
        assert s["values"]["memory"] == pytest.approx(0.85, rel=3e-2)
    computes = [s["values"]["compute"] for s in starts]
    assert max(computes) > 1.5 * min(computes)
    assert "compute not pinned (" in text and "narrow_dtype not pinned (" in text
    assert "memory not pinned" not in text
    assert min(doc["fit"]["identification"][n] for n in ("compute", "narrow_dtype")) > 0.01
    capsys.readouterr()
    assert main(["calibrate", str(path), "--fit", "compute", "--starts", "0"]) == 2
    assert capsys.readouterr().err.strip() == "jaxplat: error: --starts is a number of fits, at least 1, got 0"


def _engine_rows(engines: dict, shapes) -> list:
    """Synthetic measured rows: TTFT and TPOT of Llama-3.1-8B on an H100 at
    each (prompt, static batch) in `shapes`, for each engine {name: the
    Hardware fields it runs with}."""
    predict = functools.partial(_predict, jp.load_model("llama-3.1-8b"))
    rows = []
    for engine, fields in engines.items():
        hw = replace(jp.load_hardware("h100-sxm", software=FITTED), **fields)
        for prompt, batch in shapes:
            wl = workload_from_dict({"batch": 1, "prompt": prompt, "output": 32, "dtype": "bf16"})
            thr, ttft, tpot = (float(x) for x in predict(hw, wl, float(batch)))
            for metric, value in (("ttft_s", ttft), ("tpot_s", tpot)):
                rows.append({**ROW, "dtype": "bf16", "prompt": prompt, "output": 32, "batch": batch,
                             "metric": metric, "value": value, "engine": engine})
    return rows


def test_an_engine_gets_its_own_values_where_asked(tmp_path, capsys):
    # Synthetic rows of engines on one chip: "ref" ran at compute 0.55,
    # "young" (a less tuned release) at 0.5 x that, "amd" (other kernels) at
    # 0.8 x, and "young+amd" (that release on those kernels) at both:
    # 0.55 x 0.5 x 0.8 = 0.22; memory 0.9 for all. Fitting compute per engine
    # for "young" and "amd" finds both factors, the file keeps each engine's
    # value apart, and --engine selects one or their product.
    engines = {"ref": {"eff_compute": 0.55, "eff_memory": 0.9}, "young": {"eff_compute": 0.275, "eff_memory": 0.9},
               "amd": {"eff_compute": 0.44, "eff_memory": 0.9}, "young+amd": {"eff_compute": 0.22, "eff_memory": 0.9}}
    rows = _engine_rows(engines, ((2048, 1), (256, 32), (128, 1)))
    path = _write(tmp_path / "engines.csv", rows, list(REQUIRED) + ["engine"])
    out = tmp_path / "cal.yaml"
    assert main(["calibrate", str(path), "--out", str(out), "--fit", "compute", "memory", "--engine-fit", "compute",
                 "--engines", "young", "amd", "--no-holdout", "--steps", "30"]) == 0
    doc = yaml.safe_load(out.read_text())
    assert doc["parameters"]["compute"] == pytest.approx(0.55, rel=1e-2)
    assert doc["engines"]["young"]["compute"] == pytest.approx(0.275, rel=1e-2)
    assert doc["engines"]["amd"]["compute"] == pytest.approx(0.44, rel=1e-2)
    assert doc["fit"]["fit"]["all"]["median_abs"] < 1e-3
    for engine, value in (("young", 0.275), ("young+amd", 0.22), (None, 0.55)):
        assert float(jp.load_hardware("h100-sxm", select_calibration(out, engine)).eff_compute) == \
            pytest.approx(value, rel=1e-2), engine
    with pytest.raises(SpecError, match=r"--engine old: .*cal.yaml has no values for it; engines there: amd, young"):
        select_calibration(out, "young+old")
    capsys.readouterr()
    assert main(["calibrate", str(path), "--fit", "compute", "--engine-fit", "compute", "--engines", "nope"]) == 2
    assert capsys.readouterr().err.strip() == (f"jaxplat: error: --engines nope: no row of {path} has that engine; "
                                               "engines there: amd, ref, young")


def test_an_engines_fixed_time_may_be_far_above_the_references(tmp_path):
    # "young" pays 3 ms per iteration (a host-side scheduler), 67x the
    # reference's 45 us: beyond the 1.5x an efficiency factor may take, inside
    # the time factors' bounds. Decode steps at batch 1 and 8 (TPOT) and a
    # short prefill (TTFT) of each engine; fitting iteration_overhead per
    # engine finds 3 ms, the reference keeps 45 us.
    rows = _engine_rows({"ref": {"iteration_overhead": 45e-6}, "young": {"iteration_overhead": 3e-3}},
                        ((256, 1), (256, 8), (1024, 1)))
    path = _write(tmp_path / "overhead.csv", rows, list(REQUIRED) + ["engine"])
    out = tmp_path / "cal.yaml"
    assert main(["calibrate", str(path), "--out", str(out), "--fit", "iteration_overhead", "--engine-fit",
                 "iteration_overhead", "--engines", "young", "--no-holdout", "--steps", "30"]) == 0
    doc = yaml.safe_load(out.read_text())
    assert doc["parameters"]["iteration_overhead"] == pytest.approx(45e-6, rel=0.1)
    assert doc["engines"]["young"]["iteration_overhead"] == pytest.approx(3e-3, rel=1e-2)
    # The fitted fixed cost is a software stack beside the file, which the file names: a run with
    # --calibration FILE prices the reference's 45 us per iteration, the stack's other keys those of
    # the stack the rows ran on (the shipped calibration's).
    from jaxplat.model import default_calibration, load_calibration, load_hardware, load_software
    assert doc["software"] == "cal-software.yaml" and (tmp_path / "cal-software.yaml").is_file()
    mine, ran_on = load_calibration(out), load_software(default_calibration().software)
    stack = load_software(mine.software)
    assert stack.values["iteration_overhead"] == doc["parameters"]["iteration_overhead"]
    assert {k: v for k, v in stack.values.items() if k != "iteration_overhead"} == \
        {k: v for k, v in ran_on.values.items() if k != "iteration_overhead"}
    hw = load_hardware("h100-sxm", mine)
    assert float(hw.software.iteration_overhead) == pytest.approx(doc["parameters"]["iteration_overhead"], rel=1e-6)


def test_shipped_defaults_are_a_fit_inside_the_physical_bounds():
    # specs/calibration/default.yaml is `jaxplat calibrate`'s output: every
    # parameter it fits lies inside the fit's bounds (a value outside them
    # was edited by hand), the header says how it was made, and a built-in
    # chip loads with those values.
    from jaxplat.design.calibration import BOUNDS, DEFAULT_FIT
    from jaxplat.model import default_calibration
    from jaxplat.specs import SPEC_ROOT
    cal = default_calibration()
    for name in DEFAULT_FIT:
        lo, hi = BOUNDS[name]
        assert lo <= cal.parameters[name] <= hi, name
    text = (SPEC_ROOT / "calibration" / "default.yaml").read_text()
    assert "jaxplat calibrate data/measured/calibration_rows" in text
    # held-out figures: leave-one-group-out refits, or (the 2026-12-04 refit, --no-holdout) the declared
    # validation and test rows of inference_split.yaml (tests/test_calibration_guard.py recomputes them)
    assert ("leave_one_hardware_out" in text and "leave_one_model_out" in text) or \
        ("  validation:" in text and "  test:" in text)
    hw = jp.load_hardware("h100-sxm")
    assert float(hw.eff_moe) == pytest.approx(cal.parameters["moe"], rel=1e-6)


def test_no_fit_can_leave_the_physical_range():
    # The fit's bounds are the physical maxima: however far z is pushed, the
    # value stays at or below them (HBM at 0.92 of its peak: refresh and page
    # switches), and a value in the top 1% of the log range is flagged.
    from jaxplat.design.calibration import BOUNDS, PHYSICAL_MAX, at_bound, from_z
    for name, top in PHYSICAL_MAX.items():
        assert BOUNDS[name][1] <= top, name
        assert float(from_z(name, 40.0)) <= top * (1 + 1e-6), name
    # memory 0.3..0.92: 1% of the log range below the top is 0.92 (0.3/0.92)^0.01 = 0.9097;
    # kernel_latency 1e-7..1e-4 s: 1% of its three decades above the bottom is 1e-7 x 10^0.03 = 1.07e-7 s.
    assert at_bound("memory", 0.915) and not at_bound("memory", 0.905)
    assert at_bound("kernel_latency", 1.05e-7) and not at_bound("kernel_latency", 1.1e-7)


def test_rows_with_an_assumed_input_count_up_to_one_factor_per_benchmark():
    # Two rows of one benchmark whose mean input is assumed (MLPerf), log
    # ratios +0.05 and -0.03, and one exact row at +0.02, weights 1. By hand:
    # the group's mean log ratio is 0.01, so its rows count as +0.04 and
    # -0.04; loss = (0.5 * 0.04^2 * 2 + 0.5 * 0.02^2) / 3 = 0.0006.
    # The plain loss (0.5 * (0.05^2 + 0.03^2 + 0.02^2)) / 3 = 0.000633 tells
    # the old behaviour (no groups) apart.
    meas = np.array([100.0, 200.0, 300.0])
    pred = meas * np.exp([0.05, -0.03, 0.02])
    groups = np.array([0, 0, -1])
    w = np.ones(3)
    loss, grad = huber_log(pred, meas, w, groups)
    assert loss == pytest.approx(0.0006, rel=1e-9)
    assert huber_log(pred, meas, w)[0] == pytest.approx(0.0038 / 6, rel=1e-9)
    # scaling the whole group (another input length) leaves the loss as is;
    # scaling the exact row does not
    assert huber_log(pred * np.array([1.7, 1.7, 1.0]), meas, w, groups)[0] == pytest.approx(loss, rel=1e-9)
    assert huber_log(pred * np.array([1.0, 1.0, 1.7]), meas, w, groups)[0] > 10 * loss
    # the derivative is the loss's: central finite differences in each prediction
    for i in range(3):
        step = np.zeros(3)
        step[i] = 1e-4 * pred[i]
        fd = (huber_log(pred + step, meas, w, groups)[0] - huber_log(pred - step, meas, w, groups)[0]) / (2 * step[i])
        assert grad[i] == pytest.approx(fd, rel=1e-5)
    # beyond HUBER_DELTA (linear part) too: ratios +0.5, -0.3 in the group
    pred2 = meas * np.exp([0.5, -0.3, 0.02])
    g2 = huber_log(pred2, meas, w, groups)[1]
    for i in range(3):
        step = np.zeros(3)
        step[i] = 1e-5 * pred2[i]
        fd = (huber_log(pred2 + step, meas, w, groups)[0] - huber_log(pred2 - step, meas, w, groups)[0]) / (2 * step[i])
        assert g2[i] == pytest.approx(fd, rel=1e-4)


def test_the_shipped_rows_with_an_assumed_input_are_the_mlperf_ones():
    # data/measured/convert.py notes MLPerf's mean inputs as assumed (OpenOrca
    # 512, the mixed Mixtral set 512, the 405B set 8000); the TensorRT-LLM
    # table and the dstack runs have exact lengths.
    from pathlib import Path

    from jaxplat.design.calibration import assumed_input_groups
    rows = read_rows(Path(__file__).parent.parent / "data" / "measured" / "calibration_rows.csv")
    g = assumed_input_groups(rows)
    for r, gi in zip(rows, g):
        assert (gi >= 0) == r.source.startswith("mlperf"), (r.line, r.source)
    # one group per model, load and metric, shared by every round and chip
    keys = {(r.model, r.load, r.metric) for r, gi in zip(rows, g) if gi >= 0}
    assert len(set(g[g >= 0])) == len(keys)
    offline_70b = {gi for r, gi in zip(rows, g) if r.model == "llama-2-70b" and r.load == "offline"}
    assert len(offline_70b) == 1
    # Every row on an AMD chip runs AMD's kernels (engine part "rocm"): its
    # MLPerf submissions (ROCm builds of vLLM) as "rocm", the dstack runs as
    # their release on it ("vllm-0.7+rocm"); no NVIDIA row has that part.
    for r in rows:
        assert ("rocm" in r.engine.split("+")) == r.hardware.startswith("mi"), (r.line, r.engine)
        if r.source.startswith("mlperf"):
            assert r.engine == ("rocm" if r.hardware.startswith("mi") else "trtllm"), (r.line, r.engine)


def test_estimate_runs_as_an_engine_of_the_shipped_calibration(capsys):
    # The shipped file gives engines that ran more than one model values of
    # their own (the ANL static batches' vLLM and TensorRT-LLM, the MI300X's
    # vLLM ROCm build) and AMD's ROCm kernels (`rocm`, the AMD chips'
    # software); --engine picks one (the reference engine otherwise), and a
    # name it lacks gets one line naming the ones it has.
    from jaxplat.model import default_calibration
    cal = default_calibration()
    assert set(cal.engines) == {"anl-vllm", "anl-trtllm", "anl-vllm-rocm", "rocm"}
    hw = jp.load_hardware("h100-sxm", select_calibration(None, "anl-vllm"))
    assert float(hw.eff_compute) == pytest.approx(cal.engines["anl-vllm"]["compute"], rel=1e-6)
    assert float(jp.load_hardware("h100-sxm").eff_compute) == pytest.approx(cal.parameters["compute"], rel=1e-6)
    assert float(jp.load_hardware("mi300x").eff_compute) == pytest.approx(cal.engines["rocm"]["compute"], rel=1e-6)
    assert main(["estimate", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--engine", "vllm"]) == 2
    err = capsys.readouterr().err.strip()
    # the stacks of specs/software are named too (--engine also picks a software stack)
    assert err.startswith("jaxplat: error: --engine vllm: not a software stack (specs/software: ") and err.endswith(
        "has no values for it; engines there: anl-trtllm, anl-vllm, anl-vllm-rocm, rocm (parts join with +)")


def test_a_chips_software_applies_once_however_the_engine_is_named(tmp_path):
    # AMD chips declare `software: rocm`: every engine on them, the reference
    # included, runs at the rocm part's share of the global values (0.4 / 0.8
    # here); a row that names the part itself ("young+rocm") gets it once.
    from jaxplat.design.calibration import Predictor
    from jaxplat.model import calibration_from_dict, hardware_from_dict
    from jaxplat.specs import SPEC_ROOT

    cal = calibration_from_dict({"parameters": {"compute": 0.8, "memory": 0.9},
                                 "engines": {"rocm": {"compute": 0.4}, "young": {"compute": 0.2}}})

    def compute(chip, engine=None):
        return float(jp.load_hardware(chip, cal.for_engine(engine)).eff_compute)

    assert compute("h100-sxm") == pytest.approx(0.8)   # no software part
    assert compute("mi300x") == pytest.approx(0.4)     # the reference engine on ROCm
    assert compute("mi300x", "young") == pytest.approx(0.2 * 0.4 / 0.8)
    assert compute("mi300x", "young+rocm") == compute("mi300x", "rocm+young") == compute("mi300x", "young")
    assert compute("h100-sxm", "young") == pytest.approx(0.2)
    # The fit sees the same parts: a row on an AMD chip runs rocm whatever its engine column says.
    rows = read_rows(_write(tmp_path / "r.csv", [{**ROW, "hardware": "mi300x", "engine": ""},
                                                 {**ROW, "hardware": "mi300x", "engine": "young+rocm"},
                                                 {**ROW, "engine": "young"}], list(REQUIRED) + ["engine"]))
    assert [Predictor.parts(r) for r in rows] == [("rocm",), ("young", "rocm"), ("young",)]
    spec = yaml.safe_load((SPEC_ROOT / "hardware" / "mi300x.yaml").read_text())
    with pytest.raises(SpecError, match=r"^x.yaml: software must be one engine part's name \(e.g. rocm\), got 'a\+b'$"):
        hardware_from_dict({**spec, "software": "a+b"}, src="x.yaml", calibration=cal)


def test_fit_finds_the_host_time_from_below(tmp_path):
    # Offline max-load rows of Llama-3.1-8B on one H100 made by the model
    # with 60 us of host time per sequence (the host paces the 128/128 rows,
    # the GPU the 2048/2048 ones). Started at 2 us, where every row's GPU
    # step is longer and the loss has no gradient in it, the fit's scan over
    # the bounds finds the basin and descends to 60 us. (One Predictor makes
    # the rows and fits them: a second compile would double the test's time.)
    truth = 60e-6
    rows = [{**ROW, "prompt": prompt, "output": output, "batch": "", "offline": 1, "max_batch": 512,
             "metric": "throughput_tok_s", "value": 1.0} for prompt, output in ((128, 128), (128, 512), (2048, 2048))]
    pred = Predictor(read_rows(_write(tmp_path / "host.csv", rows, list(REQUIRED) + ["max_batch"])),
                     names=("sequence_overhead",))
    pred.measured = np.asarray(pred.predict(pred.z0({"sequence_overhead": truth})), np.float64)
    assert float(np.asarray(pred.predict(pred.z0({"sequence_overhead": 2e-6})))[0]) > 1.3 * pred.measured[0]
    values, loss, _ = fit(pred, steps=10, start={"sequence_overhead": 2e-6})
    assert values["sequence_overhead"] == pytest.approx(truth, rel=1e-2) and loss < 1e-5


def test_chip_ratios_pair_chips_on_the_same_benchmark(tmp_path):
    # Per-chip offline throughput: H100 TP2 measured 2000 tok/s (1000 per chip), H200 TP1 1500;
    # predicted 2400 (1200 per chip) and 1200. Measured ratio 1000 / 1500 = 0.667, predicted
    # 1200 / 1200 = 1, error +50%. A row with other lengths is another benchmark, and a row of
    # another source is not read.
    from jaxplat.design.measured import chip_ratio_errors
    off = {**ROW, "batch": "", "offline": 1, "metric": "throughput_tok_s", "source": "page"}
    rows = [{**off, "tp": 2, "value": 2000}, {**off, "hardware": "h200-sxm", "value": 1500},
            {**off, "hardware": "h200-sxm", "prompt": 128, "value": 900},
            {**off, "hardware": "b200", "value": 4000, "source": "other"}]
    parsed = read_rows(_write(tmp_path / "rows.csv", rows, list(REQUIRED) + ["source"]))
    (pair,) = chip_ratio_errors([2400.0, 1200.0, 1000.0, 5000.0], parsed, "page")
    assert (pair.benchmark, pair.chips) == ("llama-3.1-8b page 1024/64", "h100-sxm/h200-sxm")
    assert (pair.measured, pair.predicted, pair.error) == pytest.approx((2 / 3, 1.0, 0.5))
