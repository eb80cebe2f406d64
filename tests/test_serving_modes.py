"""Serving modes `jaxplat estimate` reports: speculative decoding, offline
max load, disaggregated prefill/decode pools and their KV transfer, and the
serving flags of the command (--rate, --chunk, --draft, --disagg).

Expected values are worked by hand (a memory-bound chip reads every byte at
its bandwidth; queueing formulas), come from a slow reference loop, or are
properties that must hold. The library calls use the jitted entry points the
command uses, with the same argument types, so each program compiles once.
"""

import json

import jax.numpy as jnp
import numpy as np
import pytest

import jaxplat as jp
from jaxplat import serving as S
from jaxplat.cli import main
from jaxplat.model import hardware_from_dict, replace, workload_from_dict

OPTS = jp.Options()
WL = workload_from_dict({"batch": 1, "prompt": 1024, "output": 128})
# A chip so fast at math that every operator is memory-bound, with memory for a 70B model and
# power to spare (never held back by its board power).
BW = 2e12
MEMORY_BOUND = hardware_from_dict({
    "flops": {"bf16": 1e20}, "memory": [{"name": "hbm", "size": 400e9, "bandwidth": BW}], "tdp_w": 1e6,
    "network": [{"domain": 8, "bandwidth": 450e9, "latency": 1e-6},
                {"domain": 1024, "bandwidth": 50e9, "latency": 5e-6}],
    "efficiency": {"compute": 1.0, "memory": 1.0, "network": 1.0}})


def step_bytes(L, D, Df, V, ctx, kv_heads=8, head_dim=128, heads_dim=None):
    """Bytes one decode step of a Llama-3-style model reads at batch 1, bf16:
    every weight once (q, o: D x D; k, v: D x 1024; gate, up, down; the LM
    head; the embedding table is gathered, not streamed) and K, V of ctx
    tokens in every layer."""
    weights = L * (2 * D * D + 2 * D * kv_heads * head_dim + 3 * D * Df) + V * D
    kv = L * 2 * kv_heads * head_dim * ctx
    return 2.0 * (weights + kv)


def expected_tokens_by_sampling(k, alpha, steps=200_000, seed=0):
    """Slow reference: run speculative steps with random acceptance (each
    drafted token accepted with probability alpha until the first rejection;
    the target then adds one token of its own) and count tokens per step."""
    rng = np.random.default_rng(seed)
    accepted = rng.random((steps, k)) < alpha
    run = np.cumprod(accepted, axis=1).sum(axis=1)  # drafted tokens kept: up to the first rejection
    return float(np.mean(run + 1)), float(np.std(run + 1) / np.sqrt(steps))


# ------------------------------------------------------------ speculative decoding


def test_expected_tokens_against_sampling():
    for k, alpha in ((4, 0.7), (2, 0.5), (6, 0.9)):
        mean, se = expected_tokens_by_sampling(k, alpha)
        assert float(S.expected_tokens(jnp.float32(k), jnp.float32(alpha))) == pytest.approx(mean, abs=4 * se)


def test_speculative_tpot_by_hand(llama8b):
    """Llama-3.1-8B, batch 1, prompt 1024, output 128, on the memory-bound
    chip: a decode step at the mean context (1024 + 64) reads the step's
    bytes; a verify pass of k + 1 = 5 tokens reads the same bytes (plus five
    tokens of activations), and yields E = (1 - 0.7^5) / (1 - 0.7) = 2.77
    tokens (Leviathan et al. 2023). Free drafts (n-gram lookup): TPOT =
    step / E; drafts at 1/32 of a step each (one-layer MTP heads): (1 + 4/32)
    steps per E tokens."""
    step = step_bytes(32, 4096, 14336, 128256, 1024 + 64) / BW
    E = (1 - 0.7**5) / (1 - 0.7)
    k, alpha = jnp.float32(4.0), jnp.float32(0.7)
    spec, plain = S.speculative_tpot_jit(llama8b, MEMORY_BOUND, jp.Parallel(), WL, OPTS, jnp.float32(1.0), k, alpha,
                                         draft_fraction=0.0)
    assert float(plain) == pytest.approx(step, rel=2e-3)
    assert float(spec) == pytest.approx(step / E, rel=5e-3)
    mtp, _ = S.speculative_tpot_jit(llama8b, MEMORY_BOUND, jp.Parallel(), WL, OPTS, jnp.float32(1.0), k, alpha,
                                    draft_fraction=1.0 / 32)
    assert float(mtp) == pytest.approx(step * (1 + 4 / 32) / E, rel=5e-3)
    # Nothing accepted: one token per step, the four drafts wasted.
    none, _ = S.speculative_tpot_jit(llama8b, MEMORY_BOUND, jp.Parallel(), WL, OPTS, jnp.float32(1.0), k,
                                     jnp.float32(0.0), draft_fraction=1.0 / 32)
    assert float(none) == pytest.approx(step * (1 + 4 / 32), rel=5e-3)


