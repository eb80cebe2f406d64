"""Derivatives of the cost model with respect to every hardware number are
finite and equal central finite differences of the same function (issue 16:
forward-mode sensitivities of TPOT, throughput, energy and cost were NaN for
Llama-3.1-70B on H100 at tp 8), and JSON output holds no bare NaN/Infinity.

One compiled program per case: the derivative along every hardware number
(`codesign.hardware_numbers`, log scale: elasticities d log metric / d log
number) is a `jax.jvp` vmapped over the one-hot tangent directions, and over
tp = 1, 2, 8 (tp is a traced leaf); the finite-difference points are one more
vmapped evaluation in the same program. As in `codesign.elasticities`, the
chip is closed over and the derivative taken at the constant point 0: XLA
then folds the primal into constants, which is how the NaN showed. (The same
derivative with the chip passed as an argument, or with its primal batched
together with the finite-difference points, was finite even before the fix:
keep this shape.)

Finite differences in float32: central, step h = 1e-3 in log space. Each
log-metric is computed to ~1e-6 (float32 rounding over a few hundred rows),
so the difference quotient carries ~1e-6 / h = 1e-3 of rounding error at
worst (2.6e-4 seen); the truncation error h²·f'''/6 is ~1e-6 for these
smooth functions (smooth mode's p = 20 maxima included). Hence
|autodiff - fd| <= 2e-3 + 2e-2·|fd| on elasticities of order 0.01-1; a
missing or wrong term is far larger.

Kinks: in exact mode max/min are one-sided at ties. The one tie these points
sit on is the network domain: at tp = 8 on an 8-GPU NVLink domain the tensor
group exactly fills it (min(n, domain) and "the domain holds the group"
switch there, so the metric is not differentiable in net_domain at that
point); those entries are checked for finiteness only. Every other entry is
compared: no other max sits within h of a tie at these points.
"""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxplat as jp
from jaxplat.design import codesign as cd
from jaxplat.design import sensitivity
from jaxplat.report import finite_or_none, json_text

FIELDS = ("ttft", "tpot", "throughput", "energy_per_token_j", "power_w", "cost_per_mtok_usd", "memory_bytes")
TPS = (1.0, 2.0, 8.0)
H = 1e-3  # finite-difference step in log space
ATOL, RTOL = 2e-3, 2e-2

# (model, profile, smooth): dense, MoE and MLA (genz refuses MLA), exact and
# smooth. Each case is one compile; tp is vmapped inside it.
CASES = [
    ("llama-3.1-70b", "default", False),
    ("llama-3.1-70b", "default", True),
    ("llama-3.1-70b", "genz", False),
    ("mixtral-8x7b", "default", False),
    ("mixtral-8x7b", "genz", True),
    ("deepseek-v3", "default", False),
]


def _strict_loads(s: str):
    def refuse(name):
        raise ValueError(f"non-standard JSON constant {name}")
    return json.loads(s, parse_constant=refuse)


def sensitivities(model, hw, wl, opts, reverse=False):
    """(labels, jvp [T, N, M], fd [T, N, M], vjp [T, N] or None): d log
    metric / d log number for tp in TPS, N hardware numbers, M = FIELDS; the
    reverse-mode check is one vector-Jacobian product, its cotangent the
    metrics weighted 1..M (the gradient of that one combination, which the
    forward-mode Jacobian gives too)."""
    numbers = cd.hardware_numbers(model, hw, jp.Parallel(), wl, opts)
    n = len(numbers)
    tps = jnp.asarray(TPS, jnp.float32)

    def logm(s, tp):
        m = jp.evaluate(model, cd._scaled(hw, numbers, s), jp.Parallel(tp=tp), wl, opts)
        return jnp.log(jnp.stack([getattr(m, k) for k in FIELDS]))

    def per_tp(eye, tp):
        tangent = jax.vmap(lambda e: jax.jvp(lambda s: logm(s, tp), (jnp.zeros(n),), (e,))[1])(eye)
        pts = jax.vmap(lambda s: logm(s, tp))(jnp.concatenate([H * eye, -H * eye]))
        weights = jnp.arange(1.0, len(FIELDS) + 1.0)
        rev = jax.grad(lambda s: jnp.dot(weights, logm(s, tp)))(jnp.zeros(n)) if reverse else jnp.zeros(())
        return tangent, (pts[:n] - pts[n:]) / (2.0 * H), rev

    g, fd, rev = jax.jit(lambda eye: jax.vmap(lambda tp: per_tp(eye, tp))(tps))(jnp.eye(n, dtype=jnp.float32))
    return [x[0] for x in numbers], np.asarray(g), np.asarray(fd), (np.asarray(rev) if reverse else None)


# Whole-number structure of the chip (SMs, GEMM tile sides): a finite
# difference of 1e-3 in log space straddles the staircase; only finiteness is checked.
STAIRCASES = sensitivity.STAIRCASES


