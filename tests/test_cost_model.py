"""The one-chip cost model: hand-worked anchors, the closed-form decode sum,
monotonicity, gradients, precision and compilation count."""

import functools
import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import assert_trees_close, compile_events, workload

import jaxplat as jp
from jaxplat.cli import main
from jaxplat.cost import build_table
from jaxplat.cost.inference import row_decode_sums, row_step_times
from jaxplat.model import param_count, replace

# tdp_w far above any draw: these tests isolate the roofline, not the power limit
NO_SRAM_CHIP = dict(memory=[{"name": "hbm", "size": 80e9, "bandwidth": 2e12}],
                    network=[{"domain": 8, "bandwidth": 450e9, "latency": 1e-6}], tdp_w=1e9)


def memory_bound_chip():
    """A chip so fast at math that every operator is memory-bound."""
    return jp.model.hardware_from_dict({**NO_SRAM_CHIP, "flops": {"bf16": 1e20}})


def test_batch1_decode_step_is_weight_bytes_over_bandwidth(llama7b):
    # Hand anchor: at batch 1 with a tiny context, one decode step reads every
    # weight once: 2 bytes x 6.74e9 parameters (embedding row aside) / 2e12 B/s.
    hw = memory_bound_chip()
    wl = workload(batch=1, prompt=1, output=2)
    m = jp.evaluate(llama7b, hw, jp.Parallel(), wl)
    params = float(param_count(llama7b))
    assert abs(params - 6.738e9) / 6.738e9 < 1e-3
    read = 2.0 * (params - 32000 * 4096)  # the embedding table is gathered, not streamed
    assert float(m.tpot) == pytest.approx(read / 2e12, rel=2e-3)
    assert float(m.weights_bytes) == pytest.approx(2.0 * params, rel=1e-6)


def test_prefill_flops_match_2_params_per_token(llama7b):
    # Hand anchor: a forward pass costs 2 FLOPs per weight per token plus
    # attention: 4 * layers * prompt^2/2 * hidden (causal, QK^T and PV).
    T = 512
    t = build_table(llama7b, jp.Parallel(), workload(batch=1, prompt=T, output=1), "prefill", jp.Options())
    flops = float(jnp.sum(t.count * t.f0))
    gemm = 2.0 * T * (float(param_count(llama7b)) - 32000 * 4096 * 2) + 2.0 * 4096 * 32000  # head: last token
    attn = 32 * 2 * 2 * 4096 * T * (T + 1) / 2
    elementwise = flops - gemm - attn
    assert 0 <= elementwise < 1e-3 * flops


def test_beams_by_hand_in_the_default_profile(llama70b, h100):
    """Beam search, 2 prompts x 4 beams of Llama-3.1-70B (tp = 8: one KV head
    per chip), prompt 1000, output 100: the prompt is prefilled once per
    sequence and its KV cache read once per sequence per step (beams share
    it); each beam attends over it and over its own generated tokens."""
    b, beams, P, O, tp = 2, 4, 1000, 100, 8
    wl = workload(batch=b, beams=beams, prompt=P, output=O)
    par = jp.Parallel(tp=tp)
    h, Dq, L = 64 // tp, 128, 80
    dec = build_table(llama70b, par, wl, "decode", jp.Options())
    idx = {n: i for i, n in enumerate(dec.names)}
    pre, suf = idx["logit_prefix"], idx["logit_suffix"]
    assert float(dec.w0[pre]) == pytest.approx(b * P * Dq * 2.0, rel=1e-6)         # K of the prompt, once per sequence
    assert float(dec.f0[pre]) == pytest.approx(2 * b * beams * h * Dq * P, rel=1e-6)  # every beam's scores
    assert float(dec.w1[suf]) == pytest.approx(b * beams * Dq * 2.0, rel=1e-6)      # each beam's own tokens
    assert float(dec.m[idx["qkv"]]) == b * beams  # one query token per beam
    one = build_table(llama70b, par, replace(wl, beams=1.0), "prefill", jp.Options())
    four = build_table(llama70b, par, wl, "prefill", jp.Options())
    np.testing.assert_array_equal(np.asarray(four.f0), np.asarray(one.f0))  # prefill: once per sequence
    m = jp.evaluate(llama70b, h100, par, wl)
    assert float(m.kv_bytes) == pytest.approx(L * 2 * Dq * (b * P + b * beams * O) * 2.0, rel=1e-6)
    assert float(m.throughput) == pytest.approx(b * O / float(m.e2e), rel=1e-6)  # tokens of the chosen beams


