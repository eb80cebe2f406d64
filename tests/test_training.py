"""The training step (cost.training, issue 38): numbers worked by hand on a
tiny dense model, derivatives against finite differences, and `jaxplat train`.

The tiny model: 8 Llama layers, hidden 64, 4 heads of 16 (no GQA), SwiGLU
width 128, vocabulary 256, tied embeddings: 8·(64·192 + 64·64 + 3·64·128) +
256·64 = 344,064 parameters. Its chip: 1 TFLOP/s bf16, memory and the vector
unit so fast that only GEMM and attention FLOPs take time, an 8-chip 100 GB/s
switch and a 10 GB/s one above it, no latencies.
"""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import TRAIN_FLAGS, compile_events, sweep_training_study, train_argv

from jaxplat.cli.app import main
from jaxplat.cost.attention_kernels import ATTENTION_KERNELS
from jaxplat.cost.training import TrainOptions, TrainWorkload, train_step
from jaxplat.cost.training_memory import activation_per_layer
from jaxplat.model import Parallel, hardware_from_dict, load_hardware, load_model, model_from_config, replace

CONFIG = {"model_type": "llama", "num_hidden_layers": 8, "hidden_size": 64, "num_attention_heads": 4,
          "num_key_value_heads": 4, "intermediate_size": 128, "vocab_size": 256, "max_position_embeddings": 4096,
          "tie_word_embeddings": True}
HW = {"flops": {"bf16": 1e12, "fp8": 2e12},
      "memory": [{"name": "hbm", "size": 80e9, "bandwidth": 1e18}],
      "network": [{"name": "nvlink", "domain": 8, "bandwidth": 1e11, "latency": 0.0, "topology": "switch"},
                  {"name": "ib", "domain": 1e6, "bandwidth": 1e10, "latency": 0.0, "topology": "switch"}],
      "compute": {"vector_flops": 1e30}, "tdp_w": 700}
PARAMS = 8 * (64 * 192 + 64 * 64 + 3 * 64 * 128) + 256 * 64
L, D, H, DH, FF, V = 8, 64, 4, 16, 128, 256


@pytest.fixture(scope="module")
def model():
    return model_from_config(CONFIG)


@pytest.fixture(scope="module")
def hw():
    return hardware_from_dict(HW)


def step(model, hw, par=None, **kw):
    kw = {"global_batch": 2.0, "micro_batch": 2.0, "seq": 128.0, "eff_network": 0.0,  # the chip's (1)
          "backward_efficiency": 1.0, **kw}
    return jax.device_get(train_step(model, hw, par or Parallel(), TrainWorkload(**kw)))


def hand_flops(b=2, T=128):
    """Forward FLOPs of one micro-batch by hand: (layer GEMMs, LM head, attention)."""
    tok = b * T
    gemm = L * 2 * tok * D * ((H + 2 * H) * DH + H * DH + 3 * FF)  # qkv, out, up+gate, down
    head = 2 * tok * D * V  # logits for every token
    attn = L * 2 * (2 * b * H * DH * T * (T + 1) / 2)  # causal Q·K^T and P·V
    return gemm, head, attn


def test_passes_by_hand(model, hw):
    """Forward = FLOPs / peak; backward 2x the GEMMs (data + weight grads),
    2.5x attention (FlashAttention-2); full recompute repeats the layers'
    forward (so GEMM work is 4x the forward's, 3x without), selective only
    attention."""
    gemm, head, attn = hand_flops()
    none = step(model, hw)
    np.testing.assert_allclose(none.forward, (gemm + head + attn) / 1e12, rtol=1e-4)
    np.testing.assert_allclose(none.backward, (2 * (gemm + head) + 2.5 * attn) / 1e12, rtol=1e-4)
    assert none.recompute == 0.0 and none.bubble == 0.0
    full = step(model, hw, recompute=2.0)
    np.testing.assert_allclose(full.recompute, (gemm + attn) / 1e12, rtol=1e-4)
    np.testing.assert_allclose(full.forward + full.backward + full.recompute,
                               (4 * gemm + 3 * head + 4.5 * attn) / 1e12, rtol=1e-4)
    sel = step(model, hw, recompute=1.0)
    np.testing.assert_allclose(sel.recompute, attn / 1e12, rtol=1e-4)
    slower = step(model, hw, backward_efficiency=0.75)  # the backward kernels at 3/4 of the forward's rate
    np.testing.assert_allclose(slower.backward, none.backward / 0.75, rtol=1e-5)
    # MFU: 6N (N without the embedding lookup, with the head) + 12·L·s·h·d, over the peak
    mf = 6 * (PARAMS - V * D + V * D) + 12 * L * 128 * H * DH
    np.testing.assert_allclose(none.model_flops_per_token, mf, rtol=1e-6)
    np.testing.assert_allclose(none.mfu, 256 / none.step_time_s * mf / 1e12, rtol=1e-5)
    np.testing.assert_allclose(full.hfu / full.mfu, 1 + (2 * PARAMS + 4 * L * 128 * H * DH) / mf, rtol=1e-5)


