"""State-space (Mamba, Falcon-Mamba, Mamba-2) and hybrid (Jamba) models: configs
load, the genz profile reproduces GenZ 0.0.16 on Falcon-Mamba-7B
(tests/data/genz_ssm), decode cost is flat in context, and the recurrent
state replaces the KV cache on Mamba layers."""

import csv
import glob
import json
from pathlib import Path

import numpy as np
import pytest
from helpers import workload

import jaxplat as jp
from jaxplat.cost.training_memory import flop_params
from jaxplat.model import param_count, replace
from jaxplat.specs import SpecError

DATA = Path(__file__).resolve().parent / "data"
REPO = Path(__file__).resolve().parents[1]
GENZ = jp.Options(profile="genz")
MIB = 2.0**20


def _config(name):
    return json.loads((REPO / "data" / "hf_configs" / f"{name}.json").read_text())


def _model(name):
    return jp.model.model_from_config(_config(name), src=name)


@pytest.mark.parametrize("name,params,mamba,attn,moe", [
    ("falcon-mamba-7b", 7.27e9, 64, 0, 0),   # TII model card: 7.27B parameters
    ("mamba-2.8b", 2.8e9, 64, 0, 0),         # state-spaces/mamba-2.8b
    ("jamba-v0.1", 51.6e9, 28, 4, 16),       # Lieber et al. 2024: 52B total (hf_configs README: 51.6B)
])
def test_ssm_configs_load(name, params, mamba, attn, moe):
    m = _model(name)
    assert float(param_count(m)) == pytest.approx(params, rel=0.015)
    assert float(m.mamba_layers) == mamba
    assert float(jp.model.attention_layers(m)) == attn
    assert float(jp.model.moe_layers(m)) == moe


def test_every_hf_config_loads():
    files = sorted(glob.glob(str(REPO / "data" / "hf_configs" / "*.json")))
    assert len(files) >= 3
    for f in files:
        assert float(param_count(jp.load_model(f))) > 1e8, f


def _mamba2(**kw):
    # state-spaces/mamba2-2.7b's config.json (test_mamba2_config); `kw` overrides its keys
    cfg = dict(model_type="mamba2", num_hidden_layers=64, hidden_size=2560, state_size=128, num_heads=80,
               head_dim=64, n_groups=1, expand=2, conv_kernel=4, vocab_size=50288)
    return jp.model.model_from_config({**cfg, **kw})


def test_mamba2_config():
    # state-spaces/mamba2-2.7b config.json: 64 layers, d_model 2560, d_state 128, head_dim 64
    # (80 heads = 2 x 2560 / 64), one group, vocab 50288 (padded); published as 2.7B parameters.
    m = _mamba2()
    assert m.ssm == "mamba2" and float(m.d_inner) == 5120
    assert float(param_count(m)) == pytest.approx(2.7e9, rel=0.02)
    # Dao & Gu 2024, Sec. 7.1: one in-projection to z, x (2 x 5120), B, C (2 x 1 group x 128) and dt (80 heads)
    t = jp.cost.build_table(m, jp.Parallel(), workload(batch=3, prompt=64, output=2), "decode", jp.Options())
    row = {n: i for i, n in enumerate(t.names)}
    assert float(t.n[row["ssm_in_proj"]]) == 2 * 5120 + 2 * 128 + 80
    # state per sequence: 5120 x 128 SSM + (5120 + 2 x 128) conv channels x 4 taps, bf16, 3 sequences
    assert float(t.o0[row["ssm_state_write"]]) == 3 * (5120 * 128 + 5376 * 4) * 2.0
    assert "ssm_dt_proj" not in row  # dt comes out of the in-projection


@pytest.mark.parametrize("prompt,chunk", [(1024, 256), (100, 100)])
def test_mamba2_prefill_runs_the_chunked_scan_by_hand(prompt, chunk):
    """Prefill runs Mamba-2's chunked dual form (Dao & Gu 2024, Sec. 6): per
    token 2 Q N per group (C Bᵀ) and (2 Q + 4 N) per channel ((L ∘ C Bᵀ) X,
    Bᵀ X, C h), Q the chunk (256 by default) or a shorter prompt; plus the
    gate's 9 per channel. A decode step runs the recurrence, 6 N per channel."""
    m = _mamba2()
    assert float(m.ssm_chunk) == 256.0
    tok, di, n = 3 * prompt, 5120, 128
    t = jp.cost.build_table(m, jp.Parallel(), workload(batch=3, prompt=prompt, output=2), "prefill", jp.Options())
    scan = t.names.index("ssm_scan")
    assert float(t.f0[scan]) == pytest.approx(tok * (2 * chunk * n + (2 * chunk + 4 * n) * di + 9 * di), rel=1e-6)
    d = jp.cost.build_table(m, jp.Parallel(), workload(batch=3, prompt=prompt, output=2), "decode", jp.Options())
    assert float(d.f0[d.names.index("ssm_scan")]) == pytest.approx(3 * (6 * di * n + 9 * di), rel=1e-6)
    assert float(_mamba2(chunk_size=128).ssm_chunk) == 128.0  # a config's own chunk_size (Nemotron-H: 128)


