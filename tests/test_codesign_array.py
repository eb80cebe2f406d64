"""Co-design in the array space (jaxplat.design.spaces): systolic array rows,
cols, cores and SRAM per core as continuous variables, rounded and
re-checked in exact mode, against the grid oracle.

Problems use the genz profile (the same code paths, a smaller program to
compile) on the Case Study IV NPU (ws, 1 GHz)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxplat as jp
from jaxplat.design import codesign as cd
from jaxplat.design import spaces
from jaxplat.design.codesign_study import problem_from_dict
from jaxplat.specs import SpecError, read_yaml, resolve
from jaxplat.specs.units import DTYPES

STUDY = {
    "model": "llama-2-7b", "workload": "chatbot", "technology": "n5", "hbm": "hbm3e", "base": "npu-case-study-iv",
    "profile": "genz", "objective": "cost_per_mtok",
    "params": {"rows": [16, 256], "cols": [16, 256], "cores": [1, 100], "sram_per_core": [2.5e5, 1.6e7],
               "hbm_stacks": 2, "link_bw": 6.4e10},
    "candidates": {"tp": [1], "batch": [8]},
}


@pytest.fixture(scope="module")
def prob():
    p, _ = problem_from_dict(STUDY)
    # SLOs out of the way: the objective alone decides (cost per token of an 8-sequence batch)
    wl = jp.replace(p.workload, ttft_slo=100.0, tpot_slo=100.0)
    return cd.Problem(model=p.model, workload=wl, base=p.base, tech=p.tech, lo=p.lo, hi=p.hi, cand=p.cand,
                      valid=p.valid, objective=p.objective, profile=p.profile, space=p.space)


def test_study_builds_the_array_space(prob):
    assert prob.space == "array" and prob.params == spaces.SPACES["array"]
    x = jnp.array([128.0, 64.0, 4.0, 2e6, 2.0, 6.4e10])
    hw = cd.design_hardware(x, prob)
    # peak 2 x 128 x 64 x 4 x 1 GHz = 65.536 TFLOP/s (bf16); SRAM 4 x 2 MB
    assert float(hw.flops[DTYPES.index("bf16")]) == pytest.approx(6.5536e13)
    assert (float(hw.array_rows), float(hw.array_cols), float(hw.cores)) == (128.0, 64.0, 4.0)
    assert float(hw.sram_size) == pytest.approx(8e6) and hw.dataflow == "ws"
    # each core adds the technology's area_per_core (0.5 mm² at N5) to the die
    one, four = (float(cd.design_numbers(x.at[2].set(n).at[1].set(256.0 / n), prob)[0]) for n in (1.0, 4.0))
    assert four - one == pytest.approx(3 * 0.5 + 3 * 2e6 * float(prob.tech.area_per_sram_byte), rel=1e-4)


def test_loss_gradient_matches_finite_differences(prob):
    z = jnp.log(jnp.array([90.0, 150.0, 3.0, 1.5e6, 2.0, 6.4e10], jnp.float32))
    vg = jax.jit(jax.value_and_grad(lambda z: cd.loss_fn(z, prob, 0.3, 20.0, 8.0, 10.0)))
    g = np.asarray(vg(z)[1])
    h = 1e-2
    fd = np.array([(float(vg(z.at[i].add(h))[0]) - float(vg(z.at[i].add(-h))[0])) / (2 * h) for i in range(6)])
    assert np.all(np.isfinite(g))
    np.testing.assert_allclose(g, fd, rtol=0.05, atol=2e-3)
    assert abs(g[0]) > 1e-2 and abs(g[1]) > 1e-2 and abs(g[2]) > 1e-2  # the array shape matters


def test_codesign_core_count_matches_grid(prob):
    """64x64 arrays, 2 MB each: how many cores? More cores shorten the
    fill-dominated decode GEMMs until the step is memory bound, and each
    costs die area. The gradient answer, rounded and re-checked, is the grid
    oracle's over every core count 1..100 (to 0.2%, within two cores)."""
    lo, hi = np.array(prob.lo), np.array(prob.hi)
    lo[:2] = hi[:2] = 64.0
    lo[3] = hi[3] = 2e6
    p = cd.Problem(model=prob.model, workload=prob.workload, base=prob.base, tech=prob.tech, lo=lo, hi=hi,
                   cand=prob.cand, valid=prob.valid, objective=prob.objective, profile=prob.profile, space="array")
    axes = cd.grid_axes(p, {"cores": 100})
    np.testing.assert_array_equal(axes[2], np.arange(1.0, 101.0))  # every core count
    xs = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, 6).astype(np.float32)
    grid = cd.exact_objectives(xs, p)[:, 0]
    best = int(np.argmin(grid))
    assert 2 < xs[best, 2] < 99  # an interior optimum, not a corner of the box
    res = cd.codesign(p, starts=4, steps=80)
    assert float(res.x[2]) == pytest.approx(xs[best, 2], abs=2)
    assert res.objective == pytest.approx(float(grid[best]), rel=2e-3)
    assert res.objective >= float(grid[best]) * (1 - 1e-6)  # the grid covers every integer: nothing beats it