@pytest.mark.parametrize("vp, fraction", [(1.0, 3 / 8), (2.0, 3 / 16)])
def test_bubble(model, hw, vp, fraction):
    """(p - 1)/(v·m) with p = 4, m = 8 micro-batches: the bubble is that
    fraction of the micro-batches' own time."""
    r = step(model, hw, Parallel(pp=4, vp=vp), global_batch=16.0)
    assert r.microbatches == 8.0
    np.testing.assert_allclose(r.bubble_fraction, fraction, rtol=1e-6)
    work = r.forward + r.backward + r.recompute + r.scaling + r.host + np.sum(r.comm[:4])
    np.testing.assert_allclose(r.bubble, fraction * work, rtol=1e-5)
    np.testing.assert_allclose(r.step_time_s, work + r.bubble + np.sum(r.comm[4]) + r.optimizer, rtol=1e-5)


@pytest.mark.parametrize("zero, shards", [(0, (1, 1, 1)), (1, (1, 1, 8)), (2, (1, 8, 8)), (3, (8, 8, 8))])
def test_zero_memory(model, hw, zero, shards):
    """2 / 2 / 12 bytes per parameter (ZeRO paper), the optimizer states
    sharded over dp = 8 from stage 1, gradients from 2, weights at 3."""
    r = step(model, hw, Parallel(dp=8), global_batch=16.0, zero=float(zero))
    np.testing.assert_allclose([r.weights_bytes, r.grads_bytes, r.optimizer_bytes],
                               [2 * PARAMS / shards[0], 2 * PARAMS / shards[1], 12 * PARAMS / shards[2]], rtol=1e-6)


def test_zero_shards_over_context_parallel_ranks(model, hw):
    """Context-parallel ranks hold the same weights, so ZeRO shards over
    dp·cp (Megatron-Core's intra_dp_cp_group): dp 2 x cp 4 at stage 3
    keeps 1/8 of every state, as dp 8 does."""
    r = step(model, hw, Parallel(dp=2, cp=4), global_batch=4.0, micro_batch=2.0, zero=3.0)
    np.testing.assert_allclose([r.weights_bytes, r.grads_bytes, r.optimizer_bytes],
                               [2 * PARAMS / 8, 2 * PARAMS / 8, 12 * PARAMS / 8], rtol=1e-6)


def test_hybrid_sharding_memory(model, hw):
    """HSDP (dp_shard): ZeRO 3 over dp = 32 with shard groups of 8 keeps
    1/8 of every state, as dp = 8 does; the 4 replicas hold the same shard."""
    r = step(model, hw, Parallel(dp=32), global_batch=64.0, zero=3.0, dp_shard=8.0)
    np.testing.assert_allclose([r.weights_bytes, r.grads_bytes, r.optimizer_bytes],
                               [2 * PARAMS / 8, 2 * PARAMS / 8, 12 * PARAMS / 8], rtol=1e-6)


