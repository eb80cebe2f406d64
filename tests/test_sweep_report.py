"""`jaxplat sweep` as a user reads it (issue 16): an interrupted sweep ends
its progress bar's line, leaves no temporary state and says where it resumed;
top-k and Pareto rows that differ only in axes that change no metric are one
row with the axis shown as "any"; per-axis requirements state their
direction; `over_memory` counts every configuration. The command runs
in-process on one host device (`jaxplat.cli.main`)."""

import json

import numpy as np
import pandas as pd
import pytest
import yaml

from jaxplat import search
from jaxplat.cli import main

# Llama-3.1-8B serving the chatbot use case (TTFT 0.2 s, TPOT 10 ms) on
# H100-like chips. By hand:
# * prefill is 2 x 8.03e9 x 3000 = 4.8e13 FLOP: at 100 TFLOP/s x 0.7 that is
#   0.69 s (0.34 s at tp 2), over the 0.2 s SLO; at 1 PFLOP/s 0.07 s;
# * the weights are 16 GB (8 GB per chip at tp 2): a 5 GB HBM never fits
#   (over_memory), 80 and 160 GB always do, and the HBM size then changes no metric;
# * batch 1 holds one micro-batch: --microbatches 2 is clipped to 1 and
#   changes no metric.
# So 2 tp x 2 micro-batches x 2 HBM sizes (>= 80 GB) at 1 PFLOP/s = 8
# configurations meet every constraint: two distinct ones (tp 1, tp 2).
STUDY = {
    "name": "ux", "models": ["llama-3.1-8b"], "workloads": ["chatbot"], "hardware": "h100-sxm",
    "axes": {"tp": [1, 2], "microbatches": [1, 2], "hbm_size": [5.0e+9, 8.0e+10, 1.6e+11],
             "flops": [1.0e+14, 1.0e+15]},
    "constraints": {"ttft": "workload", "tpot": "workload"},
    "objective": {"maximize": "throughput_per_chip"}, "pareto": ["tpot", "throughput_per_chip"],
    "top_k": 24, "engine": {"block": 6, "blocks_per_step": 1},
    "price": "fixed",  # the H100's price at every point (technology pricing would make HBM size cost money)
}


@pytest.fixture(scope="module")
def interrupted(tmp_path_factory):
    """A sweep interrupted while writing its second state (a partial
    temporary file on disk), with a stale temporary of a killed run added,
    then resumed: (out dir, first (rc, stderr), second (rc, stdout, stderr))."""
    tmp = tmp_path_factory.mktemp("sweep")
    path = tmp / "study.yaml"
    path.write_text(yaml.safe_dump(STUDY))
    out = tmp / "out"
    # The hand figures above take flat efficiencies (compute 0.7, memory 0.8,
    # no fixed latencies): given as a calibration file, so a refit of the
    # shipped defaults moves nothing here.
    cal = tmp / "flat.yaml"
    cal.write_text(yaml.safe_dump({"parameters": {
        "compute": 0.7, "memory": 0.8, "network": 0.8, "narrow_dtype": 1.0, "attention": 1.0, "moe": 1.0,
        "kernel_latency": 0.0, "iteration_overhead": 0.0, "sequence_overhead": 0.0}}))
    argv = ["sweep", str(path), "--out", str(out), "--no-cache", "--devices", "1", "--calibration", str(cal)]
    mp = pytest.MonkeyPatch()
    write, calls = search.Result._write, []

    def flaky(self, tmp_file):
        calls.append(tmp_file)
        if len(calls) == 2:
            tmp_file.write_bytes(b"partial")
            raise KeyboardInterrupt
        write(self, tmp_file)
    mp.setattr(search.Result, "_write", flaky)
    cap = _Capture()
    with cap:
        rc1 = main(argv)
    first = (rc1, cap.err, sorted(p.name for p in out.glob("state.npz.tmp*")))
    mp.undo()
    (out / "state.npz.tmp99999").write_bytes(b"left by a killed run")
    with cap:
        rc2 = main(argv + ["--no-progress"])
    return out, first, (rc2, cap.out, cap.err)