def test_speculative_tpot_with_a_draft_model_by_hand(llama8b):
    """Llama-3.1-70B verifies what Llama-3.1-8B drafts, both on one chip:
    four 8B steps and one 70B pass per E tokens."""
    big = jp.load_model("llama-3.1-70b")
    ctx = 1024 + 64
    t8 = step_bytes(32, 4096, 14336, 128256, ctx) / BW
    t70 = step_bytes(80, 8192, 28672, 128256, ctx) / BW
    E = (1 - 0.7**5) / (1 - 0.7)
    spec, plain = S.speculative_tpot_jit(big, MEMORY_BOUND, jp.Parallel(), WL, OPTS, jnp.float32(1.0),
                                         jnp.float32(4.0), jnp.float32(0.7), draft_model=llama8b)
    assert float(plain) == pytest.approx(t70, rel=2e-3)
    assert float(spec) == pytest.approx((4 * t8 + t70) / E, rel=5e-3)


def test_speculation_stops_paying_at_large_batch(llama8b, h100):
    """A verify pass of 5 tokens per sequence costs 5x the FLOPs of a decode
    step: nearly free at batch 1 (memory-bound), a loss at batch 1024 of
    short sequences (64 + 32 tokens: the weight GEMMs are compute-bound and
    the KV cache is small)."""
    short = workload_from_dict({"batch": 1, "prompt": 64, "output": 32})
    speedup = []
    for b in (1.0, 64.0, 1024.0):
        spec, plain = S.speculative_tpot_jit(llama8b, h100, jp.Parallel(), short, OPTS, jnp.float32(b),
                                             jnp.float32(4.0), jnp.float32(0.7), draft_fraction=0.0)
        speedup.append(float(plain / spec))
    E = (1 - 0.7**5) / (1 - 0.7)
    assert E > speedup[0] > 0.9 * E  # batch 1: nearly the accepted tokens per step
    assert speedup[0] > speedup[1] > speedup[2] and speedup[2] < 1.0


# ------------------------------------------------------------ max load


def test_max_load_by_hand():
    """Llama-2-7B (MHA, 32 KV heads), bf16, one H100 80 GiB, prompt + output
    2048: the KV pool is 90% of what weights and one 8192-token iteration's
    activations leave; the offline engine keeps that many sequences running
    (a closed loop with every slot busy), serving about what a static batch
    of as many sequences serves."""
    model, hw = jp.load_model("llama-2-7b"), jp.load_hardware("h100-sxm")
    wl = workload_from_dict({"batch": 1, "prompt": 1024, "output": 1024})
    d, f, L, V = 4096, 11008, 32, 32000
    weights = 2.0 * (L * (4 * d * d + 3 * d * f) + 2 * V * d)  # untied embedding and head
    act = 2.0 * 3 * f * 8192  # SiLU-and-gate over an 8192-token iteration: in 2f, out f
    kv_seq = 2.0 * L * 2 * d * 2048  # K and V, bf16
    want = np.floor(0.9 * (85.9e9 - weights - act) / kv_seq)  # the spec's 80 GiB
    assert want == 60
    one = jp.evaluate(model, hw, jp.Parallel(), wl)
    assert float(one.kv_bytes) == pytest.approx(kv_seq, rel=1e-6)
    assert float(one.weights_bytes) == pytest.approx(weights, rel=1e-6)
    b, thr = S.max_load_jit(model, hw, jp.Parallel(), wl, S.serving(mem_fraction=0.9), OPTS)
    assert float(b) == want
    # A static batch of 60: 60 x 1024 tokens per end-to-end time. The loop staggers the
    # prompts over the decode steps instead; the same work, within 1%.
    m = jp.evaluate(model, hw, jp.Parallel(), replace(wl, batch=60.0))
    assert float(thr) == pytest.approx(60 * 1024 / float(m.e2e), rel=0.01)
    # A cap below capacity runs fewer sequences, fewer tokens/s.
    b16, thr16 = S.max_load_jit(model, hw, jp.Parallel(), wl, S.serving(mem_fraction=0.9, max_batch=16), OPTS)
    assert float(b16) == 16 and float(thr16) < float(thr)
    # Weights alone over the memory: no sequence fits, nothing is served.
    b0, thr0 = S.max_load_jit(jp.load_model("llama-3.1-70b"), hw, jp.Parallel(), wl, S.serving(), OPTS)
    assert float(b0) == 0 and float(thr0) == 0