def test_korthikanti_activations(model, hw):
    """Korthikanti et al. Table 2 with tp + sp: s·b·h·(34 + 5·a·s/h)/t per
    layer (GPT: MHA, 4h GELU MLP, dropout); GPT-3 175B dims (h 12288, a 96,
    s 2048, b 1, t 8) by hand; and
    the 1F1B stash of the tiny model (first stage: p micro-batches of its
    L/p layers, plus the fp32 logits of one micro-batch)."""
    gpt3 = replace(model, hidden=12288.0, heads=96.0)
    gpt3 = replace(gpt3, kv_heads=96.0, head_dim=128.0, intermediate=4 * 12288.0, gated=0.0)
    unfused = activation_per_layer(gpt3, 8.0, 1.0, 1.0, 2048.0, jnp.float32(0.0), fused_attention=False)
    np.testing.assert_allclose(unfused, 2048 * 12288 * (34 + 5 * 96 * 2048 / 12288) / 8, rtol=1e-6)
    sel = activation_per_layer(gpt3, 8.0, 1.0, 1.0, 2048.0, jnp.float32(1.0), fused_attention=False)
    np.testing.assert_allclose(sel, 2048 * 12288 * 34 / 8, rtol=1e-6)
    full = activation_per_layer(gpt3, 8.0, 1.0, 1.0, 2048.0, jnp.float32(2.0), fused_attention=False)
    np.testing.assert_allclose(full, 2048 * 12288 * 2 / 8, rtol=1e-6)
    # Table 2's tensor-parallel rows without sequence parallelism: 10·s·b·h stays whole on every rank, and
    # the full recomputation's layer input too
    sbh = 2048 * 12288
    no_sp = {r: activation_per_layer(gpt3, 8.0, 1.0, 1.0, 2048.0, jnp.float32(r), fused_attention=False,
                                     sequence_parallel=False) for r in (0.0, 1.0, 2.0)}
    np.testing.assert_allclose(no_sp[0.0], sbh * (10 + 24 / 8 + 5 * 96 * 2048 / (12288 * 8)), rtol=1e-6)
    np.testing.assert_allclose(no_sp[1.0], sbh * (10 + 24 / 8), rtol=1e-6)
    np.testing.assert_allclose(no_sp[2.0], sbh * 2, rtol=1e-6)
    # sequence parallel with the gathered inputs saved (no re-gather in the backward): the two norms'
    # outputs, 2·s·b·h each, whole; the other 30·s·b·h split
    kept = activation_per_layer(gpt3, 8.0, 1.0, 1.0, 2048.0, jnp.float32(1.0), fused_attention=False,
                                sp_regather=False)
    np.testing.assert_allclose(kept, sbh * (4 + 30 / 8), rtol=1e-6)
    # ... unless the norms are recomputed (recompute_modules layernorm): their outputs are not kept at all
    no_norms = activation_per_layer(gpt3, 8.0, 1.0, 1.0, 2048.0, jnp.float32(1.0), fused_attention=False,
                                    modules=[1.0, 0.0, 0.0, 0.0], sp_regather=False)
    np.testing.assert_allclose(no_norms, sbh * 30 / 8, rtol=1e-6)
    # tiny model (SwiGLU, no dropout), tp = 2, FlashAttention (no score term): per token norms 4h, attention
    # 2h + 2q + 4k + 2q = 10h, MLP 2h + 2·2·f + 2f = 2h + 6f
    per_layer = (4 * 64 + 10 * 64 + 2 * 64 + 6 * 128) * 128 * 2 / 2
    logits = 4 * 2 * 128 * V / 2
    r = step(model, hw, Parallel(tp=2, pp=2), global_batch=8.0)  # m = 4
    np.testing.assert_allclose(r.activation_bytes, per_layer * 4 * 2 + logits, rtol=1e-6)
    r = step(model, hw, Parallel(tp=2, pp=2, vp=2), global_batch=8.0)  # interleaved: p + (p - 1)/v = 2.5
    np.testing.assert_allclose(r.activation_bytes, per_layer * 4 * 2.5 + logits, rtol=1e-6)


def test_recompute_modules(model, hw):
    """Megatron-Core's recompute_modules on the tiny model (tp 1, one
    micro-batch of 2 x 128 tokens): layernorm frees the two norms' outputs
    (4h bytes per token), mlp the up-projection and activation outputs
    (2·2·f + 2f = 6f), and mlp runs the MLP's GEMMs again in the backward:
    8 layers x 2·tok·D·3·FF FLOPs at 1 TFLOP/s (the activation's element-wise
    pass takes no time on this chip). Under full recomputation they change
    nothing."""
    tok = 2 * 128
    base = step(model, hw)
    r = step(model, hw, recompute_layernorm=1.0, recompute_mlp=1.0)
    np.testing.assert_allclose(base.activation_bytes - r.activation_bytes, L * tok * (4 * D + 6 * FF), rtol=1e-6)
    np.testing.assert_allclose(r.recompute - base.recompute, L * 2 * tok * D * 3 * FF / 1e12, rtol=1e-5)
    # HFU counts the FLOPs run again, one step on one chip at 1 TFLOP/s: the MLP's GEMMs, its activation
    # (4 per element: operators.ACT_FLOPS) and the two norms (4 per element: NORM_FLOPS)
    again = L * (2 * tok * D * 3 * FF + 4 * tok * FF + 2 * 4 * tok * D)
    np.testing.assert_allclose(r.hfu - r.mfu, again / (r.step_time_s * 1e12), rtol=1e-4)
    full = step(model, hw, recompute=2.0)
    both = step(model, hw, recompute=2.0, recompute_layernorm=1.0, recompute_mlp=1.0)
    np.testing.assert_allclose([both.activation_bytes, both.recompute], [full.activation_bytes, full.recompute])


