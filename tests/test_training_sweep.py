"""Training studies in `jaxplat sweep` (issue 38, item 5): a tiny study swept
end to end; its top-1 against a slow Python loop over `train_step` on the
same grid; its top_k.csv rows through `jaxplat train --json`; bad keys."""

import contextlib
import io
import itertools
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from jaxplat.cli import main
from jaxplat.cost.training import RECOMPUTE, TrainWorkload, train_step
from jaxplat.cost.training_memory import checks
from jaxplat.model import Parallel, load_hardware, load_model
from jaxplat.search import devices, engine, load_study, study_from_dict, train_study
from jaxplat.specs import SpecError, units

MODEL, HW = "llama-3.1-8b", "dgx-h100-pod"
GRID = dict(chips=[16, 32], tp=[1, 2, 4], pp=[1, 2], vp=[1, 2], micro_batch=[1, 2], global_batch=[64, 128],
            seq=[2048], dtype=["bf16", "fp8"], recompute=["none", "full"], zero=[0, 1])
STUDY = dict(name="tiny-train", task="train", models=[MODEL], hardware=HW, tokens=1.0e11,
             axes=GRID, constraints=dict(max_chips=24), objective={"maximize": "tokens_per_s_per_chip"},
             top_k=5)
FLAGS = ("chips", "tp", "pp", "vp", "cp", "ep", "micro_batch", "global_batch", "seq", "dtype", "recompute", "zero")


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("train-sweep")
    path = tmp / "tiny.yaml"
    path.write_text(yaml.safe_dump(STUDY))
    out = tmp / "out"
    argv = ["sweep", str(path), "--out", str(out), "--no-cache", "--devices", "1", "--no-progress"]
    with contextlib.redirect_stdout(io.StringIO()) as text:
        assert main(argv) == 0
    return pd.read_csv(out / "top_k.csv"), json.loads((out / "summary.json").read_text()), text.getvalue()


def _loop_oracle():
    """tokens/s per chip of every configuration of GRID that fits, divides and
    uses at most 24 chips: one jitted train_step call per configuration."""
    model, hw = load_model(MODEL), load_hardware(HW)
    best = {}
    for cfg in itertools.product(*GRID.values()):
        c = dict(zip(GRID, cfg))
        dp = c["chips"] / (c["tp"] * c["pp"])
        par = Parallel(tp=c["tp"], pp=c["pp"], vp=c["vp"], dp=dp)
        fp8 = c["dtype"] == "fp8"  # H100: per-tensor scaling (scale_block 0), as `jaxplat train --dtype fp8`
        twl = TrainWorkload(global_batch=c["global_batch"], micro_batch=c["micro_batch"], seq=c["seq"],
                            recompute=float(RECOMPUTE.index(c["recompute"])), zero=c["zero"],
                            bytes_act=1.0 if fp8 else 2.0,
                            compute_dtype=float(units.DTYPES.index("fp8" if fp8 else "bf16")), tokens=1.0e11)
        m = train_step(model, hw, par, twl)
        ok = bool(m.feasible) and all(bool(v) for v in checks(model, par, twl).values()) and c["chips"] <= 24
        if ok:
            best[cfg] = float(m.tokens_per_s_per_chip)
    return best


def test_top1_is_the_loops_best(swept):
    top, summary, text = swept
    best = _loop_oracle()
    assert summary["configurations"] == 768 and summary["ok"] == len(best) > 0
    want = max(best.values())
    r = top.iloc[0]
    np.testing.assert_allclose(r["tokens_per_s_per_chip"], want, rtol=1e-5)
    key = tuple(r[k] if isinstance(r[k], str) else type(GRID[k][0])(r[k]) for k in GRID)
    np.testing.assert_allclose(best[key], want, rtol=1e-5)  # the named configuration is one of the best
    assert list(top.columns[2:15]) == ["chips", "tp", "pp", "vp", "cp", "ep", "dp", "micro_batch", "global_batch",
                                       "seq", "dtype", "recompute", "zero"]
    assert "tokens_per_s_per_chip" in text
    flags = " ".join(f"--{k.replace('_', '-')} {r[k]}" for k in FLAGS)
    assert f"jaxplat train --model {MODEL} --hardware {HW} {flags}" in text  # the best, named as a command


def test_top_k_rows_through_jaxplat_train(swept):
    top, _, _ = swept
    for _, r in top.head(3).iterrows():
        argv = ["train", "--model", MODEL, "--hardware", HW, "--json"]
        for k in FLAGS:
            argv += [f"--{k.replace('_', '-')}", str(r[k])]
        with contextlib.redirect_stdout(io.StringIO()) as out:
            assert main(argv) == 0
        got = json.loads(out.getvalue())
        assert got["dp"] == r["dp"]
        for k in ("step_time_s", "tokens_per_s_per_chip", "mfu", "memory_bytes"):
            np.testing.assert_allclose(got[k], r[k], rtol=1e-5, err_msg=k)


