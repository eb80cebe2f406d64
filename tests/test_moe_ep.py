"""MoE expert parallelism inside the tensor-parallel group (`Parallel.moe_ep`,
`--moe-ep`), worked by hand on Mixtral-8x7B and Qwen3-235B-A22B, and the
built-in chips added for published measurements."""

import json

import jax
import numpy as np
import pytest
from helpers import workload

import jaxplat as jp
from jaxplat.cli import main
from jaxplat.cost import build_table, divisibility
from jaxplat.model import replace
from jaxplat.search.study import AXIS_KINDS
from jaxplat.specs.units import DTYPES

WL = workload(batch=4, prompt=512, output=8)


def _rows(model, par, wl=WL, phase="prefill"):
    t = jax.device_get(build_table(model, par, wl, phase, jp.Options()))
    return {n: {k: float(getattr(t, k)[i]) for k in ("f0", "w0", "stored", "m", "k", "n")}
            for i, n in enumerate(t.names)}


def test_mixtral_tp8_moe_ep8_by_hand():
    # Mixtral-8x7B (8 experts, top-2, width 14336, gated), tp 8, prefill of
    # 4 x 512 = 2048 tokens, present on every chip after the attention
    # all-reduce. moe_ep 8: one whole expert per chip (MoE TP 1), which runs
    # 2048 x 2 / 8 = 512 token copies: up+gate 2 x 512 x 4096 x 28672 FLOPs,
    # 2 x 4096 x 14336 x 2 B = 234,881,024 B stored. Pure TP (moe_ep 1):
    # 8 experts of width 14336 / 8 = 1792, all 4096 copies, 512 per expert
    # (a grouped GEMM's rows are one expert's tokens): the same FLOPs and
    # bytes, shaped differently.
    model = jp.load_model("mixtral-8x7b")
    ep8 = _rows(model, jp.Parallel(tp=8, moe_ep=8))["experts_up_gate"]
    assert (ep8["m"], ep8["k"], ep8["n"]) == (512.0, 4096.0, 28672.0)
    assert ep8["f0"] == pytest.approx(2 * 512 * 4096 * 28672, rel=1e-6)
    assert ep8["stored"] == pytest.approx(234_881_024, rel=1e-6)
    tp = _rows(model, jp.Parallel(tp=8))["experts_up_gate"]
    assert (tp["m"], tp["n"]) == (512.0, 2 * 1792.0)
    assert tp["f0"] == pytest.approx(ep8["f0"], rel=1e-6) and tp["stored"] == pytest.approx(ep8["stored"], rel=1e-6)
    # Load imbalance 1.25 loads the busiest expert-holding chip with 640
    # copies; with pure TP every chip holds a slice of every expert: no effect.
    hot = _rows(model, jp.Parallel(tp=8, moe_ep=8, imbalance=1.25))["experts_up_gate"]
    assert hot["m"] == 640.0
    assert _rows(model, jp.Parallel(tp=8, imbalance=1.25))["experts_up_gate"]["m"] == 512.0
    # No all-to-all inside the tp group: dispatch spans ep = 1 chip and costs
    # no time on an H100 node, while ep 8 (attention DP) over 16 sequences
    # sends each chip's 2 x 512 = 1024 tokens x 2 copies x 4096 x 2 B =
    # 16,777,216 B to 8 ranks.
    # (The old test asserted the dispatch row's FLOPs were 0, which holds
    # for every collective row whatever the grouping.)
    from jaxplat.cost.collectives import collective_time
    h100 = jp.load_hardware("h100-sxm")
    for par, n, payload in ((jp.Parallel(tp=8, moe_ep=8), 1.0, None), (jp.Parallel(ep=8), 8.0, 16_777_216)):
        t = jax.device_get(build_table(model, par, workload(batch=16, prompt=512, output=8), "prefill",
                                       jp.Options()))
        i = t.names.index("dispatch")
        assert float(t.comm_n[i]) == n
        seconds = float(collective_time("alltoall", h100, t.comm_n[i], t.comm_b[i]))
        assert (seconds == 0.0) == (n == 1.0)
        if payload:
            assert float(t.comm_b[i]) == pytest.approx(payload, rel=1e-6)