def test_sequence_parallel_bytes(model, hw):
    """TP = 2 with sequence parallelism: per layer an all-gather and a
    reduce-scatter around attention and around the MLP, each of the
    micro-batch's hidden states B = 256 tokens x 64 x 2 bytes, costing
    (n-1)/n·B/β on a switch, and the embedding's reduce-scatter and the
    head's all-gather, forward and backward, and in the backward each
    gathered input (attention's, the MLP's, the head's) gathered again for
    the weight gradients (Megatron-Core); the cross-entropy all-reduce of
    12 bytes per token (B'/β) in the forward only. Without the re-gather
    (DTensor's SP) one all-gather less each; without sequence parallelism
    an all-reduce (2(n-1)/n·B/β) after each sublayer forward and before
    it backward and around the embedding, no head gather: the same bytes."""
    B, beta = 256 * 64 * 2, 1e11
    r = step(model, hw, Parallel(tp=2))
    saved = (2 * (L * 2 * (0.5 * B + 0.5 * B) + 0.5 * B + 0.5 * B) + 256 * 12) / beta
    expected = saved + (L * 2 * 0.5 * B + 0.5 * B) / beta
    np.testing.assert_allclose(r.comm_total[0], expected, rtol=1e-5)
    twl = TrainWorkload(global_batch=2.0, micro_batch=2.0, seq=128.0, eff_network=0.0, backward_efficiency=1.0)
    for opts, want in ((TrainOptions(sp_regather=False), saved),
                       (TrainOptions(sequence_parallel=False), (L * 2 * 2 * B + 2 * B + 256 * 12) / beta)):
        got = jax.device_get(train_step(model, hw, Parallel(tp=2), twl, opts))
        np.testing.assert_allclose(got.comm_total[0], want, rtol=1e-5)
    np.testing.assert_allclose(np.sum(r.comm[0]), expected, rtol=1e-5)  # no overlap: all exposed, on NVLink
    np.testing.assert_allclose(r.comm[0][0], expected, rtol=1e-5)
    # Overlapped (Parallel.overlap) beside their GEMMs, far longer than these collectives: the overlapped
    # share of the layers' and the head's collectives hidden; the embedding's and the statistics' exposed.
    alone = (2 * 0.5 * B + 256 * 12) / beta
    half = step(model, hw, Parallel(tp=2, overlap=0.5))
    np.testing.assert_allclose(np.sum(half.comm[0]), alone + (expected - alone) / 2, rtol=1e-5)
    np.testing.assert_allclose(np.sum(step(model, hw, Parallel(tp=2, overlap=1.0)).comm[0]), alone, rtol=1e-5)


def test_overlapped_tp_hides_one_chunk_short_of_its_gemms(model, hw):
    """On a slow link (10 MB/s) every TP collective outlasts the GEMM it is
    decomposed into, so overlap hides, per pass, (tp - 1)/tp of that GEMM's
    time (one of tp chunks runs alone): over the forward (1x) and the
    backward (2x: data and weight gradients) the layers' GEMMs and the
    head's, 1/tp of them on each rank: (1/2)·3·(gemm + head)/2 / 1 TFLOP/s
    at tp 2, by hand."""
    slow = hardware_from_dict({**HW, "network": [{**HW["network"][0], "bandwidth": 1e7}, HW["network"][1]]})
    gemm, head, _ = hand_flops()
    r = step(model, slow, Parallel(tp=2, overlap=1.0))
    np.testing.assert_allclose(r.comm_total[0] - np.sum(r.comm[0]), 0.5 * 3 * (gemm + head) / 2 / 1e12, rtol=1e-4)