def _kink(label, tp, hw):
    """The metric is not differentiable in this number at this tp (see the module docstring)."""
    if label in STAIRCASES:
        return True
    if label.startswith("network.domain["):
        return tp == float(hw.network.domain[int(label[len("network.domain["):-1])])
    return False


@pytest.mark.parametrize("model_name,profile,smooth", CASES,
                         ids=[f"{m}-{p}-{'smooth' if s else 'exact'}" for m, p, s in CASES])
def test_derivatives_finite_and_match_finite_differences(model_name, profile, smooth):
    model, hw, wl = jp.load_model(model_name), jp.load_hardware("h100-sxm"), jp.load_workload("chatbot")
    reverse = (model_name, profile, smooth) == CASES[0]  # the reported case, also in reverse mode
    labels, g, fd, rev = sensitivities(model, hw, wl, jp.Options(profile=profile, smooth=smooth), reverse)
    assert "memory.bandwidth[0]" in labels and "network.bandwidth[0]" in labels and "cost.price" in labels
    bad = [(TPS[t], labels[i], FIELDS[j]) for t, i, j in zip(*np.nonzero(~np.isfinite(g)))]
    assert not bad, f"{len(bad)} non-finite derivatives, e.g. {bad[:4]}"
    assert np.isfinite(fd).all()
    for t, tp in enumerate(TPS):
        keep = np.array([not _kink(lab, tp, hw) for lab in labels])
        err = np.abs(g[t] - fd[t]) - (ATOL + RTOL * np.abs(fd[t]))
        worst = np.unravel_index(np.argmax(np.where(keep[:, None], err, -np.inf)), err.shape)
        assert err[worst] <= 0, (f"tp={tp:g} d log {FIELDS[worst[1]]} / d log {labels[worst[0]]}: "
                                 f"autodiff {g[t][worst]:.5f}, finite difference {fd[t][worst]:.5f}")
        # Not vacuous: decode is memory bound here, and capex drives the cost.
        assert g[t, labels.index("memory.bandwidth[0]"), FIELDS.index("tpot")] < -0.2
        assert g[t, labels.index("cost.price"), FIELDS.index("cost_per_mtok_usd")] > 0.3
    if rev is not None:
        assert np.isfinite(rev).all()
        np.testing.assert_allclose(rev, g @ np.arange(1.0, len(FIELDS) + 1.0), atol=1e-4)


def test_elasticities_of_reported_case_are_finite():
    """`codesign.elasticities` itself (what `codesign` and the what-if
    experiment print) on the reported case: every entry finite, and equal to
    its own ±1% finite differences away from the net_domain kink and the
    staircases."""
    model, hw, wl = jp.load_model("llama-3.1-70b"), jp.load_hardware("h100-sxm"), jp.load_workload("chatbot")
    labels, metrics, grad, fd = cd.elasticities(model, hw, jp.Parallel(tp=8), wl, jp.Options())
    assert np.isfinite(grad).all() and np.isfinite(fd).all()
    smooth_rows = [i for i, lab in enumerate(labels) if not lab.startswith("network.domain") and lab not in STAIRCASES]
    # ±1% steps: truncation ~(0.01)²·f''' and a roofline row crossing within the step; 1e-2 bounds both here.
    np.testing.assert_allclose(grad[smooth_rows], fd[smooth_rows], atol=1e-2)
    # decode is memory bound: -0.28 with the shipped calibration (each kernel's
    # and each collective call's fixed latency take part of the step), below
    # -0.5 without them
    assert grad[labels.index("memory.bandwidth[0]"), metrics.index("tpot")] < -0.2


def test_numbers_include_the_peak_of_every_gemm_dtype():
    # FP4 GEMMs with an FP8 KV cache: attention runs in fp8 and the LM head and router in bf16
    # (efficiency.row_dtypes), so those peaks are sensitivities too; a bf16 workload has one.
    # GenZ's profile runs every row at the compute dtype's peak: the others would have zero
    # elasticity there, so they are not listed.
    from jaxplat.model import workload_from_dict

    hw = jp.load_hardware("b200")
    model = jp.load_model("qwen3-30b-a3b")

    def peaks(dtype, profile="default"):
        wl = workload_from_dict({"batch": 1, "prompt": 8, "output": 2, "dtype": dtype})
        numbers = sensitivity.hardware_numbers(model, hw, jp.Parallel(), wl, jp.Options(profile=profile))
        return {label for label, field, _ in numbers if field == "chip.flops"}

    fp4 = {"weights": "fp4", "activations": "fp4", "kv": "fp8"}
    assert peaks(fp4) == {"chip.flops[fp4]", "chip.flops[fp8]", "chip.flops[bf16]"}
    assert peaks("bf16") == {"chip.flops[bf16]"}
    assert peaks(fp4, "genz") == {"chip.flops[fp4]"}


