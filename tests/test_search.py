"""The sweep engine against a plain Python loop over `jaxplat.evaluate`.

One small study (2 workloads x 3 tp x 4 batch outer, 5 HBM bandwidths x 3
FLOP/s inner = 360 configurations, blocks of 4 x 15) is compiled once and
checked against the single-configuration path: counts, top-k, Pareto front,
per-axis summaries, and resume after an interruption.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import compile_events

import jaxplat as jp
from jaxplat import search
from jaxplat.cost import money
from jaxplat.model import replace
from jaxplat.search import study_from_dict, values_program
from jaxplat.search.runtime import compile_once
from jaxplat.specs import SpecError

STUDY = dict(
    name="tiny", models=["llama-3.1-8b"], workloads=["chatbot", "qa"], hardware="h100-sxm",
    axes=dict(tp=[1, 2, 4], batch={"pow2": [1, 8]}, hbm_bandwidth={"log": [1e12, 8e12], "count": 5},
              flops=[2e14, 1e15, 4e15]),
    constraints=dict(max_chips=2, ttft="workload", tpot=0.008),
    objective={"maximize": "throughput_per_chip"}, pareto=["tpot", "throughput_per_chip"],
    group_by="workload", top_k=7, engine=dict(block=64, blocks_per_step=1))


@pytest.fixture(scope="module")
def study():
    return study_from_dict(STUDY)


@pytest.fixture(scope="module")
def engine(study):
    return search.Engine(study)


@pytest.fixture(scope="module")
def result(engine):
    return search.run(engine, progress=False)


@pytest.fixture(scope="module")
def reference(study):
    return _python_loop(study)


def _python_loop(study, tpot_slo=0.008):
    """Every configuration of a STUDY-like study through jitted
    `jaxplat.evaluate`, one call each (hardware axes, if any: HBM bandwidth
    and FLOP/s); `tpot_slo` (s) is the study's TPOT constraint."""
    one = lambda m, h, p, w: jp.evaluate(m, h, p, w, study.options)  # noqa: E731 (jitted, compiled once)
    m, h0 = study.models[0], study.hardware
    rows = []
    for flat in range(study.size):
        cfg = {k: (v[0] if isinstance(v, np.ndarray) else v) for k, v in study.decode([flat]).items()}
        wl = study.workloads[study.workload_names.index(cfg["workload"])]
        wl = replace(wl, batch=cfg["batch"])
        hw = h0
        if study.inner:
            hw = replace(h0, mem_bw=h0.mem_bw.at[0].set(cfg["hbm_bandwidth"]),
                         flops=h0.flops * (cfg["flops"] / h0.flops[2]))
        if study.pricing == "technology":  # the engine prices (and powers: TDP) each point so
            hw = money.priced_chip(hw, study.technology)
        r = jax.device_get(one(m, hw, jp.Parallel(tp=cfg["tp"]), wl))
        tpc = float(r.throughput) / float(r.chips)
        ok = (bool(r.feasible) and r.chips <= 2 and r.ttft <= float(wl.ttft_slo) and r.tpot <= tpot_slo
              and r.memory_bytes <= r.capacity_bytes)
        rows.append(dict(flat=flat, tpc=tpc, tpot=float(r.tpot), feasible=bool(r.feasible), ok=ok, **cfg))
    return rows