def test_time_energy_cost_to_train(model, hw):
    """D tokens take D / (global batch x seq) steps; energy = time x power
    x chips; cost = time x (chips x price / lifetime + power x chips x PUE x
    USD/J) (cost.money). Another configuration of the same shapes reuses
    the compiled step (no trace, no compile)."""
    priced = replace(hw, price=30000.0, lifetime=4 * 365 * 86400.0, energy_price=0.1 / 3.6e6, pue=1.2)
    r = step(model, priced, Parallel(dp=4), global_batch=8.0, tokens=1e9)
    steps = 1e9 / (8 * 128)
    np.testing.assert_allclose(r.train_time_s, steps * r.step_time_s, rtol=1e-5)
    np.testing.assert_allclose(r.train_energy_j, r.train_time_s * r.power_w * 4, rtol=1e-5)
    capex = 4 * 30000.0 / (4 * 365 * 86400.0)
    np.testing.assert_allclose(r.train_cost_usd, r.train_time_s * (capex + r.power_w * 4 * 1.2 * 0.1 / 3.6e6),
                               rtol=1e-5)
    with compile_events() as events:
        step(model, priced, Parallel(tp=2, pp=2, vp=2, dp=2, overlap=0.3), global_batch=16.0, zero=3.0)
    assert events == []


def test_uneven_pipeline_split(model, hw):
    """10 layers on 4 stages: the busiest stage holds ceil(10/4) = 3 layers
    (and the LM head) and sets the pace of every micro-batch."""
    gemm, head, attn = hand_flops()
    r = step(replace(model, layers=10.0, dense_layers=10.0), hw, Parallel(pp=4), global_batch=8.0)  # m = 4
    np.testing.assert_allclose(r.forward, 4 * (3 * (gemm + attn) / L + head) / 1e12, rtol=1e-4)


@pytest.mark.parametrize("zero, per_step", [(0, 4.0), (1, 3.0), (3, 2 * 4.0)])
def test_data_parallel_bytes(model, hw, zero, per_step):
    """dp = 2 on one switch, P parameters: ZeRO 0 all-reduces 4-byte
    gradients (ring: B/β for B = 4P); ZeRO 1 reduce-scatters them (B/2β)
    and all-gathers 2-byte weights (P/β): 3P/β; ZeRO 3 gathers the weights
    before each micro-batch's forward and backward and reduce-scatters its
    gradients, 4P/β per micro-batch (m = 2)."""
    r = step(model, hw, Parallel(dp=2), global_batch=8.0, zero=float(zero), micro_batch=2.0)
    assert r.microbatches == 2.0
    np.testing.assert_allclose(r.comm_total[4], per_step * PARAMS / 1e11, rtol=1e-5)


@pytest.fixture(scope="module")
def latency_hw():
    """HW with 1 µs links inside a node of 8 and 10 µs between nodes, and
    bandwidth without limit: collectives cost their latency steps only."""
    net = [{**HW["network"][0], "latency": 1e-6, "bandwidth": 1e23},
           {**HW["network"][1], "latency": 1e-5, "bandwidth": 1e22}]
    return hardware_from_dict({**HW, "network": net})


@pytest.mark.parametrize("zero, calls", [(1, 2), (3, 3 * L)])
def test_data_parallel_ring_latency(model, latency_hw, zero, calls):
    """dp = 32 over 4 nodes of 8, links of 1 µs inside a node and 10 µs
    between, bandwidth without limit: NCCL's ring steps 32 - 4 = 28 times
    inside the nodes and 3 times between them (39 µs a call, linear in dp,
    where a hierarchical form would take 7 + 3 steps). ZeRO 1: one bucket
    (344,064 parameters < 4e7) reduce-scattered and one gathered per step;
    ZeRO 3: each of the 8 layers (FSDP units) gathered twice and reduced
    once per micro-batch."""
    r = step(model, latency_hw, Parallel(dp=32), global_batch=64.0, zero=float(zero), dp_overlap=0.0)
    assert r.microbatches == 1.0
    per_call = 28 * 1e-6 + 3 * 1e-5
    np.testing.assert_allclose(r.comm_total[4], calls * per_call, rtol=1e-3)


def test_hybrid_sharding_collectives(model, latency_hw):
    """HSDP over dp = 32 (4 nodes of 8), shard groups of 8: each layer's
    gathers and reduce-scatter ring inside a node (7 steps of 1 µs, 3 x 8
    calls per micro-batch), and once per step the 4 replicas, one per node,
    all-reduce their gradient shards over the 10 µs links (one-shot: one
    step, the bandwidth being unlimited): 168 + 10 µs."""
    r = step(model, latency_hw, Parallel(dp=32), global_batch=64.0, zero=3.0, dp_shard=8.0, dp_overlap=0.0)
    np.testing.assert_allclose(r.comm_total[4], 3 * L * 7 * 1e-6 + 1e-5, rtol=1e-3)