def test_sum_of_max_over_steps_equals_a_loop():
    """The closed form of sum_s max(c0 + c1 s, m0 + m1 s), split at each row's
    crossover, against a plain loop over s, on rows that cross inside the
    range, cross outside it, or never cross."""
    from jaxplat.cost.roofline import sum_max_affine

    rng = np.random.default_rng(0)
    c0, m0 = rng.uniform(0, 1, 64), rng.uniform(0, 1, 64)
    c1, m1 = rng.uniform(-0.01, 0.01, 64) + 0.01, rng.uniform(0, 0.02, 64)
    s = np.arange(1, 300)[:, None]
    loop = np.maximum(c0 + c1 * s, m0 + m1 * s).sum(0)
    crossing = np.sign(c0 - m0) != np.sign(c0 + c1 * 299 - m0 - m1 * 299)
    assert 10 < crossing.sum() < 54  # both kinds of rows are there
    got = sum_max_affine(*(jnp.asarray(x, jnp.float32) for x in (c0, c1, m0, m1)), 1.0, 299.0)
    np.testing.assert_allclose(np.asarray(got), loop, rtol=1e-5)


@functools.partial(jax.jit, static_argnames="opts")
def _decode_sum_and_steps(table, hw, wl, steps, opts=jp.Options()):
    """The closed-form decode sum and, as a slow reference, every step's time
    one by one (s = 1 ... output - 1, padded to `steps` entries)."""
    closed = jnp.sum(table.count * row_decode_sums(table, hw, wl, opts, 1.0, wl.output - 1.0))
    one = lambda s: jnp.sum(table.count * row_step_times(table, hw, wl, opts, s))  # noqa: E731
    return closed, jax.lax.map(one, steps)


@pytest.mark.parametrize("gemm_overlap", [0.0, 3.0])
def test_closed_form_decode_equals_per_token_loop(llama70b, h100, gemm_overlap):
    """The closed-form decode sum equals the step-by-step loop, at the roofline's max (shipped) and with the
    weight GEMMs' rows at a 3-norm (efficiency.overlap_decode_sums: their times do not grow with the KV)."""
    hw, opts = h100, jp.Options(gemm_overlap=gemm_overlap)
    for batch, prompt, output in ((1, 128, 64), (64, 2000, 300), (256, 10, 1000)):
        wl = workload(batch=batch, prompt=prompt, output=output)
        par = jp.Parallel(tp=8)
        table = build_table(llama70b, par, wl, "decode", opts)
        closed, per_step = _decode_sum_and_steps(table, hw, wl, jnp.arange(1.0, 1000.0), opts)
        loop = float(np.sum(np.asarray(per_step, np.float64)[: output - 1]))  # steps s = 1 ... output - 1
        assert float(closed) == pytest.approx(loop, rel=2e-5)
        m = jp.evaluate(llama70b, hw, par, wl, opts)
        # TPOT adds the engine's time per iteration to the kernels': its time per step, and per doubling
        # of the tensor-parallel ranks (3 at tp 8)
        step = float(hw.iteration_overhead) + 3.0 * float(hw.rank_overhead)
        assert float(m.tpot) == pytest.approx(loop / (output - 1) + step, rel=2e-5)


def test_faster_memory_or_compute_is_never_slower(llama70b, h100, chatbot):
    key = jax.random.PRNGKey(0)
    for _ in range(5):
        key, k1, k2 = jax.random.split(key, 3)
        scale_bw = 1.0 + 3.0 * float(jax.random.uniform(k1))
        scale_f = 1.0 + 3.0 * float(jax.random.uniform(k2))
        base = jp.evaluate(llama70b, h100, jp.Parallel(tp=8), chatbot)
        fast_mem = jp.evaluate(llama70b, replace(h100, mem_bw=h100.mem_bw * scale_bw), jp.Parallel(tp=8), chatbot)
        fast_fl = jp.evaluate(llama70b, replace(h100, flops=h100.flops * scale_f), jp.Parallel(tp=8), chatbot)
        for faster in (fast_mem, fast_fl):
            assert float(faster.ttft) <= float(base.ttft) * (1 + 1e-6)
            assert float(faster.tpot) <= float(base.tpot) * (1 + 1e-6)