def test_json_text_is_strict():
    obj = {"a": float("nan"), "b": [1.0, float("inf"), -float("inf")], "c": np.float32(np.nan),
           "d": np.array([1.5, np.nan]), "e": (np.int64(3), True, None, "x"), "f": np.float64(2.0)}
    with pytest.raises(ValueError):
        _strict_loads(json.dumps({"a": float("nan")}))  # what json.dumps alone writes: bare NaN
    out = _strict_loads(json_text(obj))
    assert out == {"a": None, "b": [1.0, None, None], "c": None, "d": [1.5, None], "e": [3, True, None, "x"],
                   "f": 2.0}
    assert finite_or_none({"k": 1.0}) == {"k": 1.0}


def test_codesign_json_is_strict(tmp_path, monkeypatch, capsys):
    """`codesign --json` writes strict JSON even when a number is not finite:
    the optimizer and the sensitivities are stubbed (NaN and inf injected),
    the rest of the command runs as it is."""
    import yaml

    from jaxplat.cli import main

    study = {"model": "llama-2-7b", "workload": "chatbot", "technology": "n5", "hbm": "hbm3e",
             "base": "h100-sxm", "profile": "genz", "objective": "cost_per_mtok",
             "params": {"flops": [1e14, 1e15], "sram": [8e6, 1.28e8], "hbm_stacks": [1, 8],
                        "link_bw": [5e10, 1e12]},
             "candidates": {"tp": [1, 2], "batch": [1]}}
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(study))
    steps = 3
    traj = {"loss": np.zeros((steps, 1)), "x": np.ones((steps, 1, 4)), "z": np.zeros((steps, 1, 4)),
            **{k: np.ones(steps) for k in ("tau", "hinge", "sharpness", "penalty")}}
    x = np.array([5e14, 3.2e7, 5.0, 4e11], np.float32)
    monkeypatch.setattr(cd, "codesign", lambda prob, **kw: cd.Result(x=x, candidate=0, objective=float("nan"),
                                                                     evaluations=1, trajectory=traj))

    def elasticities(*a, **kw):
        return ["flops[bf16]", "cost.price"], ["tpot", "cost_per_mtok_usd"], np.array([[np.nan, 0.0], [np.inf, 1.0]]), \
            np.zeros((2, 2))
    monkeypatch.setattr(cd, "elasticities", elasticities)
    assert main(["codesign", str(path), "--json", "--no-grid", "--out", str(tmp_path / "out")]) == 0
    out = _strict_loads(capsys.readouterr().out)
    assert out["objective"] is None and out["sensitivities"]["flops[bf16]"] == {"tpot": None, "cost_per_mtok_usd": 0.0}
    assert out["sensitivities"]["cost.price"]["tpot"] is None and out["metrics"]["tpot"] > 0


def test_estimate_json_is_strict(capsys):
    from jaxplat.cli import main

    main(["estimate", "--model", "llama-2-7b", "--hardware", "h100-sxm", "--profile", "genz", "--json"])
    out = _strict_loads(capsys.readouterr().out)
    assert out["tpot_s"] > 0


def test_staircase_numbers_are_reported_over_a_whole_step():
    """The SM count enters through ceilings (waves of tiles over the SMs), so
    its autodiff derivative describes no real chip (0.85 for TTFT on Llama-3.1-8B
    at batch 1 on an H100, where one SM more or less moves TTFT by -0.007%
    per %). `elasticities` reports it, in both columns, as the central
    difference from 131 to 133 SMs, and says so; worked here from two
    evaluations of the chip with 131 and 133 SMs. Tolerance: each log-metric
    carries ~3-4e-7 of float32 rounding (the two programs sum in different
    orders), divided by the step's log-width log(133/131) = 0.015: ~3e-5 on
    each elasticity (throughput's came out 2.5e-5 apart once attention's
    exponentials added terms), against the autodiff slope's 0.85."""
    model, hw, wl = jp.load_model("llama-3.1-8b"), jp.load_hardware("h100-sxm"), jp.load_workload("chatbot")
    labels, metrics, grad, fd = cd.elasticities(model, hw, jp.Parallel(), wl, jp.Options())
    methods = dict(zip(labels, cd.elasticity_methods(labels)))
    assert methods["chip.units"] == sensitivity.DISCRETE_METHOD and methods["memory.bandwidth[0]"] == sensitivity.AUTODIFF_METHOD
    assert all(methods[lab] == sensitivity.DISCRETE_METHOD for lab in STAIRCASES if lab in labels)
    u = float(hw.units)
    assert u == 132.0

    def logm(units):
        m = jp.evaluate(model, jp.replace(hw, units=jnp.float32(units)), jp.Parallel(), wl, jp.Options())
        return np.log([float(getattr(m, k)) for k in metrics])
    by_hand = (logm(u + 1) - logm(u - 1)) / (np.log(u + 1) - np.log(u - 1))
    row = labels.index("chip.units")
    np.testing.assert_allclose(grad[row], by_hand, rtol=0, atol=3e-5)
    np.testing.assert_allclose(fd[row], grad[row])
    assert abs(by_hand[metrics.index("ttft")]) < 0.05  # a staircase's step, not the straight-through slope