def test_mamba2_scan_reads_its_chips_groups_by_hand():
    """Tensor-parallel Mamba-2 splits the B/C groups over the ranks with the heads: on 2 chips, 8 groups of
    state 128, the scan row of a 3 x 64-token prefill reads x, dt and z (3 x 2560 channels) and B and C of
    4 groups (2 x 4 x 128) per token, in bf16, plus A, D and the dt bias of its 40 heads."""
    m = _mamba2(n_groups=8)
    t = jp.cost.build_table(m, jp.Parallel(tp=2.0), workload(batch=3, prompt=64, output=2), "prefill", jp.Options())
    scan = t.names.index("ssm_scan")
    assert float(t.a0[scan]) == pytest.approx(3 * 64 * (3 * 2560 + 2 * 4 * 128) * 2.0 + 3 * 40 * 2.0, rel=1e-6)


def test_scan_efficiency_reproduces_the_ssd_kernel_measurement(h100):
    """The shipped `scan` efficiency puts Mamba-2's scan, at the shape of the
    SSD microbenchmark it was set from (data/measured/kernels_ssd.csv: 128
    heads of 64, one group, state 128, chunk 256 on an H100), at the median
    of its plateau (>= 4096 tokens), and in 16 bits under an FP8 workload."""
    with open(REPO / "data" / "measured" / "kernels_ssd.csv") as f:
        rows = [r for r in csv.DictReader(f) if int(r["tokens"]) >= 4096]
    measured = float(np.median([float(r["value"]) for r in rows]))
    m = _mamba2(num_heads=128, head_dim=64, hidden_size=4096, chunk_size=256, num_hidden_layers=1)
    hw = replace(h100, kernel_latency=0.0)
    for dtype in ("bf16", "fp8"):
        wl = workload(batch=1, prompt=16384, output=2, dtype=dtype)
        t = jp.cost.build_table(m, jp.Parallel(), wl, "prefill", jp.Options())
        c0 = jp.cost.inference.row_components(t, hw, wl, jp.Options())[0]
        assert 16384 / float(c0[t.names.index("ssm_scan")]) == pytest.approx(measured, rel=0.01), dtype


def test_a_study_mixes_a_state_space_model_with_a_transformer():
    """One sweep over Llama-3.1-8B and Falcon-Mamba-7B (two kinds, one
    compiled step: a lax.switch branch each): every configuration's TPOT is
    the one jitted evaluate gives it, ranked as a Python loop ranks them."""
    from jaxplat import search
    study = search.study_from_dict(dict(
        models=["llama-3.1-8b", "falcon-mamba-7b"], workloads=["qa"], hardware="h100-sxm",
        axes=dict(tp=[1, 2], batch=[1, 8]), constraints=dict(ttft="none", tpot="none"),
        objective={"minimize": "tpot"}, top_k=8, engine=dict(block=4, blocks_per_step=1, fast_compile=True)))
    engine = search.Engine(study)
    assert len(engine.kinds) == 2
    res = search.run(engine, progress=False)
    one = lambda m, h, p, w: jp.evaluate(m, h, p, w, study.options)  # noqa: E731 (jitted: _evaluate)
    hw, wl = jp.load_hardware("h100-sxm"), jp.load_workload("qa")
    want = []
    for flat in range(study.size):
        c = {k: v[0] for k, v in study.decode([flat]).items()}
        r = one(jp.load_model(c["model"]), hw, jp.Parallel(tp=c["tp"]), jp.replace(wl, batch=c["batch"]))
        want.append((float(r.tpot), flat))
    counts = dict(zip(search.COUNTERS, res.counts, strict=True))
    assert study.size == 8 and counts["evaluated"] == counts["feasible"] == 8
    assert list(res.top["index"]) == [f for _, f in sorted(want)]
    np.testing.assert_allclose(res.top["vals"][:, engine.metrics.index("tpot")], sorted(t for t, _ in want), rtol=1e-5)