def test_smooth_gradients_match_finite_differences(llama70b, h100, chatbot):
    """d log(TPOT x TTFT) / d log(HBM bandwidth, FLOP/s) in smooth mode against
    central differences of the same function (evaluate itself, one compile)."""
    opts, par = jp.Options(smooth=True), jp.Parallel(tp=8)

    def log_latency(x):  # x: log HBM bandwidth, log FLOP/s scale
        hw = replace(h100, mem_bw=h100.mem_bw.at[0].set(jnp.exp(x[0])), flops=h100.flops * jnp.exp(x[1]))
        m = jp.evaluate(llama70b, hw, par, chatbot, opts)
        return jnp.log(m.tpot) + jnp.log(m.ttft)

    x = jnp.stack([jnp.log(h100.mem_bw[0]), jnp.float32(0.0)])
    g = np.asarray(jax.jit(jax.grad(log_latency))(x))
    h = 1e-2
    fd = [(float(log_latency(x.at[i].add(h))) - float(log_latency(x.at[i].add(-h)))) / (2 * h) for i in range(2)]
    np.testing.assert_allclose(g, fd, rtol=2e-2, atol=2e-2)
    assert np.all(np.isfinite(g)) and np.all(g < 0)  # both speed it up


def test_smooth_approaches_exact(llama70b, h100):
    # The p-norm roofline max is never below the exact max; the other smooth
    # twins can be: tile quantization's smooth ceil pays for fewer tiles (this
    # decode's 160 rows: 1.25 tiles of 128, not 2), and the power limit's
    # (inference.larger_weights) is a weighted mean near its crossover. Both
    # off here: no tile structure, no TDP.
    h100 = replace(h100, tdp=0.0, units=0.0)
    wl = workload(batch=160, prompt=512, output=256)  # decode near the ridge point
    exact = jp.evaluate(llama70b, h100, jp.Parallel(tp=8), wl)
    errs = []
    for p in (4.0, 16.0, 64.0):  # Python floats, as the default sharpness: one compiled program
        sm = jp.evaluate(llama70b, h100, jp.Parallel(tp=8), wl, jp.Options(smooth=True), p)
        for k in ("ttft", "tpot"):
            assert float(getattr(sm, k)) >= float(getattr(exact, k)) * (1 - 1e-5)  # p-norm >= max
        errs.append(abs(float(sm.tpot) / float(exact.tpot) - 1))
    assert errs[0] > errs[1] > errs[2] and errs[2] < 3e-3


def test_infeasible_is_flagged_and_finite(llama7b, h100):
    m = jp.evaluate(llama7b, h100, jp.Parallel(tp=3), workload(batch=1, prompt=64, output=8))
    assert not bool(m.feasible)
    assert all(np.isfinite(float(v)) for v in jax.tree.leaves(m))
    big = jp.evaluate(jp.load_model("llama-3.1-405b"), h100, jp.Parallel(), workload(batch=1, prompt=64, output=8))
    assert not bool(big.fits) and not bool(big.feasible)


def test_one_compile_for_different_models_and_chips(h100):
    """`evaluate` compiles once for every dense and MoE model and every chip
    (all numbers are traced leaves; only the attention kind is static), and
    numbers given as JAX arrays (`jp.replace`, `jp.Parallel`) reuse it too:
    every leaf is a JAX float32 array however it was given (`jit` keys its
    programs on the argument's type as well: a NumPy scalar where a JAX
    array was would trace and compile again)."""
    wl = workload(batch=4, prompt=512, output=128)
    jp.evaluate(jp.load_model("llama-2-7b"), h100, jp.Parallel(tp=2), wl)  # compiles, unless an earlier test did
    with compile_events() as events:
        for model in ("llama-2-7b", "llama-3.1-70b", "mixtral-8x7b"):
            for chip in ("h100-sxm", "mi300x", "tpu-v5e"):
                m = jp.evaluate(jp.load_model(model), jp.load_hardware(chip), jp.Parallel(tp=2), wl)
                assert np.isfinite(float(m.tpot))
        assert isinstance(h100.chip.tile_m, jax.Array) and isinstance(jp.Parallel(tp=2).tp, jax.Array)
        arrays = jp.evaluate(jp.load_model("llama-2-7b"), jp.replace(h100, tile_m=jnp.asarray(h100.chip.tile_m)),
                             jp.Parallel(tp=jnp.float32(2.0)), wl)
        assert np.isfinite(float(arrays.tpot))
    assert events == []


