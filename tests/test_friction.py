"""A new user's friction (issue 39, item 7): --ttft/--tpot on `requirements`
and `sweep`, the constraints a sweep applies printed at its start, a study's
group_by grouping the printed top-k, `codesign --no-progress`, and workloads
given as files shown by their name, not their path. Each test fails on the
old code (unknown flags; the top 10 overall; full paths)."""

import json

import numpy as np
import pandas as pd
import pytest
import yaml

from jaxplat.cli import main
from jaxplat.specs import read_yaml, resolve, spec_label


def _run(capsys, *argv):
    rc = main(list(argv))
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def _workload(tmp_path, stem, **changes):
    """specs/workloads/chatbot.yaml with `changes`, saved as a file of another name."""
    d = read_yaml(resolve("workloads", "chatbot"))
    d.update(changes)
    path = tmp_path / "deep" / "folder" / f"{stem}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(d))
    return path


def test_spec_label(tmp_path):
    assert spec_label("chatbot") == "chatbot"
    assert spec_label(_workload(tmp_path, "file-stem", name="my-chat")) == "my-chat"
    d = read_yaml(resolve("workloads", "chatbot"))
    del d["name"]
    (tmp_path / "nameless.yaml").write_text(yaml.safe_dump(d))
    assert spec_label(tmp_path / "nameless.yaml") == "nameless"


def test_requirements_slo_flags_equal_a_workload_file(tmp_path, capsys):
    """--ttft 0.4 --tpot 0.05 on chatbot gives every number that a workload
    file with slo {ttft: 0.4, tpot: 0.05} gives, and not the default's (the
    closed-form compute requirement is prefill FLOPs / TTFT: x 0.2 / 0.4)."""
    base = ["requirements", "--model", "llama-3.1-8b", "--json"]
    path = _workload(tmp_path, "file-stem", name="slow-chat", slo={"ttft": 0.4, "tpot": 0.05})
    rc, out, _ = _run(capsys, *base, "--workload", str(path))
    by_file = json.loads(out)
    rc2, out, _ = _run(capsys, *base, "--ttft", "0.4", "--tpot", "0.05")
    by_flag = json.loads(out)
    rc3, out, _ = _run(capsys, *base)
    default = json.loads(out)
    assert rc == rc2 == rc3 == 0
    nums = [k for k, v in by_file.items() if isinstance(v, float)]
    assert nums and all(by_flag[k] == by_file[k] for k in nums)
    assert by_flag["prefill_flops_s"] == pytest.approx(default["prefill_flops_s"] * 0.2 / 0.4, rel=1e-6)
    rc, out, _ = _run(capsys, "requirements", "--model", "llama-3.1-8b", "--workload", str(path), "--ttft", "none")
    assert rc == 0 and "workload slow-chat (" in out and str(tmp_path) not in out
    assert "TTFT no limit (--ttft); TPOT <= 0.05 s)" in out
    # the compute an unlimited TTFT needs is none, not the figure of a 1e9 s SLO
    row = next(line for line in out.splitlines() if line.startswith("compute (TTFT)"))
    assert row.split()[2:4] == ["none", "none"] and row.rstrip().endswith("TTFT: no limit"), row
    rc, _, err = _run(capsys, *base, "--tpot", "soon")
    assert rc == 2 and "--tpot must be positive seconds" in err and len(err.strip().splitlines()) == 1


# Llama-3.1-8B on H100s: a batch-1 chatbot and a batch-64 file workload. At
# batch 64 every configuration serves far more tokens per chip than any at
# batch 1, so the 10 best overall are all batch-64 rows; grouped by workload
# the summary lists the best of each.
STUDY = {
    "name": "friction", "models": ["llama-3.1-8b"], "hardware": "h100-sxm",
    "axes": {"tp": [1, 2, 4, 8], "microbatches": [1], "flops": [5.0e+14, 1.0e+15, 2.0e+15]},
    "constraints": {"ttft": "workload", "tpot": 0.05, "max_chips": 8},
    "objective": {"maximize": "throughput_per_chip"}, "pareto": ["tpot", "throughput_per_chip"],
    "top_k": 24, "group_by": "workload", "engine": {"block": 12, "blocks_per_step": 1}, "price": "fixed",
}


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("friction")
    big = _workload(tmp, "big-batch-file", name="big-batch", batch=64, slo={"ttft": 30.0, "tpot": 0.5})
    path = tmp / "study.yaml"
    path.write_text(yaml.safe_dump({**STUDY, "workloads": ["chatbot", str(big)]}))
    out = tmp / "out"
    mp = pytest.MonkeyPatch()
    import io
    import sys
    o, e = io.StringIO(), io.StringIO()
    mp.setattr(sys, "stdout", o)
    mp.setattr(sys, "stderr", e)
    rc = main(["sweep", str(path), "--out", str(out), "--no-cache", "--devices", "1", "--no-progress",
               "--ttft", "none"])
    mp.undo()
    return rc, o.getvalue(), e.getvalue(), out


def test_sweep_prints_its_constraints_with_their_source(swept):
    rc, _, err, _ = swept
    assert rc == 0
    block = err[err.index("constraints:"):].splitlines()[:4]
    assert block[1] == "  TTFT no limit (--ttft)"
    assert block[2] == "  TPOT <= 50 ms (study constraints.tpot)"
    assert block[3].startswith("  chips: at most 8 (constraints.max_chips); memory per chip <= 100% of capacity")