def test_moe_permute_and_finalize_by_hand():
    # TensorRT-LLM's expandInputRows / finalizeMoeRouting around the grouped
    # GEMMs. Mixtral-8x7B, tp 8 moe_ep 8, FP8, prefill of 4 x 512 = 2048
    # tokens: a chip's experts get 2048 x 2 / 8 = 512 copies of 4096-wide
    # hidden states. Permute: reads them in 16 bits (512 x 4096 x 2 B =
    # 4,194,304 B), writes them in FP8 (2,097,152 B). Finalize: reads the
    # down GEMM's 512 FP8 outputs (2,097,152 B), weights and sums them
    # (2 x 512 x 4096 FLOPs) into 2048 partial 16-bit rows (16,777,216 B).
    model = jp.load_model("mixtral-8x7b")
    wl = workload(batch=4, prompt=512, output=8, dtype="fp8")
    t = jax.device_get(build_table(model, jp.Parallel(tp=8, moe_ep=8), wl, "prefill", jp.Options()))
    row = lambda n: {k: float(getattr(t, k)[t.names.index(n)]) for k in ("f0", "a0", "w0", "o0")}  # noqa: E731
    assert row("moe_permute") == pytest.approx({"f0": 0.0, "a0": 4_194_304, "w0": 0.0, "o0": 2_097_152}, rel=1e-6)
    assert row("moe_finalize") == pytest.approx(
        {"f0": 4_194_304, "a0": 2_097_152, "w0": 0.0, "o0": 16_777_216}, rel=1e-6)
    # GenZ's profile has neither (its MoE is the GEMMs alone)
    genz = build_table(model, jp.Parallel(tp=8), wl, "prefill", jp.Options(profile="genz"))
    assert "moe_permute" not in genz.names and "moe_finalize" not in genz.names


def test_qwen3_decode_touches_one_expert_per_chip():
    # Qwen3-235B-A22B (128 experts, top-8, width 1536), tp 8 moe_ep 8, one
    # decoding sequence: 16 experts per chip at full width (MoE TP 1); the
    # token's 8 copies touch 8 experts, 1 per chip in expectation:
    # 128 x (1 - (1 - 8/128)^1) / 8 = 1, so a step reads one expert's
    # up+gate, 2 x 4096 x 1536 x 2 B = 25,165,824 B.
    model = jp.load_model("qwen3-235b-a22b")
    r = _rows(model, jp.Parallel(tp=8, moe_ep=8), workload(batch=1, prompt=512, output=8), "decode")
    assert r["experts_up_gate"]["w0"] == pytest.approx(25_165_824, rel=1e-5)
    assert r["experts_up_gate"]["stored"] == pytest.approx(16 * 25_165_824, rel=1e-6)


def test_moe_ep_feasibility():
    mixtral = jp.load_model("mixtral-8x7b")
    checks = lambda **kw: {k: bool(v) for k, v in divisibility(mixtral, jp.Parallel(**kw)).items()}  # noqa: E731
    assert all(checks(tp=8, moe_ep=8).values())
    assert not checks(tp=8, moe_ep=3)["moe_ep"]          # 3 does not divide tp = 8
    assert not checks(tp=8, moe_ep=8, ep=2)["experts"]   # 16-way expert split of 8 experts
    assert not checks(tp=4, moe_ep=4.5)["whole"]
    assert not divisibility(mixtral, jp.Parallel(tp=2, moe_ep=2), jp.Options(profile="genz"))["moe_ep"]
    # a study axis sets it
    assert float(AXIS_KINDS["moe_ep"].setter(jp.Parallel(tp=8), 4.0).moe_ep) == 4.0


def test_estimate_moe_ep_flag(capsys):
    args = ["estimate", "--model", "mixtral-8x7b", "--hardware", "h100-sxm", "--tp", "8", "--json"]
    main(args + ["--moe-ep", "8"])
    out = json.loads(capsys.readouterr().out)
    assert out["feasible"] and out["ttft_s"] > 0
    assert main(args[:-1] + ["--moe-ep", "3"]) == 3  # infeasible: its reasons on stderr
    assert "moe_ep=3 does not divide tp=8" in capsys.readouterr().err


