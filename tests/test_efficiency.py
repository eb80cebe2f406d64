"""Shape-dependent efficiency (jaxplat.cost.efficiency) and its spec blocks:
tile and wave quantization worked by hand, per-dtype peaks, attention at the
KV cache's precision, kernel and iteration latencies counted by hand, the
GenZ profile untouched, gradients against finite differences."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxplat as jp
from jaxplat.cost import build_table, quantization, row_components, row_rates
from jaxplat.model import Calibration, calibration_from_dict, hardware_from_dict, replace, workload_from_dict
from jaxplat.specs import SpecError
from jaxplat.specs.units import DTYPES

H100_STRUCTURE = dict(units=132.0, tile_m=128.0, tile_n=128.0, tile_k=64.0, tile_latency=0.0)


def test_quantization_hand_worked(h100):
    hw = replace(h100, **H100_STRUCTURE)
    # 8192^3: 64 x 64 tiles x 128 k-steps = 524288 k-loop iterations on 132
    # SMs: ceil(524288 / 132) = 3972 waves, so 524288 / (3972 x 132) useful.
    q = quantization(8192.0, 8192.0, 8192.0, 1.0, hw)
    np.testing.assert_allclose(q, 524288 / (3972 * 132), rtol=1e-6)
    # A decode GEMM with 8 rows pays for a 128-row tile (8 / 128) and for
    # ceil(1 x 64 x 128 / 132) = 63 waves of 132 SMs for 8192 iterations.
    q = quantization(8.0, 8192.0, 8192.0, 1.0, hw)
    np.testing.assert_allclose(q, (8 / 128) * 8192 / (63 * 132), rtol=1e-6)
    # 16 independent 3000 x 128 x 3000 GEMMs: 24 x 24 tiles x 2 k-steps x 16
    # = 18432 iterations, ceil(18432 / 132) = 140 waves, tiles padded to 3072.
    q = quantization(3000.0, 3000.0, 128.0, 16.0, hw)
    np.testing.assert_allclose(q, (3000 / 3072) ** 2 * 18432 / (140 * 132), rtol=1e-6)
    # no structure given: no quantization
    assert float(quantization(8.0, 8192.0, 8192.0, 1.0, replace(h100, units=0.0))) == 1.0


def test_tile_latency_weighs_most_on_short_and_narrow_k_loops(h100):
    # 128 x 16896 outputs = 132 tiles of 128 x 128, one per SM; K = 1024 is 16 k-steps of 64.
    # A k-step lasts 2 x 128 x 128 x 64 x 132 / 1e15 s = 0.2768 us at a 1e15 FLOP/s bf16 peak,
    # half that at 2e15 (fp8), a quarter at 4e15 (fp4). A tile latency of 4 bf16 k-steps is 4, 8
    # or 16 k-steps in those dtypes, stretching 16 to 20, 24 or 32: 16 / 20 of the paid work is
    # useful in bf16, 2 / 3 in fp8, 1 / 2 in fp4; without it, all of it.
    hw = replace(h100, **H100_STRUCTURE)
    step = 2 * 128 * 128 * 64 * 132 / 1e15
    slow = replace(hw, tile_latency=4 * step)
    for peak, useful in ((1e15, 16 / 20), (2e15, 2 / 3), (4e15, 1 / 2)):
        assert float(quantization(128.0, 16896.0, 1024.0, 1.0, hw, peak=peak)) == 1.0
        np.testing.assert_allclose(quantization(128.0, 16896.0, 1024.0, 1.0, slow, peak=peak), useful, rtol=1e-5)
    # It keeps a gradient in exact mode (the fit needs one): 16 / (16 + t / step) has
    # d/dt = -16 / (20^2 step) at t = 4 step.
    grad = jax.grad(lambda t: quantization(128.0, 16896.0, 1024.0, 1.0, replace(hw, tile_latency=t),
                                           peak=1e15))(4 * step)
    np.testing.assert_allclose(grad, -16 / (400 * step), rtol=1e-4)
    # A long k loop hides it: K = 16384 is 256 k-steps, 256 / 272 useful in fp4.
    np.testing.assert_allclose(quantization(128.0, 16896.0, 16384.0, 1.0, slow, peak=4e15), 256 / 272, rtol=1e-5)


def test_skinny_prefill_pays_its_own_row_tile(h100, llama7b):
    # A prompt of 8 tokens runs its GEMMs with 8-row tiles (small-M kernels:
    # efficiency.dense_tile_m), 1/16 of the paid work of a 128-token prompt
    # over the same tile columns and k-steps. (It was costed as a whole 128-row
    # tile, the same compute time as 128 tokens.)
    hw = replace(h100, **H100_STRUCTURE, kernel_latency=0.0)
    c = {}
    for p in (8.0, 128.0):
        wl = workload_from_dict({"batch": 1, "prompt": p, "output": 2})
        t = build_table(llama7b, jp.Parallel(), wl, "prefill", jp.Options())
        c0 = np.asarray(row_components(t, hw, wl, jp.Options())[0])
        c[p] = c0[list(t.names).index("qkv")]
    np.testing.assert_allclose(c[8.0], c[128.0] / 16, rtol=1e-5)


def test_dtype_peaks_and_attention_precision():
    b200 = replace(jp.load_hardware("b200"), units=0.0, eff_compute=0.8, eff_narrow=0.9, eff_fp4=0.7,
                   eff_attention=0.5, eff_attention_compute=0.6, kernel_latency=2e-6)
    model = jp.load_model("llama-3.1-8b")
    wl = workload_from_dict({"batch": 1, "prompt": 512, "output": 2,
                             "dtype": {"weights": "fp4", "activations": "fp4", "kv": "fp8"}})
    t = build_table(model, jp.Parallel(), wl, "prefill", jp.Options())
    peak, scale, lat = (np.asarray(x) for x in row_rates(t, b200, wl, jp.Options(), None))
    names = list(t.names)
    flops = np.asarray(b200.flops)
    # GEMMs in fp4: narrow (0.9) and FP4's own share of that (0.7), 0.8 x 0.9 x 0.7 of the fp4 peak
    np.testing.assert_allclose(peak[names.index("qkv")], flops[DTYPES.index("fp4")] * 0.8 * 0.9 * 0.7, rtol=1e-6)
    # attention at the KV cache's fp8 (wider than fp4): narrow only, its matmuls at 0.6 of a GEMM's rate,
    # its memory time at 1 / 0.5
    np.testing.assert_allclose(peak[names.index("logit")], flops[DTYPES.index("fp8")] * 0.8 * 0.9 * 0.6, rtol=1e-6)
    assert scale[names.index("logit")] == pytest.approx(2.0) and scale[names.index("qkv")] == 1.0
    # the LM head stays 16-bit in a quantized checkpoint: bf16 peak, no narrow derate
    np.testing.assert_allclose(peak[names.index("lm_head")], flops[DTYPES.index("bf16")] * 0.8, rtol=1e-6)
    # the fixed latency is paid per GEMM or attention kernel, not by element-wise rows
    assert lat[names.index("qkv")] == pytest.approx(2e-6) and lat[names.index("logit")] == pytest.approx(2e-6)
    assert set(np.unique(lat)) == {0.0, np.float32(2e-6)}


def test_quantized_checkpoints_keep_the_head_in_16_bits():
    # FP8 / NVFP4 checkpoints leave the LM head, the embedding and the MoE router unquantized
    # (ModelOpt's exclude_modules; Conventions.wide_head). By hand for Qwen3-30B-A3B (hidden 2048,
    # vocab 151936, 32 + 2 x 4 heads of 128, 128 experts, 48 layers) in fp8, one decode step of
    # 2 sequences on one chip: the head's and router's weights at 2 bytes and their GEMMs at the
    # bf16 peak, the rest at 1 byte and the fp8 peak; their FLOPs at bf16 J/FLOP; GenZ: 1 byte.
    from jaxplat.cost.energy import dynamic_energy

    model = jp.load_model("qwen3-30b-a3b")
    wl = workload_from_dict({"batch": 2, "prompt": 64, "output": 4, "dtype": "fp8"})
    hw = replace(jp.load_hardware("h100-sxm"), units=0.0, eff_compute=0.8, eff_narrow=0.9)
    t = build_table(model, jp.Parallel(), wl, "decode", jp.Options())
    names, w0 = list(t.names), np.asarray(t.w0)
    assert w0[names.index("lm_head")] == 2048 * 151936 * 2.0
    assert w0[names.index("router")] == 2048 * 128 * 2.0
    assert w0[names.index("embedding")] == 2 * 2048 * 2.0  # two rows looked up
    assert w0[names.index("qkv")] == 2048 * 40 * 128 * 1.0
    peak = np.asarray(row_rates(t, hw, wl, jp.Options(), None)[0])
    flops = np.asarray(hw.flops)
    np.testing.assert_allclose(peak[names.index("lm_head")], flops[DTYPES.index("bf16")] * 0.8, rtol=1e-6)
    np.testing.assert_allclose(peak[names.index("qkv")], flops[DTYPES.index("fp8")] * 0.8 * 0.9, rtol=1e-6)
    # J/FLOP at bf16 moves the energy by exactly the head's and the routers' FLOPs
    e = [float(dynamic_energy(t, replace(hw, energy_flop=hw.energy_flop.at[DTYPES.index("bf16")].set(x)), wl,
                              jp.Options(), 1.0, 0.0)) for x in (0.0, 1e-12)]
    wide_flops = 2 * (2048 * 151936 + 48 * 2048 * 128) * 2.0
    np.testing.assert_allclose((e[1] - e[0]) / 1e-12, wide_flops, rtol=1e-5)
    genz = build_table(model, jp.Parallel(), wl, "decode", jp.Options(profile="genz"))
    assert np.asarray(genz.w0)[list(genz.names).index("lm_head")] == 2048 * 151936 * 1.0


@pytest.fixture(scope="module")
def llama8b_evals(h100):
    model = jp.load_model("llama-3.1-8b")
    wl = workload_from_dict({"batch": 4, "prompt": 1024, "output": 64})
    run = lambda hw: jax.device_get(jp.evaluate(model, hw, jp.Parallel(), wl))  # noqa: E731
    return model, wl, run


def test_latencies_counted_by_hand(h100, llama8b_evals):
    _, _, run = llama8b_evals
    base = run(replace(h100, kernel_latency=0.0, iteration_overhead=0.0))
    tau, ovh = 1e-5, 2e-3
    got = run(replace(h100, kernel_latency=tau, iteration_overhead=ovh))
    # Llama-3.1-8B, per layer: qkv, out_proj, up_gate, down and one fused
    # attention kernel (scores, softmax and weighted sum: FlashAttention),
    # 5 kernels x 32 layers, plus the LM head: 161 kernels a pass (the old
    # count charged attention twice, 193); element-wise ops fused (the
    # fixture's hardware keeps the neutral 0 element-wise kernels); the engine
    # iteration adds its overhead once (prefill, and each step).
    assert float(h100.attention_kernels) == 1.0 and float(h100.elementwise_kernels) == 0.0
    kernels = 5 * 32 + 1
    np.testing.assert_allclose(got.ttft - base.ttft, kernels * tau + ovh, rtol=1e-4)
    np.testing.assert_allclose(got.tpot - base.tpot, kernels * tau + ovh, rtol=1e-3)


def test_collective_latency_counted_by_hand(h100):
    # Llama-3.1-8B over 2 and 8 chips of tensor parallelism (Megatron): two
    # all-reduces per layer (attention out, MLP down) x 32 layers, plus the
    # vocabulary-parallel embedding's all-reduce and the LM head's gather of
    # the logits: 66 collective calls a pass, each paying the fixed cost once
    # whatever the group; on one chip there are none.
    model = jp.load_model("llama-3.1-8b")
    wl = workload_from_dict({"batch": 8, "prompt": 1024, "output": 64})
    tau = 1e-5
    for tp, calls in ((1, 0), (2, 66), (8, 66)):
        run = lambda c: jax.device_get(jp.evaluate(model, replace(h100, collective_latency=c),  # noqa: E731
                                                   jp.Parallel(tp=tp), wl))
        base, got = run(0.0), run(tau)
        np.testing.assert_allclose(got.ttft - base.ttft, calls * tau, rtol=1e-3, atol=1e-9)
        np.testing.assert_allclose(got.tpot - base.tpot, calls * tau, rtol=1e-3, atol=1e-9)
    # the GenZ profile keeps its own 5 us per collective and none of this
    genz = jp.Options(profile="genz")
    a, b = (jp.evaluate(model, replace(h100, collective_latency=c), jp.Parallel(tp=2), wl, genz) for c in (0.0, tau))
    assert float(a.tpot) == float(b.tpot)


def test_genz_profile_keeps_flat_efficiency(h100, llama7b, chatbot):
    opts = jp.Options(profile="genz")
    shaped = replace(h100, eff_narrow=0.5, eff_attention=0.5, kernel_latency=1e-4, iteration_overhead=1e-2,
                     **H100_STRUCTURE)
    neutral = replace(h100, eff_narrow=1.0, eff_attention=1.0, kernel_latency=0.0, iteration_overhead=0.0,
                      units=0.0)
    a, b = (jax.device_get(jp.evaluate(llama7b, hw, jp.Parallel(), chatbot, opts)) for hw in (shaped, neutral))
    assert float(a.ttft) == float(b.ttft) and float(a.tpot) == float(b.tpot)


def test_gradients_match_finite_differences(h100, llama8b_evals):
    model, wl, _ = llama8b_evals
    hw = replace(h100, **H100_STRUCTURE)
    fields = ("eff_compute", "eff_memory", "eff_attention")

    def f(x):
        m = jp.evaluate(model, replace(hw, **dict(zip(fields, x))), jp.Parallel(), wl)
        return jnp.stack([m.ttft, m.tpot])
    x = jnp.array([0.7, 0.8, 0.6])
    jac = np.asarray(jax.jit(jax.jacfwd(f))(x))
    fj = jax.jit(f)
    for i in range(3):
        h = np.zeros(3, np.float32)
        h[i] = 1e-3
        fd = (np.asarray(fj(x + h)) - np.asarray(fj(x - h))) / 2e-3
        # atol: float32 noise of a central difference, ~1e-7 x 10 ms / 1e-3
        np.testing.assert_allclose(jac[:, i], fd, rtol=2e-2, atol=2e-6)
    assert jac[0, 0] < 0 and jac[1, 1] < 0  # faster kernels, shorter times


def test_efficiency_and_compute_blocks_validated():
    base = {"flops": {"bf16": 1e15}, "memory": [{"name": "hbm", "size": 8e10, "bandwidth": 3e12}],
            "network": [{"domain": 8, "bandwidth": 4.5e11, "latency": 1e-6}], "tdp_w": 700}
    with pytest.raises(SpecError, match=r"efficiency.attention is a fraction of peak in \(0, 1\], got 1.5"):
        hardware_from_dict({**base, "efficiency": {"attention": 1.5}}, src="chip.yaml")
    with pytest.raises(SpecError, match=r"unknown key efficiency.'narow_dtype' \(did you mean 'narrow_dtype'"):
        hardware_from_dict({**base, "efficiency": {"narow_dtype": 0.9}}, src="chip.yaml")
    with pytest.raises(SpecError, match=r"efficiency.attention_overlap is 0 \(the max\) or an exponent in \[1, 64\], "
                                         r"got 0.5"):
        hardware_from_dict({**base, "efficiency": {"attention_overlap": 0.5}}, src="chip.yaml")
    assert float(hardware_from_dict({**base, "efficiency": {"attention_overlap": 0}}).efficiency.attention_overlap) == 0
    with pytest.raises(SpecError, match=r"compute.tile must be \[m, n, k\]"):
        hardware_from_dict({**base, "compute": {"units": 132, "tile": [128, 128]}}, src="chip.yaml")
    hw = hardware_from_dict({**base, "compute": {"units": 132, "tile": [128, 256, 64]}})
    assert (float(hw.units), float(hw.tile_n)) == (132.0, 256.0)


def test_calibration_precedence():
    base = {"name": "mychip", "flops": {"bf16": 1e15}, "memory": [{"name": "hbm", "size": 8e10, "bandwidth": 3e12}],
            "network": [{"domain": 8, "bandwidth": 4.5e11, "latency": 1e-6}], "efficiency": {"compute": 0.5},
            "tdp_w": 700}
    shipped = Calibration(parameters={"compute": 0.7, "memory": 0.8})
    hw = hardware_from_dict(base, defaults=shipped)
    assert (float(hw.eff_compute), float(hw.eff_memory)) == pytest.approx((0.5, 0.8))  # the spec beats the defaults
    cal = calibration_from_dict({"parameters": {"compute": 0.6}, "chips": {"mychip": {"memory": 0.9}}})
    hw = hardware_from_dict(base, defaults=shipped, calibration=cal)
    assert (float(hw.eff_compute), float(hw.eff_memory)) == pytest.approx((0.6, 0.9))  # --calibration beats both
    with pytest.raises(SpecError, match=r"cal.yaml: parameters.kernel_latency is seconds in \[0, 1\], got 2"):
        calibration_from_dict({"parameters": {"kernel_latency": 2}}, src="cal.yaml")