def test_context_parallel_ranks_reduce_gradients(model, hw):
    """cp = 2 alone (dp = 1): the two ranks sum their halves' gradients, a
    4-byte all-reduce over 2 ranks (B/β for B = 4P) that a dp-only group
    would miss."""
    r = step(model, hw, Parallel(cp=2), global_batch=2.0, micro_batch=2.0)
    np.testing.assert_allclose(r.comm_total[4], 4.0 * PARAMS / 1e11, rtol=1e-5)


def test_a_training_study_sweeps_hybrid_sharding(tmp_path, capsys):
    """A study's `dp_shard` axis shards as `jaxplat train --dp-shard` does,
    and its `options.sp` runs tensor parallelism as `--sp` does: every row
    of top_k.csv, sent back through `jaxplat train` with its flags, gives
    the same step time; 3 does not divide dp (64 or 32), so its points are
    not feasible, and the top rows name --dp-shard only where it is not 0
    (and --sp, not the default, in every row)."""
    from jaxplat.search.train_study import load_study, train_command
    study = dict(name="hsdp", task="train", models=["llama-3.1-8b"], hardware="dgx-h100-pod",
                 axes=dict(chips=[64], tp=[1, 2], zero=[1, 3], dp_shard=[0, 3, 8], global_batch=[64], seq=[2048]),
                 options={"sp": "saved"}, objective={"maximize": "tokens_per_s_per_chip"}, top_k=20)
    path, top = sweep_training_study(tmp_path, study, capsys)
    assert sorted(zip(top["tp"], top["zero"], top["dp_shard"])) == [
        (t, z, d) for t in (1, 2) for z in (1, 3) for d in (0, 8)]
    st = load_study(path)
    for _, r in top.iterrows():
        argv = train_argv("llama-3.1-8b", "dgx-h100-pod", r, TRAIN_FLAGS + ("dp_shard",)) + ["--sp", "saved"]
        assert (" --dp-shard 8" in train_command(st, r)) == (r["dp_shard"] == 8)
        assert " --sp saved" in train_command(st, r)
        assert main(argv) == 0, argv
        got = json.loads(capsys.readouterr().out)
        np.testing.assert_allclose(got["step_time_s"], r["step_time_s"], rtol=1e-5)


def test_a_training_study_runs_its_attention_kernel(tmp_path, capsys):
    """options.attention_kernel: fa2 prices every configuration with
    FlashAttention-2's speeds (slower than the chip's own kernel at 8k tokens)
    and its top rows' `jaxplat train` commands name the kernel and give the
    same step time."""
    from jaxplat.search.train_study import load_study, train_command
    study = dict(name="fa2", task="train", models=["llama-3.1-8b"], hardware="dgx-h100-pod",
                 axes=dict(chips=[64], tp=[1, 2], zero=[1, 3], global_batch=[64], seq=[8192]),
                 objective={"maximize": "tokens_per_s_per_chip"}, top_k=4)
    path, top = sweep_training_study(tmp_path, {**study, "options": {"attention_kernel": "fa2"}}, capsys)
    st = load_study(path)
    for _, r in top.iterrows():
        assert " --attention-kernel fa2" in train_command(st, r)
        assert main(train_argv("llama-3.1-8b", "dgx-h100-pod", r) + ["--attention-kernel", "fa2"]) == 0
        np.testing.assert_allclose(json.loads(capsys.readouterr().out)["step_time_s"], r["step_time_s"], rtol=1e-5)
    assert main(train_argv("llama-3.1-8b", "dgx-h100-pod", top.iloc[0])) == 0  # the chip's own kernel
    assert json.loads(capsys.readouterr().out)["step_time_s"] < 0.95 * float(top["step_time_s"].iloc[0])


def test_gradient_matches_finite_differences(model, hw):
    """d step / d (scale of peak FLOP/s, memory bandwidth, network bandwidth)
    at 1, by jax.grad and by central differences (a vmapped forward)."""
    slow = replace(hw, mem_bw=hw.mem_bw * 1e-7)  # 100 GB/s: some rows memory-bound
    par = Parallel(tp=2, pp=2, dp=4)
    twl = TrainWorkload(global_batch=16.0, micro_batch=2.0, seq=128.0, zero=1.0, eff_network=0.0,
                        backward_efficiency=1.0)

    def f(a):
        h = replace(slow, flops=slow.flops * a[0], mem_bw=slow.mem_bw * a[1], net_bw=slow.net_bw * a[2])
        return train_step(model, h, par, twl).step_time_s

    g = jax.grad(f)(jnp.ones(3))
    eps = 1e-2
    pts = jnp.concatenate([jnp.eye(3) * eps + 1.0, -jnp.eye(3) * eps + 1.0])
    vals = jax.vmap(f)(pts)
    fd = (vals[:3] - vals[3:]) / (2 * eps)
    assert np.all(np.isfinite(g)) and np.all(np.asarray(g) < 0)  # faster chips, shorter steps
    np.testing.assert_allclose(g, fd, rtol=2e-2)