def assert_same_sweep(a, b, rtol=0.0):
    """Two sweeps select the same configurations (counts, per-axis counts,
    histogram, top-k and Pareto indices equal) with metric values equal, or
    within `rtol` where another program computed them (float32 rounding)."""
    for name in ("counts", "ax_ok", "ax_feas", "hist"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    for part in ("top", "front"):
        np.testing.assert_array_equal(getattr(a, part)["index"], getattr(b, part)["index"], err_msg=part)
        np.testing.assert_allclose(getattr(a, part)["vals"], getattr(b, part)["vals"], rtol=rtol, err_msg=part)
    np.testing.assert_allclose(a.ax_best, b.ax_best, rtol=rtol, err_msg="ax_best")


def test_grid_covers_every_index_once(engine):
    gr = engine.grid
    assert (gr.co, gr.ci, gr.per_row, gr.n_blocks) == (4, 15, 1, 6)
    spans = [gr.block_range(k) for k in range(gr.n_blocks)]
    assert spans[0][0] == 0 and spans[-1][1] == 359
    assert all(b[0] == a[1] + 1 for a, b in zip(spans, spans[1:]))


def test_cut_rows_when_inner_is_large(study):
    # 15 inner points (5 HBM x 3 FLOP/s): blocks of 2 HBM values x every
    # FLOP/s value, the third one with a masked tail.
    gr = search.Grid.of(study, block=8)
    assert (gr.co, gr.ci, gr.per_row, gr.n_blocks, gr.split, gr.cl, gr.p) == (1, 6, 3, 72, 1, 2, 3)
    assert gr.block_range(1) == (6, 11) and gr.block_range(2) == (12, 14) and gr.block_range(3) == (15, 20)


def test_counts_match_python_loop(result, reference):
    c = dict(zip(search.COUNTERS, result.counts))
    assert c["evaluated"] == 360
    assert c["feasible"] == sum(r["feasible"] for r in reference)
    assert c["ok"] == sum(r["ok"] for r in reference)
    assert 0 < c["ok"] < c["feasible"]  # the constraints bind somewhere, not everywhere


def test_top_k_matches_python_loop(result, reference):
    """group_by workload: the 7 best of each workload, best first overall."""
    ok = sorted((r for r in reference if r["ok"]), key=lambda r: (-r["tpc"], r["flat"]))
    ok = [r for r in ok if sum(q["workload"] == r["workload"] for q in ok[:ok.index(r)]) < 7]
    assert len(ok) == 14 and list(result.top["index"]) == [r["flat"] for r in ok]
    np.testing.assert_allclose(result.top["vals"][:, 0], [r["tpc"] for r in ok], rtol=1e-5)


def test_pareto_front_matches_brute_force(result, reference):
    ok = [r for r in reference if r["ok"]]
    front = {r["flat"] for r in ok
             if not any((q["tpot"] <= r["tpot"] and q["tpc"] >= r["tpc"])
                        and (q["tpot"] < r["tpot"] or q["tpc"] > r["tpc"]) for q in ok)}
    assert set(result.front["index"].tolist()) == front
    assert np.all(np.diff(result.front["a"]) > 0)  # sorted by TPOT, strictly


def test_per_axis_summary_matches_python_loop(result, reference, study):
    off = 0
    for a in study.axes:
        for j in range(len(a)):
            for g, wname in enumerate(study.workload_names):
                rows = [r for r in reference if r["workload"] == wname and r[a.name] == a.label(j)]
                assert result.ax_ok[g, off + j] == sum(r["ok"] for r in rows)
                assert result.ax_feas[g, off + j] == sum(r["feasible"] for r in rows)
                best = max((r["tpc"] for r in rows if r["ok"]), default=-math.inf)
                assert result.ax_best[g, off + j] == pytest.approx(best, rel=1e-5)
        off += len(a)


def test_resume_after_interruption_gives_the_same_result(engine, result, tmp_path):
    path = tmp_path / "state.npz"
    part = search.run(engine, path, progress=False, max_steps=2)
    assert part.next_block == 2 and not part.done
    again = search.run(engine, path, progress=False)  # resumes at block 2
    assert again.done
    assert_same_sweep(again, result)
    assert search.run(engine, path, progress=False).counts[0] == 360  # a finished state: nothing redone


def test_a_step_compiles_once(engine, result):
    """After the first step, another block id runs the compiled program: no
    trace, no XLA compile (jax.monitoring's compile events)."""
    first = jax.device_get(engine.step(0))
    with compile_events() as events:
        second = jax.device_get(engine.step(engine.blocks_per_call))
    assert events == []
    per_step = 60 * engine.blocks_per_call  # blocks of 4 outer x 15 inner points
    assert int(first["counts"][:, 0].sum()) == int(second["counts"][:, 0].sum()) == per_step


def test_values_one_by_one_equal_the_batched_program(study, engine, result, monkeypatch):
    """On the CPU the reported values come from a program compiled for one
    point, called once per point; past VALUES_ONE_BY_ONE_UP_TO points a call
    compiles the `jax.vmap` form (the one other backends use). Both give the
    same values, to float32 rounding, and the same flags, on every
    configuration of the study."""
    flat = np.arange(study.size)
    one = engine.evaluate_flat(flat)
    assert engine._values.one
    fresh = search.Engine(study)  # its values program only: no step is compiled
    monkeypatch.setattr(values_program, "VALUES_ONE_BY_ONE_UP_TO", study.size - 1)
    batched = fresh.evaluate_flat(flat)
    assert not fresh._values.one and fresh._compiled is None
    np.testing.assert_allclose(batched[0], one[0], rtol=2e-6)
    assert (batched[1] == one[1]).all() and (batched[2] == one[2]).all()
    np.testing.assert_allclose(one[0][result.top["index"]], result.top["vals"], rtol=0)


def test_engines_of_one_study_share_their_values_program(study, engine, result):
    """A second engine of the same study gets the first one's compiled
    values program (`compile_once`: the same program text), and
    its values are those of the first; a program that differs in one
    constant is compiled on its own and computes with its own constant."""
    again = search.Engine(study)
    flat = np.arange(0, study.size, 7)
    got = again.evaluate_flat(flat)
    assert again._values._run is engine._values._run
    np.testing.assert_array_equal(got[0], engine.evaluate_flat(flat)[0])
    x = jax.ShapeDtypeStruct((3,), jnp.float32)
    lower = lambda c: jax.jit(lambda v: v * np.float32(c)).lower(x)  # noqa: E731
    two, three = (compile_once(lower(c), "cpu") for c in (2.0, 3.0))
    assert compile_once(lower(2.0), "cpu") is two and three is not two
    np.testing.assert_array_equal(np.asarray(three(jnp.ones(3, jnp.float32))), [3.0, 3.0, 3.0])


def test_state_from_another_study_is_refused(engine, tmp_path, study):
    path = tmp_path / "state.npz"
    search.run(engine, path, progress=False, max_steps=1)
    other = search.Result(engine)
    fake = lambda study, fast: type("E", (), {"study": study, "grid": engine.grid, "metrics": engine.metrics,  # noqa: E731
                                              "top_k": engine.top_k, "fast_compile": fast})()
    other.e = fake(type("S", (), {"fingerprint": "x"})(), False)
    with pytest.raises(SpecError, match="different study"):
        other.load(path)
    # the same study compiled by the other code generator: refused too
    other.e = fake(engine.study, True)
    with pytest.raises(SpecError, match="fast_compile differs"):
        other.load(path)


@pytest.mark.parametrize("change, match", [
    ({"axes": {"tpp": [1]}}, "unknown key axes.'tpp'"),
    ({"colour": 1}, "unknown key 'colour'"),
    ({"axes": {"batch": {"log": [1, 8]}}}, "needs a positive integer count"),
    ({"axes": {"tp": [0.5]}}, "at least 1"),
    ({"objective": {"maximize": "speed"}}, "objective 'speed' is not one of"),
    ({"constraints": {"ttft": "soon"}}, "constraints.ttft"),
    ({"group_by": "flops"}, "group_by"),
])
def test_study_errors_name_the_key(change, match):
    with pytest.raises(SpecError, match=match):
        study_from_dict({**STUDY, **change})


def test_ranges_and_decode():
    st = study_from_dict({**STUDY, "axes": {"batch": {"pow2": [3, 40]}, "tp": [1, 2],
                                            "hbm_bandwidth": {"log": [1e12, 1e14], "count": 3},
                                            "flops": {"linear": [1e14, 3e14], "count": 3}}})
    assert list(st.outer[1].values) == [4, 8, 16, 32]
    np.testing.assert_allclose(st.inner[0].values, [1e12, 1e13, 1e14])
    np.testing.assert_allclose(st.inner[1].values, [1e14, 2e14, 3e14])
    assert st.size == 2 * 4 * 2 * 3 * 3
    # Row-major, hardware axes fastest: flat 1 changes only flops.
    d = st.decode([0, 1, 9])
    assert d["flops"][1] == 2e14 and d["hbm_bandwidth"][1] == 1e12
    assert d["batch"][2] == 4 and d["tp"][2] == 2 and d["workload"][2] == "chatbot"


def test_blocks_cut_inside_the_hardware_grid_give_the_same_result(study, result):
    """Blocks of 2 HBM values x every FLOP/s value (batching.grid_map over a
    lead and a trailing axis, masked tail) give the whole-row result: the same
    configurations, numbers to float32 rounding (another block shape is
    another XLA program)."""
    cut = search.run(search.Engine(study, block=8, blocks_per_step=3), progress=False)
    assert_same_sweep(cut, result, rtol=1e-6)


def test_front_merge_paths_give_the_same_result(study, result, monkeypatch):
    """With 2 bins and at most 2 points merged pairwise, blocks take every
    front-merge path (skip, one round, several rounds): the same front (its
    numbers to float32 rounding: another program is another XLA compile)."""
    monkeypatch.setattr(search.merge, "FRONT_FEW", 2)
    monkeypatch.setattr(search.merge, "FRONT_BINS", 2)
    small = search.run(search.Engine(study, blocks_per_step=2), progress=False)
    assert_same_sweep(small, result, rtol=1e-6)


def test_variadic_reduce_matches_numpy():
    """search.reduce.variadic_reduce (several reductions as one, for XLA:CPU's compile time)
    against numpy, over every axis, some axes, and axes longer than 32."""
    rng = np.random.default_rng(0)
    i = rng.integers(-5, 5, (3, 70, 40)).astype(np.int32)
    f = rng.normal(size=(3, 70, 40)).astype(np.float32)
    m = f > 0.5
    for axis in (None, 1, (0, 2), -1):
        got = search.reduce.variadic_reduce([("sum", i), ("max", f), ("min", f), ("any", m), ("sum", m), ("min", m)],
                                            axis)
        want = [i.sum(axis), f.max(axis), f.min(axis), m.any(axis), m.sum(axis), m.all(axis)]
        for g, w in zip(got, want):
            np.testing.assert_array_equal(np.asarray(g), w)
    assert got[4].dtype == np.int32  # booleans are counted as int32


def test_hoisted_outer_part_gives_the_same_result(study, engine, result, monkeypatch):
    """The operator tables built apart (search.served.served_tables:
    compiled apart and run once per outer point, the default here) and
    priced in the step, against one program that evaluates everything per
    block: the same configurations, numbers to float32 rounding."""
    assert engine._hoisted is not None and len(engine._tables) > 0
    assert all(t.shape[0] == engine.grid.n_outer for t in engine._tables)  # one row per outer point
    monkeypatch.setattr(search.engine, "HOIST_BYTES", 0)
    whole = search.Engine(study)
    res = search.run(whole, progress=False)
    assert whole._hoisted is None and whole._tables == ()
    assert_same_sweep(res, result, rtol=1e-6)


def test_fast_compile_is_automatic_for_small_studies_without_hardware_axes(study):
    """engine.fast_compile unset: on for a small study without hardware axes
    (its step is evaluate batched over outer points), off with hardware axes;
    the study's setting or the caller's wins."""
    axes = {"tp": [1, 2, 4], "batch": {"pow2": [1, 8]}}
    outer_only = study_from_dict({**STUDY, "axes": axes})
    assert study.fast_compile is None and not search.Engine(study).fast_compile
    assert search.Engine(outer_only).fast_compile
    assert not search.Engine(outer_only, fast_compile=False).fast_compile
    off = study_from_dict({**STUDY, "axes": axes, "engine": {**STUDY["engine"], "fast_compile": False}})
    assert not search.Engine(off).fast_compile


def test_study_without_hardware_axes_matches_python_loop():
    """Only outer axes (one hardware point): blocks of outer points, on the
    engine's shard_map path, against jitted evaluate one configuration at a time."""
    axes = {"tp": [1, 2, 4], "batch": {"pow2": [1, 8]}}
    # A TPOT bound at the median of the configurations' own TPOTs, so that
    # it passes some and fails others whatever the calibration moves them to.
    slo = float(np.median([r["tpot"] for r in _python_loop(study_from_dict({**STUDY, "axes": axes}))]))
    st = study_from_dict({**STUDY, "axes": axes, "constraints": {**STUDY["constraints"], "tpot": slo}})
    res = search.run(search.Engine(st, block=8), progress=False)
    ok = [r for r in _python_loop(st, slo) if r["ok"]]
    assert res.counts[0] == st.size == 24 and res.counts[2] == len(ok) > 0
    assert list(res.top["index"]) == [r["flat"] for r in sorted(ok, key=lambda r: (-r["tpc"], r["flat"]))[:7]]
