"""One sweep over a catalog: several chips (`hardware:` a list) and models of
four architectures (dense GQA, MoE, MLA, a Mamba/attention hybrid), every
configuration its own model, chip and parallelism, against a plain Python
loop over jitted `jaxplat.evaluate`: counts, top-k (naming chip and model),
Pareto front.

The study has no hardware axes. By default the engine maps its trailing
parallel and workload axes as a grid (search.engine.layout: grid_map, as
hardware axes are); with regrid=False its blocks take the point-by-point
path (points last, a few at a time: Engine._outer_points; the chunk is made
small here so that a block holds several chunks). Both must give the loop's
results. The models mix kinds, so blocks are aligned to models and each kind
runs its own branch of the one compiled step (lax.switch).
"""

import jax
import numpy as np
import pytest

import jaxplat as jp
from jaxplat import search
from jaxplat.search import devices, study_from_dict
from jaxplat.specs import SpecError

CHIPS = ["h100-sxm", "h200-sxm", "b200", "mi300x"]
MODELS = ["llama-3.1-8b", "mixtral-8x7b", "deepseek-v3", "jamba-1.5-mini"]
STUDY = dict(
    name="catalog", models=MODELS, workloads=["chatbot"], hardware=CHIPS,
    axes=dict(tp=[1, 8], ep=[1, 8], batch=[1, 16]),
    constraints=dict(max_chips=32, ttft="none", tpot="none"),
    objective={"maximize": "throughput_per_chip"}, pareto=["tpot", "throughput_per_chip"], top_k=12,
    engine=dict(block=16, blocks_per_step=2, fast_compile=True))


@pytest.fixture(scope="module")
def study():
    return study_from_dict(STUDY)


@pytest.fixture(scope="module", params=[True, False], ids=["grid", "points"])
def result(study, request):
    mp = pytest.MonkeyPatch()
    mp.setattr(devices, "CPU_EVAL_CHUNK", 4)  # points path: 4 chunks of 4 outer points per block
    try:
        engine = search.Engine(study, regrid=request.param)
        assert len(engine.kinds) == 3
        if request.param:  # tp, ep, batch: the block's grid (8 points) of 2 chips
            assert [a.name for a in engine.st.inner] == ["tp", "ep", "batch"] and engine.grid.co == 2
        else:
            assert engine.eval_chunk == 4 and engine.grid.co == 16
        return engine, search.run(engine, progress=False)
    finally:
        mp.undo()


@pytest.fixture(scope="module")
def reference(study):
    """Every configuration through jitted evaluate, one call each."""
    one = lambda m, h, p, w: jp.evaluate(m, h, p, w, study.options)  # noqa: E731 (jitted: _evaluate)
    models = {n: jp.load_model(n) for n in MODELS}
    chips = {n: jp.load_hardware(n) for n in CHIPS}
    wl0 = jp.load_workload("chatbot")
    rows = []
    for flat in range(study.size):
        c = {k: v[0] for k, v in study.decode([flat]).items()}
        r = jax.device_get(one(models[c["model"]], chips[c["hardware"]], jp.Parallel(tp=c["tp"], ep=c["ep"]),
                               jp.replace(wl0, batch=c["batch"])))
        ok = bool(r.feasible) and float(r.chips) <= 32
        rows.append(dict(flat=flat, ok=ok, feasible=bool(r.feasible), tpc=float(r.throughput) / float(r.chips),
                         tpot=float(r.tpot), **c))
    return rows


def test_chips_are_an_outer_axis_named_in_the_top_k(study, result):
    """128 configurations = 4 models x 4 chips x 2 tp x 2 ep x 2 batch, the
    chip a categorical outer axis after the model; the top-k decodes to the
    chip's and the model's names."""
    engine, res = result
    assert study.size == 128 and [a.name for a in study.outer][:2] == ["model", "hardware"]
    top = study.decode(res.top["index"])
    assert set(top["hardware"]) <= set(CHIPS) and set(top["model"]) <= set(MODELS)
    assert engine.grid.n_seg == 4  # blocks aligned to the 4 models


def test_counts_top_k_and_front_match_python_loop(result, reference):
    _, res = result
    ok = [r for r in reference if r["ok"]]
    assert res.counts[0] == 128 and res.counts[1] == sum(r["feasible"] for r in reference)
    assert res.counts[2] == len(ok) > 12
    # every architecture kind is among the configurations that meet the constraints
    assert {r["model"] for r in ok} == set(MODELS)
    want = sorted(ok, key=lambda r: (-r["tpc"], r["flat"]))[:12]
    assert list(res.top["index"]) == [r["flat"] for r in want]
    np.testing.assert_allclose(res.top["vals"][:, 0], [r["tpc"] for r in want], rtol=1e-5)
    # Pareto front of (tpot min, throughput per chip max), by brute force
    front = [r for r in ok if not any(q["tpot"] <= r["tpot"] and q["tpc"] >= r["tpc"] and
                                      (q["tpot"], -q["tpc"], q["flat"]) < (r["tpot"], -r["tpc"], r["flat"])
                                      for q in ok)]
    assert sorted(res.front["index"]) == sorted(r["flat"] for r in front)


def test_hardware_list_errors_are_one_line():
    with pytest.raises(SpecError, match="hardware"):
        study_from_dict({**STUDY, "hardware": []})
    with pytest.raises(SpecError, match="hardware"):
        study_from_dict({**STUDY, "hardware": ["h100-sxm", 3]})
    with pytest.raises(SpecError, match="once"):
        study_from_dict({**STUDY, "hardware": ["h100-sxm", "h100-sxm"]})


def test_blocks_aligned_to_models_cover_every_index_once(study):
    """Blocks of 16 (whole chunks of 4) in 4 segments of 32 outer points:
    each block inside one model's range, together every index once."""
    g = search.Grid.of(study, 16, multiple=4, segments=4)
    seen = []
    for k in range(g.n_blocks):
        lo, hi = g.block_range(k)
        assert lo // 32 == hi // 32  # one model per block
        seen += range(lo, hi + 1)
    assert sorted(seen) == list(range(128)) and g.n_blocks == 8


def test_device_profiles():
    """The 2^15 cap only on the CPU; accelerator blocks a power of 2 whose
    temp buffers (BYTES_PER_CONFIG each) take at most a quarter of memory,
    within [2^20, 2^22]: 141 GB (H200) -> 2^22 (2^22 x 8 KiB = 34.4 GB <=
    35.2 GB), 16 GB -> 2^20 (the floor: 2^20 x 8 KiB = 8.6 GB > 4 GB), 40 GB
    -> 2^20 (2^21 x 8 KiB = 17.2 GB > 10 GB)."""
    assert devices.max_block("cpu") == 2**15 and devices.max_block("gpu") is None
    cpu = devices.device_profile(jax.devices("cpu")[0])
    assert cpu.max_block == cpu.block == 2**15 and cpu.eval_chunk == devices.CPU_EVAL_CHUNK
    assert devices.BYTES_PER_CONFIG == 8192
    assert devices.accelerator_block(141_000_000_000) == 2**22
    assert devices.accelerator_block(16_000_000_000) == 2**20
    assert devices.accelerator_block(40_000_000_000) == 2**20
    assert devices.accelerator_block(None) == 2**20