@pytest.fixture(scope="module")
def specs(tmp_path_factory):
    d = tmp_path_factory.mktemp("train")
    (d / "config.json").write_text(json.dumps(CONFIG))
    import yaml

    from jaxplat.model.hardware_layout import grouped_layout  # files in today's layout: no flat-layout note
    (d / "chip.yaml").write_text(yaml.safe_dump(grouped_layout({"name": "chip", **HW})))
    (d / "small.yaml").write_text(yaml.safe_dump(grouped_layout({"name": "small", **HW, "memory": [
        {"name": "hbm", "size": 1e6, "bandwidth": 1e18}]})))
    return str(d / "config.json"), str(d / "chip.yaml"), str(d / "small.yaml")


@pytest.mark.parametrize("flags, message", [
    (["--chips", "6", "--tp", "4"], "--chips 6 is not divisible by tp·pp·cp = 4; e.g. --chips 4 or 8"),
    (["--chips", "8", "--ep", "2"], "--ep 2: "),
    (["--chips", "8", "--global-batch", "12"],
     "--global-batch 12 is not divisible by micro-batch × data-parallel degree = 1 × 8 = 8; "
     "e.g. --global-batch 8 or 16"),
    (["--chips", "2", "--pp", "2", "--vp", "8", "--global-batch", "4"],
     "--vp 8: more virtual stages than layers per pipeline stage (pp·vp = 16 for the model's 8 layers, 4 per "
     "stage); at most --vp 4"),
    (["--chips", "1", "--recompute", "some"], "--recompute 'some' is not one of none, selective, full"),
    (["--chips", "1", "--zero", "4"], "--zero '4' is not one of 0, 1, 2, 3"),
    (["--chips", "1", "--recompute-modules", "layernorm,attn"],
     "--recompute-modules 'attn' is not one of layernorm, mla_up_proj, moe_act, mlp"),
    (["--chips", "1", "--dtype", "fp16"], "--dtype 'fp16' is not one of bf16, fp8, fp4, int8"),
    (["--chips", "1", "--dtype", "FP8"], "--dtype 'FP8' is not one of bf16, fp8, fp4, int8 (did you mean 'fp8'?)"),
    (["--chips", "1", "--sp", "dtensor"], "--sp 'dtensor' is not one of regather, saved, off"),
    (["--chips", "1", "--attention-kernel", "fa3"],
     "--attention-kernel 'fa3' is not one of native, fa2, triton (did you mean 'fa2'?)"),
    (["--chips", "1", "--sp", "regathr"],
     "--sp 'regathr' is not one of regather, saved, off (did you mean 'regather'?)"),
    (["--chips", "3", "--tp", "3"], "--tp 3 does not divide the model's 4 attention heads; e.g. --tp 1, 2, 4"),
    (["--chips", "1", "--overlap", "1.5"], "--overlap must lie in [0, 1], got 1.5"),
    (["--chips", "1", "--moe-host", "1e-3"],
     "--moe-host must be LAYER_S,EXPERT_S (two numbers of seconds), got '1e-3'"),
    (["--chips", "1", "--moe-host=-1,0"], "--moe-host seconds must lie in [0, 1), got -1,0"),
    (["--chips", "1", "--ep-overlap", "-0.5"], "--ep-overlap must lie in [0, 1], got -0.5"),
    (["--chips", "1", "--tokens=-1e12"], "--tokens must be a number of tokens to train on, >= 0 (e.g. 1.5e13), "
     "got -1e+12"),
    (["--chips", "8", "--zero", "3", "--dp-shard", "3"],
     "--dp-shard 3 must divide the data-parallel degree 8; e.g. --dp-shard 1, 2, 4, 8"),
    (["--chips", "8", "--dp-shard", "4"], "--dp-shard 4 shards ZeRO states, and --zero 0 has none"),
])
def test_cli_bad_input(specs, capsys, flags, message):
    cfg, chip, _ = specs
    base = {"--global-batch": "16", "--seq": "128"}
    args = ["train", "--model", cfg, "--hardware", chip, *flags]
    for k, v in base.items():
        if k not in flags:
            args += [k, v]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err