def test_unsupported_ssm_is_a_one_line_error():
    with pytest.raises(SpecError, match="zamba"):
        jp.model.model_from_config(dict(model_type="zamba", num_hidden_layers=2, hidden_size=8, vocab_size=8))
    with pytest.raises(SpecError, match="state_size"):
        jp.model.model_from_config(dict(model_type="mamba", num_hidden_layers=2, hidden_size=8, vocab_size=8))


def test_genz_falcon_mamba_matches_genz():
    """GenZ 0.0.16's own latencies and KV (state) sizes, contexts 1k-128k,
    batch 1 and 8 x 2 beams, tp 1 and 2 (tests/data/genz_ssm/README.md)."""
    m = jp.load_model("falcon-mamba-7b")  # GenZ's model set values
    hw = jp.model.genz_h100()
    rows = list(csv.DictReader(open(DATA / "genz_ssm" / "falcon_mamba_h100.csv")))
    assert len(rows) == 20
    for r in rows:
        wl = workload(batch=int(r["batch"]), beams=int(r["beams"]), prompt=int(r["prompt"]), output=int(r["output"]))
        met = jp.evaluate(m, hw, jp.Parallel(tp=float(r["tp"])), wl, GENZ)
        assert float(met.ttft) * 1e3 == pytest.approx(float(r["prefill_ms"]), rel=1e-5), r
        assert float(met.tpot) * 1e3 == pytest.approx(float(r["decode_ms"]), rel=1e-5), r
        assert float(met.kv_bytes) / MIB == pytest.approx(float(r["decode_kv_mib"]), rel=1e-6), r


@pytest.mark.parametrize("profile", ["default", "genz"])
def test_tpot_flat_in_context(profile, h100):
    # without the calibrated fixed latencies (per kernel, per iteration): they do not scale with the prompt
    h100 = replace(h100, kernel_latency=0.0, iteration_overhead=0.0)
    m, opts = _model("falcon-mamba-7b"), jp.Options(profile=profile)
    short = jp.evaluate(m, h100, jp.Parallel(), workload(batch=4, prompt=1024, output=256), opts)
    long = jp.evaluate(m, h100, jp.Parallel(), workload(batch=4, prompt=131072, output=256), opts)
    assert float(long.tpot) == pytest.approx(float(short.tpot), rel=1e-6)
    assert float(long.kv_bytes) == pytest.approx(float(short.kv_bytes), rel=1e-6)
    # prefill is linear in the prompt (no attention): 128x the tokens, ~128x the time
    assert float(long.ttft) / float(short.ttft) == pytest.approx(128.0, rel=0.05)


def test_decode_step_by_hand():
    """Falcon-Mamba decode at batch 1 on a plain chip (one memory level, no
    SRAM) is memory-bound: a step reads every weight once (7.27e9 bf16
    parameters, less the embedding table, which a lookup reads one row of)
    and reads and writes the state, 64 x 8192 x (16 + 4) bf16 elements."""
    m = _model("falcon-mamba-7b")
    bw = 2.0e12
    hw = jp.model.hardware_from_dict({"flops": {"bf16": 1e15}, "memory": [{"name": "hbm", "size": 1e11, "bandwidth": bw}],
                                      "network": [{"domain": 8, "bandwidth": 1e11, "latency": 1e-6}], "tdp_w": 1000})
    wl = workload(batch=1, prompt=2000, output=2)
    met = jp.evaluate(m, hw, jp.Parallel(), wl, jp.Options(memory_hierarchy=False))
    weights = (float(param_count(m)) - 65024 * 4096) * 2.0
    state = 64 * 8192 * (16 + 4) * 2.0
    assert float(met.tpot) == pytest.approx((weights + 2 * state) / bw, rel=0.01)
    assert float(met.kv_bytes) == pytest.approx(state, rel=1e-6)


@pytest.mark.parametrize("profile", ["default", "genz"])
def test_jamba_kv_is_attention_kv_plus_state(profile, h100):
    m = _model("jamba-v0.1")
    b, beams, P, O, bpe = 2, 2, 1000, 100, 2.0
    met = jp.evaluate(m, h100, jp.Parallel(), workload(batch=b, beams=beams, prompt=P, output=O), jp.Options(profile=profile))
    # 4 attention layers: K and V of 8 heads x 128 for the prompt once per sequence and each beam's output
    kv = 4 * 2 * 8 * 128 * (b * P + b * beams * O) * bpe
    # 28 Mamba layers, d_inner 8192: SSM state (d_state 16) per sequence and beam, conv window (d_conv 4)
    # per sequence and beam; GenZ counts the conv window once (its conv weights)
    conv_seqs = 1 if profile == "genz" else b * beams
    state = 28 * 8192 * (b * beams * 16 + conv_seqs * 4) * bpe
    assert float(met.kv_bytes) == pytest.approx(kv + state, rel=1e-6)