@pytest.mark.parametrize("name, bf16, fp8, hbm, hbm_bw, tdp", [
    ("gh200", 989.4e12, 1978.9e12, 144 * 2**30, 4.9e12, 1000.0),  # datasheet GB are GiB
    ("mi325x", 1307.4e12, 2614.9e12, 256 * 2**30, 6e12, 1000.0),
    ("mi355x", 2516.6e12, 5033.2e12, 288 * 2**30, 8e12, 1400.0),
    ("gb300", 2.5e15, 5e15, 288 * 2**30, 8e12, 1400.0),
])
def test_new_chips_datasheet_numbers(name, bf16, fp8, hbm, hbm_bw, tdp):
    hw = jp.load_hardware(name)
    dt = DTYPES
    np.testing.assert_allclose([hw.flops[dt.index("bf16")], hw.flops[dt.index("fp8")], hw.mem_size[0],
                                hw.mem_bw[0], hw.tdp], [bf16, fp8, hbm, hbm_bw, tdp], rtol=5e-4)  # sizes to 4 digits
    assert float(hw.price) > 0 and float(hw.sram_size) > 0


def test_grouped_gemm_pays_a_row_tile_per_expert():
    # Qwen3-30B-A3B (128 experts, top-8, width 768, hidden 2048) decoding 64
    # sequences on one H100 (132 SMs, 128 x 128 x 64 tiles): 512 token copies
    # over the E (1 - (1 - 8/128)^64) = 125.94 experts they touch, 4.07 rows
    # each. Each expert's GEMM pays a whole row tile, 16 rows at this size
    # (MoE kernels size it to the expert's tokens: vLLM fused_moe's 16-row
    # blocks): up+gate (n = 1536, k = 2048) is 125.94 x 1 x 12 x 32 k-loop
    # iterations in ceil(48,361 / 132) = 367 waves, so the useful share is
    # 512 x 1536 x 2048 / (367 x 132 x 16 x 128 x 64) = 0.254; one GEMM over
    # all 512 rows in 128-row tiles would have paid 4 x 12 x 32 = 1,536
    # iterations in 12 waves, 0.97.
    from jaxplat.cost.efficiency import dense_tile_m, grouped_tile_m, quantization, row_rates
    # (tile_latency 0: the quantization alone, by hand)
    model, hw = jp.load_model("qwen3-30b-a3b"), replace(jp.load_hardware("h100-sxm"), tile_latency=0.0)
    wl = workload(batch=64, prompt=512, output=8)
    r = _rows(model, jp.Parallel(), wl, "decode")["experts_up_gate"]
    touched = 128 * (1 - (1 - 8 / 128) ** 64)
    assert r["m"] == pytest.approx(512 / touched, rel=1e-5)
    assert (r["k"], r["n"]) == (2048.0, 1536.0)
    groups = r["f0"] / (2 * r["m"] * r["k"] * r["n"])
    assert groups == pytest.approx(touched, rel=1e-5)
    tile = float(grouped_tile_m(r["m"], hw))
    assert tile == 16.0
    q = float(quantization(r["m"], r["n"], r["k"], groups, hw, tile_m=tile))
    waves = np.ceil(touched * 12 * 32 / 132)
    assert waves == 367
    assert q == pytest.approx(512 * 1536 * 2048 / (waves * 132 * 16 * 128 * 64), rel=1e-4)
    assert float(quantization(512.0, 1536.0, 2048.0, 1.0, hw)) == pytest.approx(
        512 * 1536 * 2048 / (12 * 132 * 128 * 128 * 64), rel=1e-4)
    # the row's achieved FLOP/s carries that share: peak x efficiencies x q,
    # x eff_moe where the experts are quantized (BF16 experts run like dense
    # GEMMs: efficiency.quantized_experts), and x eff_moe_fp4 on top where
    # they compute in FP4
    def ratio(dtype, **kw):
        w = workload(batch=64, prompt=512, output=8, dtype=dtype)
        t = build_table(model, jp.Parallel(), w, "decode", jp.Options())
        peak, _, _ = row_rates(t, replace(hw, **kw), w, jp.Options(), None)  # flat_peak: read by "flat" only
        i, dense = t.names.index("experts_up_gate"), t.names.index("qkv")
        q_dense = float(quantization(t.m[dense], t.n[dense], t.k[dense], 1.0, hw,  # its own row tile (64 rows)
                                     tile_m=dense_tile_m(t.m[dense], hw)))
        return float(peak[i]) / float(peak[dense]) * q_dense
    moe = 0.4  # a derate set here (the shipped one is 1, DeepGEMM's measured rate), so that it shows
    assert ratio("bf16", eff_moe=moe, eff_moe_fp4=0.5) == pytest.approx(q, rel=1e-4)
    assert ratio("fp8", eff_moe=moe, eff_moe_fp4=0.5, moe_speed=1.0) == pytest.approx(q * moe, rel=1e-4)
    assert ratio("fp4", eff_moe=moe, eff_moe_fp4=0.5, moe_speed=1.0) == pytest.approx(q * moe * 0.5, rel=1e-4)
    # and x the software stack's moe_speed, the engine's MoE layers' share of the kernel's rate
    assert ratio("fp8", eff_moe=moe, eff_moe_fp4=0.5, moe_speed=0.25) == pytest.approx(q * moe * 0.25, rel=1e-4)
    # the tile: the shortest power of two holding the rows, 16 to the chip's 128
    assert [float(grouped_tile_m(x, hw)) for x in (1.0, 16.0, 17.0, 100.0, 128.0, 3000.0)] == \
        [16.0, 16.0, 32.0, 128.0, 128.0, 128.0]