def test_attention_data_parallel_ranks_each_hold_their_own_sequences():
    """Mixtral-8x7B, fp8, 8 H100s as tp 1 x ep 8 (attention data parallel,
    one expert per chip): each rank keeps the KV of its own sequences, so
    the replica holds 8 x what one chip's pool does. By hand, one sequence
    of 1024 + 1024 tokens holds 2 (K, V) x 32 layers x 8 KV heads x 128 x
    2048 x 1 byte on its rank; the capacity is the largest batch whose
    busiest rank's KV (ceil(batch / 8) sequences) fits the pool."""
    model, hw = jp.load_model("mixtral-8x7b"), jp.load_hardware("h100-sxm")
    wl = workload_from_dict({"batch": 1, "prompt": 1024, "output": 1024, "dtype": "fp8"})
    par, srv = jp.Parallel(ep=8), S.serving(mem_fraction=0.9, kv_block=0)
    kv_seq = 2.0 * 32 * 8 * 128 * 2048
    b, per_seq, pool = (float(x) for x in S.capacity(model, hw, par, wl, srv, OPTS))
    assert per_seq == pytest.approx(kv_seq, rel=1e-6)
    assert b == 8 * np.floor(pool / kv_seq) and b > 8
    kv_at = lambda n: float(jp.evaluate(model, hw, par, replace(wl, batch=n)).kv_bytes)  # noqa: E731
    assert kv_at(b) <= pool < kv_at(b + 1)
    # The same chips as one tensor-parallel group hold each sequence's KV split
    # 8 ways (one KV head per chip): no attention-DP multiplier there.
    b_tp, per_tp, pool_tp = (float(x) for x in S.capacity(model, hw, jp.Parallel(tp=8), wl, srv, OPTS))
    assert per_tp == pytest.approx(kv_seq / 8, rel=1e-6) and b_tp == np.floor(pool_tp / per_tp)


# ------------------------------------------------------------ disaggregated pools


def _kv_prompt_bytes(prompt, tp=1):
    """K and V of one Llama-3.1-8B prompt on one of tp chips (8 KV heads), bf16."""
    return 32 * 2 * (8 / tp) * 128 * prompt * 2.0


def test_kv_transfer_time_by_hand(llama8b, h100):
    # H100 spec: InfiniBand (level 1) 50 GB/s per direction, 5 µs; NVLink (level 0) 450 GB/s, 1 µs;
    # links at the calibration's network efficiency.
    eff = float(h100.eff_network)
    for tp, level, bw, lat in ((1, 1, 50e9, 5e-6), (2, 1, 50e9, 5e-6), (1, 0, 450e9, 1e-6)):
        got = float(S.kv_transfer_time(llama8b, h100, jp.Parallel(tp=tp), WL, OPTS, level))
        assert got == pytest.approx(lat + _kv_prompt_bytes(1024, tp) / (eff * bw), rel=1e-5), (tp, level)