NEMOTRON_3_NANO = "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME"


def test_nemotron_3_nano_spec_counts_its_model_cards_parameters():
    """Nemotron-3-Nano-30B-A3B (nemotron_h): 52 one-sublayer blocks, 23 Mamba-2
    (64 heads of 64, 8 groups, state 128, conv 4 on a 2,688 residual), 23 MoE
    (128 squared-ReLU experts of 1,856, top 6, one shared MLP of 3,712, a
    router) and 6 GQA attention (32 query and 2 KV heads of 128), untied
    131,072-token embedding and head. Counted by hand, weights only: 31.58B,
    the model card's 31.6B total. The blocks pair into 29 layers of a mixer
    and an FFN, 6 of them without one."""
    D, V = 2688, 131072
    in_proj = D * (2 * 4096 + 2 * 8 * 128 + 64)                  # z, x, B, C, dt (Mamba-2)
    mamba = in_proj + (4096 + 2 * 8 * 128) * 4 + 2 * 64 + 4096 * D  # + conv, A and D, out-projection
    attention = D * 32 * 128 + 2 * D * 2 * 128 + 32 * 128 * D      # q, k, v, o
    moe = 128 * 2 * D * 1856 + 2 * D * 3712 + D * 128             # experts (up, down), shared MLP, router
    by_hand = 2 * V * D + 23 * mamba + 6 * attention + 23 * moe
    m = jp.load_model("nemotron-3-nano-30b-a3b")
    assert float(param_count(m)) == pytest.approx(by_hand, rel=1e-6)
    assert by_hand == pytest.approx(31.6e9, rel=2e-3)
    counts = {k: float(getattr(m, k)) for k in ("layers", "mamba_layers", "no_ffn_layers", "dense_layers")}
    assert counts == {"layers": 29.0, "mamba_layers": 23.0, "no_ffn_layers": 6.0, "dense_layers": 0.0}
    assert float(jp.model.moe_layers(m)) == 23 and float(jp.model.attention_layers(m)) == 6
    assert float(m.gated) == 0 and float(m.shared_experts) == 2 and m.ssm == "mamba2"
    # Active per token (6 routed experts, the shared MLP, the LM head; no input embedding): the card's 3.2B,
    # 3.6B with the embedding. The six FFN-less layers add nothing.
    active = 23 * mamba + 6 * attention + 23 * (6 * 2 * D * 1856 + 2 * D * 3712 + D * 128) + V * D
    assert float(flop_params(m)) == pytest.approx(active, rel=1e-6)
    assert active == pytest.approx(3.2e9, rel=0.02) and active + V * D == pytest.approx(3.6e9, rel=0.02)


def test_hybrid_activations_by_hand():
    """Nemotron-3 Nano's activations per layer and token (tp 2, no recompute,
    no dropout), 16-bit elements x 2 bytes by hand: the norms' inputs 4h;
    in 6 of its 29 layers attention (2h + 2q + 4k + 2q), in 23 Mamba-2 (the
    in-projection's input 2h, zxbcdt 2(2d + 2GN + H), the scan's and the
    out-projection's inputs 2d each, as mamba_ssm saves them); the MoE MLP
    (input 2h, each of 6 copies' input, up and activation outputs
    2h + 2f + 2f, the shared MLP's up and activation outputs 2·(2f) wide) in
    23 of 29, none in the other 6."""
    from jaxplat.cost.training_memory import activation_per_layer

    m = jp.load_model("nemotron-3-nano-30b-a3b")
    h, q, k, d, f = 2688, 32 * 128, 2 * 128, 4096, 1856
    attention = 2 * h + 2 * q + 4 * k + 2 * q
    mamba = 2 * h + 2 * (2 * d + 2 * 8 * 128 + 64) + 2 * d + 2 * d
    moe = 2 * h + 6 * (2 * h + 2 * f + 2 * f) + 2 * (2 * f + 2 * f)
    per_token = 4 * h + (6 * attention + 23 * mamba + 23 * moe) / 29
    got = activation_per_layer(m, 2.0, 1.0, 1.0, 8192.0, np.float32(0.0), fused_attention=True, dropout=0.0)
    assert float(got) == pytest.approx(per_token * 8192 / 2, rel=1e-6)