def test_moe_gather_moves_ep_copies_of_every_token():
    # Attention data parallel over ep = 8 ranks, decode of 64 sequences:
    # 8 tokens per rank. All-to-all (DeepEP) sends each token's k copies to
    # its experts' ranks: Llama 4 Maverick (top-1, hidden 5120, FP8) 8 x 1 x
    # 5120 x 1 B = 40,960 B per rank out, its BF16 outputs 81,920 B back.
    # All-gather + reduce-scatter (TensorRT-LLM attention DP) moves all 8
    # ranks' tokens: 8 x 8 x 5120 x 1 B = 327,680 B, 655,360 B back (8x for
    # top-1). Qwen3-235B-A22B (top-8, hidden 4096): 8 copies either way.
    wl = workload(batch=64, prompt=512, output=8, dtype="fp8")

    def payloads(name, gather):
        t = jax.device_get(build_table(jp.load_model(name), jp.Parallel(ep=8, moe_gather=gather), wl, "decode",
                                       jp.Options()))
        return [float(t.comm_b[t.names.index(n)]) for n in ("dispatch", "combine")]

    assert payloads("llama-4-maverick", 0.0) == pytest.approx([40_960, 81_920], rel=1e-6)
    assert payloads("llama-4-maverick", 1.0) == pytest.approx([327_680, 655_360], rel=1e-6)
    assert payloads("qwen3-235b-a22b", 1.0) == pytest.approx(payloads("qwen3-235b-a22b", 0.0), rel=1e-6)
    assert payloads("qwen3-235b-a22b", 1.0) == pytest.approx([8 * 8 * 4096, 2 * 8 * 8 * 4096], rel=1e-6)


def test_expert_weights_stream_at_their_own_efficiency():
    """Mixtral-8x7B decoding one sequence on 2 H100s (FP8): each layer reads
    the two experts it routes to, 2 x 3 x 4096 x 14336 bytes, half on each
    chip: 5.64 GB per chip per step over 32 layers, memory-bound. Halving
    `moe_memory` adds that stream's time once more (at eff_memory of the
    HBM's 3.35 TB/s); `moe` (the grouped GEMMs' compute) leaves this
    memory-bound step alone."""
    model, hw = jp.load_model("mixtral-8x7b"), jp.load_hardware("h100-sxm")
    wl = workload(batch=1, prompt=512, output=64, dtype="fp8")
    par = jp.Parallel(tp=2)

    def tpot(**kw):
        return float(jp.evaluate(model, replace(hw, **kw), par, wl).tpot)
    stream = 32 * 2 * 3 * 4096 * 14336 / 2 / (3.35e12 * float(hw.eff_memory))
    base = tpot(eff_moe=1.0, eff_moe_memory=1.0)
    assert tpot(eff_moe=1.0, eff_moe_memory=0.5) - base == pytest.approx(stream, rel=1e-2)
    assert tpot(eff_moe=0.5, eff_moe_memory=1.0) == pytest.approx(base, rel=1e-6)