def test_round_starts_rounds_every_integer_variable(prob):
    xs = cd.round_starts(np.log([[90.4, 150.6, 3.2, 1.5e6, 2.0, 6.4e10]]), prob)
    # floor and ceil, and for the array's sides the powers of two around them (folds without a ragged pass)
    assert set(np.unique(xs[:, 0])) == {64.0, 90.0, 91.0, 128.0}
    assert set(np.unique(xs[:, 1])) == {128.0, 150.0, 151.0, 256.0}
    assert set(np.unique(xs[:, 2])) == {2.0, 3.0, 4.0}
    assert np.all(xs[:, 3] == np.float32(1.5e6))  # SRAM stays continuous


def test_array_study_errors_are_one_line():
    for bad, word in (({"params": {"rows": [16, 256], "flops": [1e14, 1e15]}}, "mix"),
                      ({"params": {"rows": [16, 256]}, "base": "h100-sxm"}, "systolic"),
                      ({"grid": {"flops": 4}}, "flops")):
        with pytest.raises(SpecError) as e:
            problem_from_dict({**STUDY, **bad})
        assert word in str(e.value) and "\n" not in str(e.value)


def test_shipped_array_study_loads():
    d = read_yaml(resolve("studies", "codesign-npu-array"))
    # the fixture's profile and candidates: the candidate check reuses its compiled program
    p, run = problem_from_dict({**d, "profile": "genz", "candidates": STUDY["candidates"]})
    assert p.space == "array" and run["grid"]["rows"] == 9 and p.params[:3] == ("rows", "cols", "cores")
    assert float(p.lo[2]) == 1.0 and float(p.hi[2]) == 64.0


def test_written_chip_spec_has_the_array(prob):
    """`jaxplat codesign` writes the design as a hardware YAML with a compute
    block: it loads back as the same array, SRAM and HBM."""
    from jaxplat.cli.codesign import chip_spec
    from jaxplat.model import hardware_from_dict

    x = jnp.array([96.0, 160.0, 6.0, 3e6, 2.0, 6.4e10])
    hw = cd.design_hardware(x, prob)
    back = hardware_from_dict(chip_spec(hw, np.asarray(x), prob, "npu-case-study-iv", "npu-x"))
    assert (back.dataflow, float(back.array_rows), float(back.array_cols), float(back.cores)) == ("ws", 96, 160, 6)
    assert float(back.sram_size) == pytest.approx(1.8e7) and float(back.mem_bw[0]) == pytest.approx(float(hw.mem_bw[0]))
    assert float(back.flops[DTYPES.index("bf16")]) == pytest.approx(2 * 96 * 160 * 6 * 1e9)