class _Capture:
    """stdout/stderr of a block (module-scoped fixtures cannot use capsys)."""

    def __enter__(self):
        import io
        import sys
        self._saved = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = self._out, self._err = io.StringIO(), io.StringIO()
        return self

    def __exit__(self, *exc):
        import sys
        sys.stdout, sys.stderr = self._saved
        self.out, self.err = self._out.getvalue(), self._err.getvalue()


def test_interrupt_ends_the_bar_line_and_leaves_no_temporary(interrupted):
    _, (rc, err, temporaries), _ = interrupted
    assert rc == 130
    assert "jaxplat: interrupted" in err.split("\n")  # a line of its own, not after the bar's text
    assert "cfg" in err  # the progress bar was drawn
    assert temporaries == []


def test_resume_says_where_and_cleans_up(interrupted):
    out, _, (rc, stdout, err) = interrupted
    assert rc == 0
    assert "resumed from block 1 of 4" in err  # one block (6 configurations) was saved before the interrupt
    assert list(out.glob("state.npz.tmp*")) == []
    summary = json.loads((out / "summary.json").read_text())
    assert summary["evaluated"] == 24


def test_over_memory_counts_every_configuration(interrupted):
    out, *_ = interrupted
    s = json.loads((out / "summary.json").read_text())
    assert s["over_memory"] == 8  # the 5 GB HBM: 2 tp x 2 micro-batches x 2 FLOP/s, none fits 16 GB
    assert s["ok"] == 8 and s["counted_among"]["over_memory"] == "all"


def test_top_k_collapses_axes_that_change_no_metric(interrupted):
    out, _, (_, stdout, _) = interrupted
    full = pd.read_csv(out / "top_k.csv")
    assert len(full) == 8  # every configuration that meets the constraints
    # Independently of the collapse: within one (tp, flops), every metric is the same.
    metrics = [c for c in full.columns if c.endswith(("_s", "_usd", "_j", "_bytes", "chips"))]
    for _, g in full.groupby(["tp", "flops"]):
        assert len(g) == 4 and (g[metrics].nunique() == 1).all()
    top = pd.read_csv(out / "top_k_collapsed.csv", dtype=str)
    assert len(top) == 2 and list(top["covers"]) == ["4", "4"]
    assert set(top["microbatches"]) == {"any"}
    assert set(top["hbm_size"]) == {">=80 GB"}  # the 5 GB one does not fit
    assert set(top["flops"]) == {"1 PFLOP/s"}  # 100 TFLOP/s misses the TTFT SLO
    assert full["same_as_rank"].nunique() == 2
    assert "2 distinct among the 8 best kept" in stdout
    front = pd.read_csv(out / "pareto_collapsed.csv", dtype=str)
    assert set(front["microbatches"]) == {"any"}


def test_requirements_state_their_direction(interrupted):
    out, _, (_, stdout, _) = interrupted
    req = pd.read_csv(out / "requirements.csv").set_index("axis")
    # 100 TFLOP/s misses the TTFT SLO, 1 PFLOP/s meets it: at least 1 PFLOP/s.
    assert req.loc["flops", "bound"] == "at least" and req.loc["flops", "value"] == pytest.approx(1e15)
    assert bool(req.loc["flops", "binding"])
    assert req.loc["hbm_size", "value"] == pytest.approx(8e10) and bool(req.loc["hbm_size", "binding"])
    assert "at least 1 PFLOP/s (the smallest value that works)" in stdout
    assert "at least 80 GB" in stdout


def test_requirement_not_binding_and_latency_direction():
    """A latency axis: the largest value that works; an axis whose grid
    extreme already works says so instead of echoing it."""
    from jaxplat.report.sweep_tables import requirements

    st = search.study_from_dict({**STUDY, "axes": {"tp": [1], "link_latency": [1e-6, 1e-5, 1e-4],
                                                   "flops": [1e15, 2e15]}})
    # ax_ok columns: tp (1), link_latency (3), flops (2); one group.
    ax_ok = np.array([[5, 3, 2, 0, 4, 4]])
    req = {r["axis"]: r for r in requirements(st, ax_ok)}
    assert req["link_latency"]["bound"] == "at most" and req["link_latency"]["value"] == pytest.approx(1e-5)
    assert req["link_latency"]["binding"] and "at most 10 µs" in req["link_latency"]["text"]
    assert not req["flops"]["binding"] and "not binding" in req["flops"]["text"]
    assert "1 PFLOP/s" in req["flops"]["text"]