def test_disaggregated_pools_by_hand(llama8b, h100):
    """Prefill replicas are M/D/1 queues of whole prompts (Pollaczek-Khinchine
    wait rho S / (2 (1 - rho)), S the batch-1 TTFT), then the prompt's KV
    crosses InfiniBand; the decode pool holds rate x (output - 1) x TPOT
    sequences (Little's law)."""
    S0 = float(jp.evaluate(llama8b, h100, jp.Parallel(), WL).ttft)
    xfer = 5e-6 + _kv_prompt_bytes(1024) / (float(h100.eff_network) * 50e9)
    ttft, tpot = {}, {}
    for rate, n_p, n_d in ((1e-4, 2.0, 2.0), (20.0, 2.0, 2.0), (20.0, 1.0, 2.0), (20.0, 1.0, 4.0)):
        r = S.disaggregated_jit(llama8b, h100, jp.Parallel(), jp.Parallel(), WL, S.serving(rate=rate),
                                jnp.float32(n_p), jnp.float32(n_d), OPTS)
        rho = rate / n_p * S0
        assert bool(r.stable) and float(r.utilization) == pytest.approx(rho, rel=1e-4)
        assert float(r.ttft_mean) == pytest.approx(S0 + rho * S0 / (2 * (1 - rho)) + xfer, rel=1e-4)
        assert float(r.batch) == pytest.approx(rate / n_d * 127 * float(r.tpot_mean), rel=1e-4)
        assert float(r.e2e_mean) == pytest.approx(float(r.ttft_mean) + 127 * float(r.tpot_mean), rel=1e-5)
        ttft[rate, n_p, n_d], tpot[rate, n_p, n_d] = float(r.ttft_mean), float(r.tpot_mean)
    # Zero load: one decoding sequence, the batch-1 decode step (evaluate's TPOT, which averages
    # the same linear-in-context step over the output).
    assert tpot[1e-4, 2.0, 2.0] == pytest.approx(float(jp.evaluate(llama8b, h100, jp.Parallel(), WL).tpot), rel=2e-3)
    # More load per decode replica, larger batches, slower steps; prefill pools do not touch decode.
    assert tpot[20.0, 1.0, 2.0] > tpot[20.0, 1.0, 4.0] > tpot[1e-4, 2.0, 2.0]
    assert tpot[20.0, 2.0, 2.0] == tpot[20.0, 1.0, 2.0]
    # Overloaded prefill (rho = 1.5): unstable, latencies saturated.
    r = S.disaggregated_jit(llama8b, h100, jp.Parallel(), jp.Parallel(), WL, S.serving(rate=1.5 / S0),
                            jnp.float32(1.0), jnp.float32(2.0), OPTS)
    assert not bool(r.stable) and float(r.ttft_mean) == S.SATURATED


# ------------------------------------------------------------ estimate's serving flags


