"""The one-chip cost model: hand-worked anchors, the closed-form decode sum,
monotonicity, gradients, precision and compilation count."""

import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import jax.test_util  # noqa: F401  (check_grads)
import numpy as np
import pytest
from helpers import workload

import jaxplat as jp
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


def test_closed_form_decode_equals_per_token_loop(llama70b, h100):
    opts = jp.Options()
    for batch, prompt, output in ((1, 128, 64), (64, 2000, 300), (256, 10, 1000)):
        wl = workload(batch=batch, prompt=prompt, output=output)
        par = jp.Parallel(tp=8)
        table = build_table(llama70b, par, wl, "decode", opts)
        closed = jnp.sum(table.count * row_decode_sums(table, h100, wl, opts, 1.0, output - 1.0))
        step = jax.jit(lambda s: jnp.sum(table.count * row_step_times(table, h100, wl, opts, s)))
        loop = sum(float(step(jnp.float32(s))) for s in range(1, output))
        assert float(closed) == pytest.approx(loop, rel=2e-5)
        m = jp.evaluate(llama70b, h100, par, wl)
        assert float(m.tpot) == pytest.approx(loop / (output - 1), rel=2e-5)


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
    opts = jp.Options(smooth=True)

    def log_tpot(log_bw, log_flops):
        hw = replace(h100, mem_bw=h100.mem_bw.at[0].set(jnp.exp(log_bw)), flops=h100.flops * jnp.exp(log_flops))
        m = jp.evaluate(llama70b, hw, jp.Parallel(tp=8), chatbot, opts)
        return jnp.log(m.tpot) + jnp.log(m.ttft)

    x = (jnp.log(h100.mem_bw[0]), jnp.float32(0.0))
    jax.test_util.check_grads(log_tpot, x, order=1, modes=["fwd", "rev"], eps=1e-2, atol=2e-2, rtol=2e-2)
    g = jax.grad(log_tpot, argnums=(0, 1))(*x)
    assert all(np.isfinite(float(v)) and float(v) < 0 for v in g)  # both speed it up


def test_smooth_approaches_exact(llama70b, h100):
    wl = workload(batch=160, prompt=512, output=256)  # decode near the ridge point
    exact = jp.evaluate(llama70b, h100, jp.Parallel(tp=8), wl)
    errs = []
    for p in (4.0, 8.0, 16.0):
        sm = jp.evaluate(llama70b, h100, jp.Parallel(tp=8), wl, jp.Options(smooth=True), jnp.float32(p))
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


def test_one_trace_for_different_models_and_chips(h100):
    traces = 0

    @jax.jit
    def f(model, hw, par, wl):
        nonlocal traces
        traces += 1
        return jp.evaluate(model, hw, par, wl).tpot

    wl = workload(batch=4, prompt=512, output=128)
    for model in ("llama-2-7b", "llama-3.1-70b", "mixtral-8x7b"):  # dense and MoE share a structure
        for chip in ("h100-sxm", "mi300x"):
            f(jp.load_model(model), jp.load_hardware(chip), jp.Parallel(tp=2), wl)
    assert traces == 1


def test_vmap_over_batch_equals_loop(llama70b, h100):
    wls = [workload(batch=b, prompt=1024, output=128) for b in (1, 8, 64)]
    stacked = jax.tree.map(lambda *x: jnp.stack(x), *wls)
    vm = jax.vmap(lambda w: jp.evaluate(llama70b, h100, jp.Parallel(tp=8), w).tpot)(stacked)
    for i, w in enumerate(wls):
        assert float(vm[i]) == pytest.approx(float(jp.evaluate(llama70b, h100, jp.Parallel(tp=8), w).tpot), rel=1e-6)


F64_SCRIPT = """
import json, jax, jax.numpy as jnp, jaxplat as jp
m, h, w = jp.load_model('llama-3.1-70b'), jp.load_hardware('h100-sxm'), jp.load_workload('summarization')
out = {}
for name, dt in (('f32', jnp.float32), ('f64', jnp.float64)):
    cast = lambda t: jax.tree.map(lambda x: jnp.asarray(x, dt), t)
    r = jp.evaluate(cast(m), cast(h), cast(jp.Parallel(tp=8)), cast(w))
    out[name] = {k: float(v) for k, v in vars(r).items()}
    out[name + '_dtype'] = str(r.tpot.dtype)
print(json.dumps(out))
"""


def test_float32_agrees_with_float64():
    env = {**os.environ, "JAX_ENABLE_X64": "1"}
    r = subprocess.run([sys.executable, "-c", F64_SCRIPT], capture_output=True, text=True, env=env, check=True)
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["f64_dtype"] == "float64" and out["f32_dtype"] == "float32"
    for k, v64 in out["f64"].items():
        assert out["f32"][k] == pytest.approx(v64, rel=2e-5), k


def test_cli_json_carries_metrics_with_units():
    r = subprocess.run([sys.executable, "-m", "jaxplat.cli", "estimate", "--model", "llama-3.1-8b", "--hardware",
                        "h100-sxm", "--workload", "chatbot", "--batch", "4", "--json"],
                       capture_output=True, text=True, check=True)
    out = json.loads(r.stdout)
    for key in ("ttft_s", "tpot_s", "e2e_s", "throughput_tok_s", "weights_bytes", "kv_bytes", "activation_bytes"):
        assert out[key] > 0
    assert out["fits"] is True and out["feasible"] is True
    m = jp.evaluate(jp.load_model("llama-3.1-8b"), jp.load_hardware("h100-sxm"), jp.Parallel(),
                    replace(jp.load_workload("chatbot"), batch=4.0))
    assert out["tpot_s"] == pytest.approx(float(m.tpot), rel=1e-6)
    assert out["e2e_s"] == pytest.approx(out["ttft_s"] + 999 * out["tpot_s"], rel=1e-5)