def test_grouped_gemm_derates_reach_quantized_experts_only():
    """The same Mixtral-8x7B decode on 2 H100s with its experts in BF16:
    `moe` and `moe_memory` leave it alone (16-bit grouped GEMMs run like
    dense ones: efficiency.quantized_experts); with the experts alone in
    FP8 (bf16/bf16/bf16/fp8) halving `moe_memory` adds their 1-byte stream
    once more, 32 x 2 x 3 x 4096 x 14336 x 1 B / 2 chips at eff_memory of
    3.35 TB/s, as in the all-FP8 step above."""
    model, hw = jp.load_model("mixtral-8x7b"), jp.load_hardware("h100-sxm")
    par = jp.Parallel(tp=2)

    def tpot(dtype, **kw):
        wl = workload(batch=1, prompt=512, output=64, dtype=dtype)
        return float(jp.evaluate(model, replace(hw, **kw), par, wl).tpot)
    for kw in ({"eff_moe": 0.5}, {"eff_moe_memory": 0.5}):
        assert tpot("bf16", **kw) == pytest.approx(tpot("bf16", eff_moe=1.0, eff_moe_memory=1.0), rel=1e-6)
    fp8_experts = {"weights": "bf16", "activations": "bf16", "kv": "bf16", "experts": "fp8"}
    stream = 32 * 2 * 3 * 4096 * 14336 / 2 / (3.35e12 * float(hw.eff_memory))
    base = tpot(fp8_experts, eff_moe=1.0, eff_moe_memory=1.0)
    assert tpot(fp8_experts, eff_moe=1.0, eff_moe_memory=0.5) - base == pytest.approx(stream, rel=1e-2)


def test_expert_latency_counted_by_hand():
    """Mixtral-8x7B on one H100: a decode step at batch 1 routes its token to
    2 of 8 experts in each of 32 layers, and each expert runs two grouped
    GEMMs (up/gate, down): 128 expert GEMMs a step. A 512-token prompt
    touches all 8 (8 (1 - (6/8)^512) = 8 in the mean field): 512 a pass.
    Each pays `expert_latency` once."""
    model, hw = jp.load_model("mixtral-8x7b"), jp.load_hardware("h100-sxm")
    wl = workload(batch=1, prompt=512, output=64, dtype="fp8")
    tau = 1e-6

    def run(t):
        m = jp.evaluate(model, replace(hw, expert_latency=t), jp.Parallel(), wl)
        return float(m.ttft), float(m.tpot)
    (t0, d0), (t1, d1) = run(0.0), run(tau)
    assert d1 - d0 == pytest.approx(128 * tau, rel=1e-3)
    assert t1 - t0 == pytest.approx(512 * tau, rel=1e-3)


def test_a_model_without_shared_experts_runs_no_shared_kernels():
    # Mixtral-8x7B has no shared expert: its shared rows read no input, write
    # nothing and launch no kernel (before, the empty GEMM read every token's
    # 4096 x 2 B hidden state and counted one kernel per layer). DeepSeek-V3's
    # one shared expert (width 2048, gated) on 2048 tokens: 2 x 2048 x 7168 x
    # 4096 FLOPs in its up+gate GEMM and a kernel of its own.
    from jaxplat.cost.efficiency import kernel_counts
    h100 = jp.load_hardware("h100-sxm")
    for name, flops in (("mixtral-8x7b", 0.0), ("deepseek-v3", 2 * 2048 * 7168 * 4096)):
        t = jax.device_get(build_table(jp.load_model(name), jp.Parallel(), WL, "prefill", jp.Options()))
        i = t.names.index("shared_up_gate")
        assert float(t.f0[i]) == pytest.approx(flops, rel=1e-6)
        traffic = float(t.a0[i] + t.o0[i] + t.w0[i])
        kernels = float(jax.device_get(kernel_counts(t, h100, jp.Options()))[i])
        assert (traffic > 0, kernels) == ((True, 1.0) if flops else (False, 0.0))