def test_vmap_over_batch_equals_loop(llama70b, h100):
    wls = [workload(batch=b, prompt=1024, output=128) for b in (1, 8, 64)]
    stacked = jax.tree.map(lambda *x: jnp.stack(x), *wls)
    vm = jax.vmap(lambda w: jp.evaluate(llama70b, h100, jp.Parallel(tp=8), w))(stacked)
    for i, w in enumerate(wls):
        assert_trees_close(jax.tree.map(lambda x: x[i], vm), jp.evaluate(llama70b, h100, jp.Parallel(tp=8), w),
                           rtol=1e-6)


F64_SCRIPT = """
import json, jax, jax.numpy as jnp, jaxplat as jp
m, h, w = jp.load_model('llama-3.1-70b'), jp.load_hardware('h100-sxm'), jp.load_workload('summarization')
cast = lambda t: jax.tree.map(lambda x: jnp.asarray(x, jnp.float64), t)
r = jp.evaluate(cast(m), cast(h), cast(jp.Parallel(tp=8)), cast(w))
print(json.dumps({'dtype': str(r.tpot.dtype), 'metrics': {k: float(v) for k, v in vars(r).items()}}))
"""


def test_float32_agrees_with_float64(llama70b, h100):
    """The same evaluation in float64 (a process with JAX_ENABLE_X64=1) and here in float32."""
    env = {**os.environ, "JAX_ENABLE_X64": "1"}
    r = subprocess.run([sys.executable, "-c", F64_SCRIPT], capture_output=True, text=True, env=env, check=True)
    out = json.loads(r.stdout.strip().splitlines()[-1])
    m = jp.evaluate(llama70b, h100, jp.Parallel(tp=8), jp.load_workload("summarization"))
    assert out["dtype"] == "float64" and m.tpot.dtype == jnp.float32
    assert_trees_close({k: float(v) for k, v in vars(m).items()}, out["metrics"], rtol=2e-5)


def test_cli_json_carries_metrics_with_units(capsys):
    assert main(["estimate", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--workload", "chatbot",
                 "--batch", "4", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    m = jp.evaluate(jp.load_model("llama-3.1-8b"), jp.load_hardware("h100-sxm"), jp.Parallel(),
                    replace(jp.load_workload("chatbot"), batch=4.0))
    for key, f in (("ttft_s", "ttft"), ("tpot_s", "tpot"), ("e2e_s", "e2e"), ("throughput_tok_s", "throughput"),
                   ("weights_bytes", "weights_bytes"), ("kv_bytes", "kv_bytes"),
                   ("activation_bytes", "activation_bytes")):
        assert out[key] == pytest.approx(float(getattr(m, f)), rel=1e-6), key
    assert out["fits"] is True and out["feasible"] is True
    # chatbot: 1000 output tokens (2 beams: the chosen one counts); 4 x 1000 tokens over the end-to-end time
    assert out["e2e_s"] == pytest.approx(out["ttft_s"] + 999 * out["tpot_s"], rel=1e-5)
    assert out["throughput_tok_s"] == pytest.approx(4 * 1000 / out["e2e_s"], rel=1e-5)
    # Llama-3.1-8B: 8.03e9 bf16 weights; K and V of 8 heads x 128 in 32 layers for 4 prompts of
    # 3000 tokens and 4 x 2 beams of 1000
    assert out["weights_bytes"] == pytest.approx(2 * 8.03e9, rel=1e-3)
    assert out["kv_bytes"] == pytest.approx(32 * 2 * 8 * 128 * (4 * 3000 + 4 * 2 * 1000) * 2.0, rel=1e-6)