def test_cli_sequence_parallel_modes(specs, capsys):
    """--sp: Megatron's re-gather costs TP communication that DTensor's saved
    inputs cost in memory instead; without sequence parallelism the norms'
    inputs and the dropout masks stay whole on every rank too (more memory
    still). The text header names a mode that is not the default."""
    cfg, chip, _ = specs
    args = ["train", "--model", cfg, "--hardware", chip, "--chips", "2", "--tp", "2", "--global-batch", "2",
            "--micro-batch", "2", "--seq", "128"]
    out = {}
    for mode in ("regather", "saved", "off"):
        assert main([*args, "--sp", mode, "--json"]) == 0
        out[mode] = json.loads(capsys.readouterr().out)
        assert out[mode]["sp"] == mode
    assert out["regather"]["comm_exposed_s"]["tp"] > out["saved"]["comm_exposed_s"]["tp"]
    assert out["regather"]["memory_bytes"] < out["saved"]["memory_bytes"] < out["off"]["memory_bytes"]
    assert main([*args, "--sp", "saved"]) == 0
    assert "sequence parallelism saved" in capsys.readouterr().out.splitlines()[0]


def test_cli_attention_kernel_is_the_step_of_its_speeds(specs, capsys):
    """--attention-kernel fa2 is train_step with FlashAttention-2's forward and
    backward speeds on Hopper (cost.attention_kernels), slower than the chip's
    own kernel by its attention rows only; the header and JSON name it."""
    cfg, chip, _ = specs
    args = ["train", "--model", cfg, "--hardware", chip, "--chips", "1", "--global-batch", "2", "--micro-batch", "2",
            "--seq", "128"]
    out = {}
    for kernel in ("native", "fa2"):
        assert main([*args, "--attention-kernel", kernel, "--json"]) == 0
        out[kernel] = json.loads(capsys.readouterr().out)
        assert out[kernel]["attention_kernel"] == kernel
    model, hw = load_model(cfg), load_hardware(chip)  # as the command reads them
    speed, backward = ATTENTION_KERNELS["fa2"]
    twl = TrainWorkload(global_batch=2.0, micro_batch=2.0, seq=128.0, attention_kernel_speed=speed,
                        attention_backward_speed=backward)
    np.testing.assert_allclose(out["fa2"]["step_time_s"], float(train_step(model, hw, Parallel(), twl).step_time_s),
                               rtol=1e-5)
    assert out["fa2"]["phases_s"]["forward"] > out["native"]["phases_s"]["forward"]
    assert out["fa2"]["phases_s"]["optimizer"] == out["native"]["phases_s"]["optimizer"]
    assert main(args) == 0
    assert "attention kernel fa2" not in capsys.readouterr().out
    assert main([*args, "--attention-kernel", "fa2"]) == 0
    assert "attention kernel fa2" in capsys.readouterr().out.splitlines()[0]


def test_cli_json_and_infeasible(specs, capsys):
    cfg, chip, small = specs
    args = ["--model", cfg, "--chips", "8", "--tp", "2", "--pp", "2", "--global-batch", "16", "--micro-batch", "2",
            "--seq", "128", "--json"]
    assert main(["train", "--hardware", chip, *args]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("step_time_s", "tokens_per_s_per_chip", "mfu", "hfu", "memory_bytes", "fits"):
        assert key in out
    assert out["fits"] is True and out["dp"] == 2 and out["step_time_s"] > 0
    np.testing.assert_allclose(out["tokens_per_s_per_chip"], 16 * 128 / out["step_time_s"] / 8, rtol=1e-5)
    assert main(["train", "--hardware", small, *args]) == 3  # 1 MB of memory
    cap = capsys.readouterr()
    assert "infeasible: needs" in cap.err and json.loads(cap.out)["fits"] is False
    assert "try --zero 1 or --zero 3, --recompute selective or full, a smaller --micro-batch" in cap.err
    assert main(["train", "--hardware", small, *args, "--zero", "1", "--recompute", "full"]) == 3
    hint = capsys.readouterr().err.split("try ")[1]  # only what the run has not tried yet
    assert hint.startswith("--zero 3, a smaller --micro-batch") and "--recompute" not in hint
    assert main(["train", "--hardware", small, *args[:-1], "--allow-infeasible"]) == 0
    assert "step time" in capsys.readouterr().out