def _estimate(capsys, *flags, model="llama-3.1-8b"):
    assert main(["estimate", "--model", model, "--hardware", "h100-sxm", "--workload", "qa", "--json", *flags]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.fixture(scope="module")
def qa(llama8b, h100):
    """The command's inputs for `--workload qa` (its serving model runs one beam)."""
    wl = replace(jp.load_workload("qa"), beams=1.0)
    mb, _ = S.max_load_jit(llama8b, h100, jp.Parallel(), wl, S.serving(), OPTS)
    return wl, mb


def test_estimate_rate_zero_is_max_load(capsys, llama8b, h100, qa):
    wl, mb = qa
    out = _estimate(capsys, "--rate", "0")
    b, thr = S.max_load_jit(llama8b, h100, jp.Parallel(), wl, S.serving(), OPTS)
    assert out["max_batch"] == float(b) and out["throughput_tok_s"] == pytest.approx(float(thr), rel=1e-6)
    # Property: at full memory it serves more tokens/s than the workload's batch of one.
    single = jp.evaluate(llama8b, h100, jp.Parallel(), wl)
    assert out["max_batch"] > 1 and out["throughput_tok_s"] > 10 * float(single.throughput)


@pytest.mark.parametrize("chunk", [0, 256])
def test_estimate_rate_chunk_and_draft_are_the_queueing_and_speculative_models(capsys, llama8b, h100, qa, chunk):
    # One command with all three flags: one compiled program (the chunk is a number in it) for
    # both cases, where a command per flag would compile the queueing model once each.
    wl, mb = qa
    out = _estimate(capsys, "--rate", "2", "--draft", "ngram", *(["--chunk", str(chunk)] if chunk else []))
    srv = S.serving(rate=2.0, chunk=float(chunk))
    q = S.queueing_jit(llama8b, h100, jp.Parallel(), wl, srv, OPTS, mb)
    for key, f in (("ttft_p50_s", q.ttft_p50), ("ttft_p99_s", q.ttft_p99), ("tpot_p50_s", q.tpot_p50),
                   ("tpot_p99_s", q.tpot_p99), ("ttft_mean_s", q.ttft_mean), ("e2e_p99_s", q.e2e_p99)):
        assert out[key] == pytest.approx(float(f), rel=1e-6), key
    # Goodput is the highest rate whose SLOs hold (a bisection): checked on the queueing model just
    # compiled, 0.1% either side of it, rather than against a second compile of the bisection.
    g = out["goodput_req_s"]
    met = [bool(S.slo_met(S.queueing_jit(llama8b, h100, jp.Parallel(), wl, replace(srv, rate=jnp.float32(r)), OPTS, mb),
                          wl, srv.slo_quantile)) for r in (0.999 * g, 1.001 * g)]
    assert 1e-4 < g < 1e4 and met == [True, False]
    # Properties: stable at 2 req/s; the tail is no shorter than the median; waiting only adds to
    # the unloaded TTFT (chunking a prompt can only spread it over more iterations); the SLOs
    # (TTFT 0.2 s, TPOT 10 ms at the 90th percentile) hold at 2 req/s iff goodput >= 2.
    unloaded = float(jp.evaluate(llama8b, h100, jp.Parallel(), wl).ttft)
    assert out["stable"] and out["ttft_p99_s"] >= out["ttft_p50_s"] and out["tpot_p99_s"] >= out["tpot_p50_s"]
    assert out["ttft_mean_s"] >= unloaded * (1 - 1e-6)
    assert (out["goodput_req_s"] >= 2.0) == bool(S.slo_met(q, wl, srv.slo_quantile))
    # --draft ngram: speculative decoding at the batch the queue runs at 2 req/s.
    batch = max(1.0, float(q.batch))
    assert out["spec_batch"] == pytest.approx(batch, rel=1e-6)
    spec, plain = S.speculative_tpot_jit(llama8b, h100, jp.Parallel(), wl, OPTS, jnp.float32(batch),
                                         jnp.float32(4.0), jnp.float32(0.7), draft_fraction=0.0)
    assert out["spec_tpot_s"] == pytest.approx(float(spec), rel=1e-6)
    assert out["spec_speedup"] == pytest.approx(float(plain / spec), rel=1e-6)
    # Property: free drafts at a small batch gain nearly, and never more than, the tokens per step.
    E = (1 - 0.7**5) / (1 - 0.7)
    assert 0.8 * E < out["spec_speedup"] < E


def test_estimate_disagg_is_the_pools_model(capsys, llama8b, h100, qa):
    wl, _ = qa
    one, two = (_estimate(capsys, "--rate", "20", "--disagg", f"{n}:2") for n in (1, 2))
    for out, n_p in ((one, 1.0), (two, 2.0)):
        r = S.disaggregated_jit(llama8b, h100, jp.Parallel(), jp.Parallel(), wl, S.serving(rate=20.0),
                                jnp.float32(n_p), jnp.float32(2.0), OPTS)
        for key, f in (("ttft_mean_s", r.ttft_mean), ("ttft_p99_s", r.ttft_p99), ("tpot_mean_s", r.tpot_mean),
                       ("e2e_p99_s", r.e2e_p99)):
            assert out[key] == pytest.approx(float(f), rel=1e-6), (key, n_p)
    # Property: a second prefill replica halves the prefill load: shorter waits, same decode pool.
    assert two["ttft_mean_s"] < one["ttft_mean_s"] and two["tpot_mean_s"] == one["tpot_mean_s"]
    assert "goodput_req_s" not in one


def test_estimate_prefill_first_is_the_wave(capsys, llama8b, h100, qa):
    wl, mb = qa
    out = _estimate(capsys, "--concurrency", "16", "--max-num-tokens", "2000", "--prefill-first")
    srv = S.serving(max_num_tokens=2000.0, prefill_first=1.0)
    cl = S.closed_loop_jit(llama8b, h100, jp.Parallel(), wl, srv, 16.0, OPTS, mb)
    assert out["ttft_s"] == pytest.approx(float(cl.ttft), rel=1e-5)
    assert out["tpot_s"] == pytest.approx(float(cl.tpot), rel=1e-5)
    # Property: 16 prompts of 1000 tokens prefilled 2 per iteration back to back
    # (8 iterations, the mean prompt waits 4.5) wait longer for their first
    # token than clients whose prompts join the decodes' iterations.
    mixed = S.closed_loop_jit(llama8b, h100, jp.Parallel(), wl, replace(srv, prefill_first=jnp.float32(0.0)),
                              16.0, OPTS, mb)
    assert out["ttft_s"] > 1.5 * float(mixed.ttft)