def _nemotron_h(**change):
    cfg = dict(model_type="nemotron_h", num_hidden_layers=6, hybrid_override_pattern="M-M*E-", hidden_size=64,
               num_attention_heads=4, num_key_value_heads=2, head_dim=16, intermediate_size=96, n_routed_experts=8,
               num_experts_per_tok=2, moe_intermediate_size=32, moe_shared_expert_intermediate_size=64,
               mamba_num_heads=4, mamba_head_dim=32, n_groups=2, ssm_state_size=16, vocab_size=128)
    return jp.model.model_from_config({**cfg, **change}, src="nh.json")


def test_nemotron_h_blocks_pair_into_layers():
    """'M-M*E-': mixers M, M, * and FFN blocks -, E, -: three layers, two of
    them with the dense MLP and one with the MoE, none without an FFN; the
    same blocks named by layers_block_type give the same model."""
    m = _nemotron_h()
    assert [float(x) for x in (m.layers, m.mamba_layers, m.dense_layers, m.no_ffn_layers)] == [3, 2, 2, 0]
    assert float(jp.model.moe_layers(m)) == 1 and float(jp.model.ffn_layers(m)) == 3
    names = ["mamba", "mlp", "mamba", "attention", "moe", "mlp"]
    same = _nemotron_h(hybrid_override_pattern=None, layers_block_type=names)
    assert float(param_count(same)) == float(param_count(m))
    dense_only = _nemotron_h(hybrid_override_pattern="M-M*-M", n_routed_experts=None)  # 4 mixers, 2 MLPs
    assert float(dense_only.no_ffn_layers) == 2 and float(jp.model.ffn_layers(dense_only)) == 2
    # Nemotron-H 8B/47B/56B spell head_dim attention_head_dim (64 / 4 would be 16 either way: use 8)
    assert float(_nemotron_h(head_dim=None, attention_head_dim=8).head_dim) == 8
    attention_only = _nemotron_h(hybrid_override_pattern="*-*E**", mamba_num_heads=None)  # no Mamba: no SSM rows
    assert attention_only.ssm == "none" and float(attention_only.no_ffn_layers) == 2


@pytest.mark.parametrize("change, words", [
    (dict(hybrid_override_pattern="M-EE-*"), "4 FFN blocks (E, -) but 2 mixers"),
    (dict(hybrid_override_pattern="M-M*E"), "has 5 blocks, num_hidden_layers says 6"),
    (dict(hybrid_override_pattern="M-M*X-"), "hybrid_override_pattern, a string of M"),
    (dict(n_routed_experts=None), "MoE blocks (E) but no n_routed_experts"),
    (dict(moe_latent_size=1024), "moe_latent_size = 1024 is not modelled (Nemotron 3's latent MoE"),
])
def test_nemotron_h_bad_patterns_are_one_line(change, words):
    with pytest.raises(SpecError) as e:
        _nemotron_h(**change)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_hybrid_stage_counts():
    m = _model("jamba-v0.1")
    c = jp.cost.operators.stage_counts(m, jp.Parallel(pp=4))
    assert float(c["attn"][1]) == 1 and float(c["mamba"][1]) == 7      # 8 layers a stage, 1 in 8 attention
    assert float(c["attn"][0]) == 4 and float(c["mamba"][0]) == 28
    assert float(c["moe"][1]) + float(c["dense"][1]) == 8


def test_decode_flops_are_twice_the_weights():
    """Each weight multiplies once per decoded token (2 FLOPs); the scan adds
    8 FLOPs per channel and state element, 16 x 8 / (2 x 3 x 4096) ~ 5%."""
    m = _model("mamba-2.8b")
    t = jp.cost.build_table(m, jp.Parallel(), workload(batch=1, prompt=100, output=2), "decode", jp.Options())
    flops = float((t.count * t.f0).sum())
    weights = float(param_count(m)) - 2560 * 50280  # the tied embedding is a lookup
    assert 2 * weights < flops < 2 * weights * 1.1


def test_estimate_cli_on_a_config_path(capsys):
    from jaxplat.cli.app import main
    path = str(REPO / "data" / "hf_configs" / "falcon-mamba-7b.json")
    assert main(["estimate", "--model", path, "--hardware", "h100-sxm", "--batch", "1", "--beams", "1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["kv_bytes"] == pytest.approx(64 * 8192 * (16 + 4) * 2.0, rel=1e-6)


def test_param_count_matches_stored_weights():
    """The table's stored weights (per chip, tp = 1) equal the parameter count."""
    m = replace(_model("jamba-v0.1"), tied=0.0)
    t = jp.cost.build_table(m, jp.Parallel(), workload(batch=1, prompt=16, output=2), "prefill", jp.Options())
    stored = float((t.count * t.stored).sum()) / 2.0
    assert stored == pytest.approx(float(param_count(m)), rel=0.01)