def test_sweep_constraints_from_the_workloads():
    from jaxplat.cli.sweep import constraints_text
    from jaxplat.search import study_from_dict

    st = study_from_dict({**STUDY, "workloads": ["chatbot", "qa"], "constraints": {}})
    assert constraints_text(st).splitlines()[1] == (
        "  TTFT: each workload's slo (chatbot <= 200 ms, qa <= 200 ms; --ttft or constraints.ttft overrides)")


def test_group_by_groups_the_printed_top_k(swept):
    rc, out, _, folder = swept
    top = pd.read_csv(folder / "top_k.csv")
    assert set(top["workload"]) == {"chatbot", "big-batch"}  # names, not the file's path
    best10 = top.sort_values("rank").head(10)
    assert set(best10["workload"]) == {"big-batch"}  # so a plain top 10 shows one group only
    head = out.index("Best 5 per workload (group_by) by max throughput_per_chip")
    table = out[head:].split("\n\n")[0].splitlines()[3:]
    shown = [line.split()[1] for line in table]
    distinct = pd.read_csv(folder / "top_k_collapsed.csv")["workload"].value_counts()
    assert distinct["chatbot"] >= 1 and distinct["big-batch"] >= 5
    assert shown.count("chatbot") == min(5, distinct["chatbot"]) and shown.count("big-batch") == 5
    ranks = [int(line.split()[0]) for line in table if line.split()[1] == "chatbot"]
    want = top[top["workload"] == "chatbot"].sort_values("rank")
    assert ranks[0] == int(want["rank"].iloc[0])
    assert np.all(np.diff(ranks) > 0)


def test_codesign_no_progress(tmp_path, capsys, monkeypatch):
    from jaxplat.design import codesign as cd

    path = _workload(tmp_path, "cd-wl", name="cd-chat")
    study = {"model": "llama-2-7b", "workload": str(path), "technology": "n5", "hbm": "hbm3e",
             "base": "h100-sxm", "profile": "genz", "objective": "cost_per_mtok",
             "params": {"flops": [1e14, 1e15], "sram": [8e6, 1.28e8], "hbm_stacks": [1, 8],
                        "link_bw": [5e10, 1e12]},
             "candidates": {"tp": [1, 2], "batch": [1]}}
    (tmp_path / "cd.yaml").write_text(yaml.safe_dump(study))
    steps = 3
    traj = {"loss": np.zeros((steps, 1)), "x": np.ones((steps, 1, 4)), "z": np.zeros((steps, 1, 4)),
            **{k: np.ones(steps) for k in ("tau", "hinge", "sharpness", "penalty")}}
    x = np.array([5e14, 3.2e7, 5.0, 4e11], np.float32)
    monkeypatch.setattr(cd, "codesign", lambda prob, **kw: cd.Result(x=x, candidate=0, objective=1.0,
                                                                     evaluations=1, trajectory=traj))
    monkeypatch.setattr(cd, "elasticities", lambda *a, **kw: (["flops[bf16]"], ["ttft", "tpot"], np.zeros((1, 2)),
                                                              np.zeros((1, 2))))
    seen = []

    def grid_search(prob, points, progress=True):
        seen.append(progress)
        return x, 0, 1.0, 10
    monkeypatch.setattr(cd, "grid_search", grid_search)
    rc, out, _ = _run(capsys, "codesign", str(tmp_path / "cd.yaml"), "--no-progress", "--steps", "3",
                       "--out", str(tmp_path / "o"))
    assert rc == 0 and seen == [False]
    assert out.splitlines()[0].startswith("cd: llama-2-7b / cd-chat on n5")
    assert (tmp_path / "o" / "cd.chip.yaml").is_file()  # a study without name: files in --out, named by its stem


def test_estimate_header_names_the_workload(tmp_path, capsys):
    path = _workload(tmp_path, "file-name", name="my-chat")
    rc, out, _ = _run(capsys, "estimate", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--workload", str(path))
    assert rc == 0 and "workload my-chat:" in out and "SLO of my-chat" in out and str(tmp_path) not in out


def test_group_by_a_numeric_axis_finds_its_collapsed_rows():
    """top_k_collapsed.csv writes a numeric axis with its unit ("32 chips"): grouping by it still finds
    each group's rows (it had printed every group of parallelism-llama405b-h200 as "none among the best
    kept" beside a table that held them)."""
    from jaxplat.cli.sweep import _shown_rows
    from jaxplat.search import study_from_dict

    st = study_from_dict({**STUDY, "axes": {"chips": [8, 16, 32], "tp": [1, 2, 4, 8]}, "workloads": ["chatbot"],
                          "group_by": "chips", "constraints": {"max_chips": 32}})
    top = pd.DataFrame({"rank": [1, 2, 3], "chips": ["16 chips", "8 chips", "16 chips"], "tp": [8, 8, "any"]})
    # axes.csv's group column holds the label as the engine wrote it (32.0)
    axes = pd.DataFrame({"group": ["32.0", "32.0"], "axis": ["chips", "tp"], "n_ok": [3, 3],
                         "best_throughput_per_chip": [41.5, 41.5]})
    shown, title, missing = _shown_rows(st, top, axes, most=6)
    assert title == "Best 2 per chips (group_by)"
    assert shown["rank"].tolist() == [2, 1, 3]
    assert missing == ["  chips 32: none among the best kept; best throughput_per_chip 41.5 (axes.csv; raise top_k "
                       "to list it)"]