@pytest.mark.parametrize("change, words", [
    (dict(axes={**GRID, "tpp": [1]}), "unknown key axes.'tpp'"),
    (dict(axes={k: v for k, v in GRID.items() if k != "chips"}), "missing key axes.'chips'"),
    (dict(axes={**GRID, "recompute": ["some"]}), "axes.recompute must be a list"),
    (dict(axes={**GRID, "zero": [4]}), "ZeRO stages among 0, 1, 2, 3"),
    (dict(axes={**GRID, "tp": [1.5]}), "whole numbers"),
    (dict(axes={**GRID, "ep_overlap": [0, 1.5]}), "axes.ep_overlap must lie in [0, 1]"),
    (dict(axes={**GRID, "recompute_mlp": [0, 2]}), "axes.recompute_mlp must list 0 (keep) and/or 1 (recompute)"),
    (dict(objective={"minimize": "tpot"}), "'tpot' is not one of"),
    (dict(tokens=0, objective={"minimize": "train_time_s"}), "needs the tokens"),
    (dict(task="serve"), "task must be train or infer"),
    (dict(workloads=["chatbot"]), "unknown key 'workloads'"),
])
def test_bad_training_study_keys(change, words):
    with pytest.raises(SpecError) as e:
        study_from_dict({**STUDY, **change}, src="t.yaml")
    msg = str(e.value)
    assert words in msg and "\n" not in msg and msg.startswith("t.yaml")


def test_training_blocks_on_an_accelerator_are_capped(monkeypatch):
    """On an accelerator the device's default block (up to 2^22, sized for
    inference) is capped at train_study.ACCEL_BLOCK for a training study: the
    405B study in one block of 1,382,400 was killed on an H200 after 303 s,
    in blocks of 46,080 it ran at 5.99e6 configurations/s. A block the
    command or the study asks for is kept; inference studies keep the
    device's default."""
    studies = Path(__file__).resolve().parents[1] / "specs" / "studies"
    gpu = devices.DeviceProfile("gpu", None, 2**22, 2, None)
    monkeypatch.setattr(engine, "device_profile", lambda device=None: gpu)
    big = load_study(studies / "training-llama405b-16k.yaml")
    capped = engine.Engine(big)
    assert capped.grid.co * capped.grid.ci <= train_study.ACCEL_BLOCK < big.size
    assert capped.grid.n_blocks * capped.grid.co * capped.grid.ci >= big.size
    asked = engine.Engine(big, block=2**20)
    assert train_study.ACCEL_BLOCK < asked.grid.co * asked.grid.ci <= 2**20
    infer = engine.Engine(load_study(studies / "catalog-parallelism.yaml")).grid
    assert infer.co * infer.ci > train_study.ACCEL_BLOCK


def test_a_cpu_grid_merges_only_the_axes_that_do_not_shape_the_table():
    """On the CPU the engine merges trailing grid axes into one minor dim
    (devices.CPU_GRID_MINOR points); a training study merges only the axes
    after the last one that shapes the forward table (train_study.TABLE_AXES):
    the 405B study's chips, global_batch, recompute and zero (192 points),
    not its dtype, which would rebuild every table 192 times (0.8e6 against
    6.9e6 configurations/s, experiments/training/bench_sweep.py)."""
    studies = Path(__file__).resolve().parents[1] / "specs" / "studies"
    eng = engine.Engine(load_study(studies / "training-llama405b-16k.yaml"))
    merged = eng.st.inner[len(eng.st.inner) - eng.merge:]
    assert [a.name for a in merged] == ["chips", "global_batch", "recompute", "zero"]
    assert not {a.name for a in merged} & set(train_study.TABLE_AXES)


def test_the_shipped_moe_training_study_sweeps_its_moe_axes():
    """specs/studies/training-deepseek-v3-2k.yaml: a training study of an
    MoE with the fused dispatcher, whose axes include etp, ep_overlap and
    two recompute modules; its size is the product of its axes' lengths
    (2 x 3 x 3 x 2 x 4 x 2 x 3 x 2 x 2 x 2 = 6,912)."""
    studies = Path(__file__).resolve().parents[1] / "specs" / "studies"
    st = load_study(studies / "training-deepseek-v3-2k.yaml")
    names = {a.name for a in (*st.outer, *st.inner)}
    assert {"etp", "ep_overlap", "recompute_mla_up_proj", "recompute_moe_act"} <= names
    assert st.train_options.moe_dispatcher == "fused" and st.size == 6912
