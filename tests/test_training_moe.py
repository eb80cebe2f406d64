"""A MoE training step (cost.training, issue 38): the routed experts' grouped
GEMMs at the training kernels' rate (TrainWorkload.eff_moe), not at the
inference calibration's `efficiency.moe`, and the expert-parallel
all-to-alls exposed unless TrainWorkload.ep_overlap hides them.

The tiny MoE: 4 Mixtral layers, hidden 64, 4 heads of 16, 8 experts of
SwiGLU width 128, 2 per token, vocabulary 256, trained with an FP8 recipe
(its experts quantized, the case the inference derate reaches). Its chip:
1 TFLOP/s bf16 and 2 FP8, memory and the vector unit so fast that only GEMM
and attention FLOPs take time, an 8-chip 100 GB/s switch.
"""

import json

import jax
import numpy as np
import pytest
import yaml
from helpers import sweep_training_study, train_argv

from jaxplat.cli.app import main
from jaxplat.cost.training import COMM_NAMES, TrainWorkload, train_step
from jaxplat.model import Parallel, hardware_from_dict, model_from_config, replace
from jaxplat.model.hardware_layout import grouped_layout
from jaxplat.search.train_study import TRAIN_AXIS_KINDS, train_command
from jaxplat.specs.units import DTYPES

CONFIG = {"model_type": "mixtral", "num_hidden_layers": 4, "hidden_size": 64, "num_attention_heads": 4,
          "num_key_value_heads": 4, "intermediate_size": 128, "num_local_experts": 8, "num_experts_per_tok": 2,
          "vocab_size": 256, "max_position_embeddings": 4096, "tie_word_embeddings": True}
L, D, FF, TOPK = 4, 64, 128, 2
EP = COMM_NAMES.index("ep")


def chip_dict(moe):
    return {"flops": {"bf16": 1e12, "fp8": 2e12}, "memory": [{"name": "hbm", "size": 80e9, "bandwidth": 1e18}],
            "network": [{"name": "nvlink", "domain": 8, "bandwidth": 1e11, "latency": 0.0, "topology": "switch"}],
            "compute": {"vector_flops": 1e30}, "efficiency": {"moe": moe}, "tdp_w": 700}


def chip(moe):
    return hardware_from_dict(chip_dict(moe))


@pytest.fixture(scope="module")
def model():
    return model_from_config(CONFIG)


def step(model, hw, par=None, **kw):
    kw = {"global_batch": 2.0, "micro_batch": 2.0, "seq": 128.0, "bytes_act": 1.0, "bytes_param": 2.0,
          "compute_dtype": float(DTYPES.index("fp8")), "eff_network": 0.0, "backward_efficiency": 1.0, **kw}
    return jax.device_get(train_step(model, hw, par or Parallel(), TrainWorkload(**kw)))


def test_grouped_gemms_run_at_the_training_kernels_rate(model):
    """With eff_moe set (default 1, DeepGEMM's contiguous grouped GEMMs), the
    chip's calibrated `moe` derate does not reach the step; eff_moe 0 takes
    the chip's. By hand: the experts' forward FLOPs are 256 tokens x 2
    experts x 3 GEMMs of 2·64·128 per layer, at 2 TFLOP/s FP8; at eff_moe
    0.5 they take twice as long."""
    derated, plain = chip(0.05), chip(1.0)
    default = step(model, derated)
    assert default.step_time_s == pytest.approx(float(step(model, plain).step_time_s), rel=1e-6)
    assert step(model, derated, eff_moe=0.0).forward > 10 * default.forward  # the chip's own: 1/0.05
    experts = L * 256 * TOPK * 3 * 2 * D * FF / 2e12
    half = step(model, plain, eff_moe=0.5)
    np.testing.assert_allclose(half.forward - default.forward, experts, rtol=1e-4)
    # An inference engine's MoE layers (software.moe_speed) are not the training stack's.
    slow_engine = replace(plain, moe_speed=0.3)
    assert float(step(model, slow_engine).step_time_s) == pytest.approx(float(default.step_time_s), rel=1e-6)


def test_expert_parallel_all_to_alls_are_exposed_unless_ep_overlap_hides_them(model):
    """`Parallel.overlap` hides TP and PP collectives behind the pass's
    GEMMs, not EP's dispatch and combine (a dispatch feeds its own layer's
    experts): with overlap 1 they stay exposed; ep_overlap hides its share
    (the compute here is far longer than these all-to-alls)."""
    hw = chip(1.0)
    par = Parallel(dp=2, ep=2, overlap=1.0)
    r = step(model, hw, par, global_batch=4.0)
    assert r.comm_total[EP] > 0 and np.sum(r.comm[EP]) == pytest.approx(float(r.comm_total[EP]), rel=1e-6)
    half = step(model, hw, par, global_batch=4.0, ep_overlap=0.5)
    assert np.sum(half.comm[EP]) == pytest.approx(float(r.comm_total[EP]) / 2, rel=1e-6)
    assert np.sum(step(model, hw, par, global_batch=4.0, ep_overlap=1.0).comm[EP]) == 0.0
    assert half.step_time_s < r.step_time_s


def test_a_training_study_sweeps_ep_overlap_as_a_workload_axis():
    """`ep_overlap` is a study axis: it sets TrainWorkload.ep_overlap (the
    engine applies workload-group setters to the training workload)."""
    kind = TRAIN_AXIS_KINDS["ep_overlap"]
    twl = kind.setter(TrainWorkload(global_batch=4.0, micro_batch=2.0, seq=128.0), 0.25)
    assert kind.group == "workload" and float(twl.ep_overlap) == 0.25


def test_train_flags_overlap_and_ep_overlap(tmp_path, capsys):
    """`jaxplat train --overlap` hides TP/PP communication, not EP's;
    `--ep-overlap 1` hides the all-to-alls (compute far longer here); a
    training study's top-k row names both flags where its axes set them."""
    (tmp_path / "config.json").write_text(json.dumps(CONFIG))
    (tmp_path / "chip.yaml").write_text(yaml.safe_dump(grouped_layout({"name": "chip", **chip_dict(1.0)})))
    base = ["train", "--model", str(tmp_path / "config.json"), "--hardware", str(tmp_path / "chip.yaml"),
            "--chips", "2", "--ep", "2", "--global-batch", "4", "--micro-batch", "2", "--seq", "128",
            "--dtype", "fp8", "--json"]

    def ep_exposed(*flags):
        assert main(base + list(flags)) == 0
        return json.loads(capsys.readouterr().out)["comm_exposed_s"]["ep"]
    plain = ep_exposed()
    assert plain > 0 and ep_exposed("--overlap", "1") == pytest.approx(plain, rel=1e-6)
    assert ep_exposed("--ep-overlap", "1") == 0.0
    row = {"chips": 8, "tp": 1, "pp": 1, "vp": 1, "cp": 1, "ep": 2, "micro_batch": 1, "global_batch": 8,
           "seq": 128, "dtype": "fp8", "recompute": "none", "zero": 0, "overlap": 0.0, "ep_overlap": 0.5}

    class Study:
        model_names, hardware_name, inner = ["m"], "chip", ()
    cmd = train_command(Study, row)
    assert cmd.endswith("--zero 0 --ep-overlap 0.5") and "--overlap" not in cmd.replace("--ep-overlap", "")


@pytest.mark.parametrize("bytes_act, dtype", [(1.0, "fp8"), (2.0, "bf16")])
def test_the_training_dispatchers_move_16_bit_hidden_states(model, bytes_act, dtype):
    """Megatron-Core's dispatchers send each token copy's 16-bit hidden state
    (an FP8 recipe quantizes after dispatch, inside the grouped linear), and
    its all-to-all dispatcher permutes, sorts by local expert, unsorts and
    unpermutes in passes of their own; the fused (DeepEP/HybridEP) kernels
    permute as they send. By hand, ep 2 (4 experts per rank): a rank routes
    its 2 x 128 tokens' 2 copies each, 512 copies of 64 x 2 B = 65,536 B."""
    from jaxplat.cost.training import TrainOptions, forward_table
    twl = TrainWorkload(global_batch=4.0, micro_batch=2.0, seq=128.0, bytes_act=bytes_act,
                        compute_dtype=float(DTYPES.index(dtype)))
    copies = 512 * D * 2.0
    out = {}
    for disp in ("alltoall", "fused"):
        t, _ = forward_table(model, Parallel(dp=2, ep=2), twl, TrainOptions(moe_dispatcher=disp))
        t = jax.device_get(t)
        row = {n: i for i, n in enumerate(t.names)}
        assert float(t.comm_b[row["dispatch"]]) == pytest.approx(copies, rel=1e-6)
        out[disp] = [float(getattr(t, c)[row[n]]) for n in ("moe_permute", "moe_finalize") for c in ("a0", "o0")]
    # permute + sort: read and write each copy twice; unsort + unpermute: read twice, write the
    # copies once and each of the 256 tokens' 16-bit sums.
    np.testing.assert_allclose(out["alltoall"], [2 * copies, 2 * copies, 2 * copies, copies + 256 * D * 2.0],
                               rtol=1e-6)
    assert out["fused"] == [0.0, 0.0, 0.0, 0.0]


def test_an_unknown_moe_dispatcher_is_refused():
    from jaxplat.cost.training import TrainOptions
    with pytest.raises(ValueError, match="unknown MoE dispatcher 'deepep'; allowed: alltoall, fused"):
        TrainOptions(moe_dispatcher="deepep")


def test_a_fused_dispatcher_crosses_the_scale_out_network_once_per_remote_node(model):
    """DeepEP's normal kernels and HybridEP send a token once to each remote
    node holding one of its experts and forward it there over NVLink. By
    hand, EP 4 over two nodes of 2 (NVLink 100 GB/s, the scale-out network
    10 GB/s, no link latency): each rank's 512 copies of a 128-byte hidden
    state, b = 65,536 B per all-to-all. The plain all-to-all puts 1/4 of b
    on NVLink and 2/4 on the scale-out network: 0.25 b / 1e11 + 0.5 b / 1e10
    = 3.44064 us. The fused one: a token's 2 experts miss the other node
    with probability 1/4, so it crosses (1 - 1/4) times, 0.375 b over the
    scale-out network, then all of b's copies cross NVLink once: 0.375 b /
    1e10 + 0.5 b / 1e11 = 2.78528 us. One launch each (the stack's
    collective latency); dispatch and combine, forward and backward, in
    each of the 4 layers."""
    from jaxplat.cost import efficiency
    from jaxplat.cost.training import TrainOptions
    d = chip_dict(1.0)
    d["network"] = [{"name": "nvlink", "domain": 2, "bandwidth": 1e11, "latency": 0.0, "topology": "switch"},
                    {"name": "ib", "domain": 1024, "bandwidth": 1e10, "latency": 0.0, "topology": "switch"}]
    d["efficiency"]["network"] = 1.0
    hw = hardware_from_dict(d)
    launch = float(efficiency.collective_latency(hw, TrainOptions().options))
    kw = dict(global_batch=8.0, micro_batch=2.0, seq=128.0, bytes_act=2.0, compute_dtype=float(DTYPES.index("bf16")),
              eff_network=0.0)
    for disp, per_call in (("alltoall", 3.44064e-6), ("fused", 2.78528e-6)):
        r = jax.device_get(train_step(model, hw, Parallel(dp=4, ep=4), TrainWorkload(**kw),
                                      TrainOptions(moe_dispatcher=disp)))
        np.testing.assert_allclose(r.comm_total[EP], L * 4 * (per_call + launch), rtol=1e-5)
    # On one node the fused dispatcher sends as the all-to-all does.
    one = [jax.device_get(train_step(model, chip(1.0), Parallel(dp=4, ep=4), TrainWorkload(**kw),
                                     TrainOptions(moe_dispatcher=disp))).comm_total[EP]
           for disp in ("alltoall", "fused")]
    np.testing.assert_allclose(one[0], one[1], rtol=1e-6)


def test_a_training_study_carries_its_moe_dispatcher_into_the_train_command():
    from jaxplat.search.train_study import study_from_dict, train_command
    from jaxplat.specs import SpecError
    d = {"name": "moe", "task": "train", "models": ["mixtral-8x7b"], "hardware": "h100-sxm",
         "axes": {"chips": [64], "global_batch": [512], "seq": [4096], "ep": [8]},
         "objective": {"minimize": "step_time_s"}, "options": {"moe_dispatcher": "fused"}}
    st = study_from_dict(d)
    assert st.train_options.moe_dispatcher == "fused"
    row = {"chips": 64, "tp": 1, "pp": 1, "vp": 1, "cp": 1, "ep": 8, "micro_batch": 1, "global_batch": 512,
           "seq": 4096, "dtype": "bf16", "recompute": "none", "zero": 0}
    assert train_command(st, row).split(" (")[0].endswith("--zero 0 --moe-dispatcher fused")
    assert "--moe-dispatcher" not in train_command(study_from_dict({**d, "options": {}}), row)
    with pytest.raises(SpecError, match="options.moe_dispatcher 'deepep' is not one of alltoall, fused"):
        study_from_dict({**d, "options": {"moe_dispatcher": "deepep"}})
    with pytest.raises(SpecError, match="options.sp 'dtensor' is not one of regather, saved, off"):
        study_from_dict({**d, "options": {"sp": "dtensor"}})


def test_moe_parallel_folding_splits_the_experts_over_the_tp_ranks(model, tmp_path, capsys):
    """Expert tensor parallelism 1 under tp 2 (`Parallel.moe_ep` 2, `jaxplat
    train --etp 1`): each of the 4 expert-parallel ranks (2 tp ranks x 2 of
    dp) holds 8/4 = 2 whole experts (up+gate 2 x 128 columns wide, not
    split over tp); each dispatches its sequence-parallel shard's copies to
    all 4, consecutive ranks (stride 1), and the MoE block needs no TP
    collective. With etp = tp the same ep 2 (over dp, stride tp 2) holds 4
    experts at half width (up+gate 128 columns)."""
    from jaxplat.cost.training import TrainOptions, forward_table
    twl = TrainWorkload(global_batch=4.0, micro_batch=2.0, seq=128.0)
    rows = {}
    for name, par in (("folded", Parallel(tp=2, dp=2, ep=2, moe_ep=2)), ("etp=tp", Parallel(tp=2, dp=2, ep=2))):
        t = jax.device_get(forward_table(model, par, twl, TrainOptions())[0])
        rows[name] = {n: (float(t.comm_n[i]), float(t.comm_s[i]), float(t.n[i]), float(t.stored[i]))
                      for i, n in enumerate(t.names)}
    f, u = rows["folded"], rows["etp=tp"]
    assert f["dispatch"][:2] == (4.0, 1.0) and f["combine"][:2] == (4.0, 1.0)
    assert u["dispatch"][:2] == (2.0, 2.0)
    assert f["ffn_allreduce"][0] == 1.0 and u["ffn_allreduce"][0] == 2.0
    assert f["experts_up_gate"][2] == 2 * FF and u["experts_up_gate"][2] == FF
    # the same expert bytes per chip: 2 whole experts or 4 halves (2 x 64 x 2·128 x 2 B each way)
    assert f["experts_up_gate"][3] == pytest.approx(u["experts_up_gate"][3], rel=1e-6)
    # jaxplat train: --ep counts the expert-parallel ranks across tp; one-line errors otherwise
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(CONFIG))
    base = ["train", "--model", str(path), "--hardware", "h100-sxm", "--chips", "4", "--tp", "2",
            "--global-batch", "4", "--micro-batch", "2", "--seq", "128"]
    assert main(base + ["--ep", "4", "--etp", "1", "--json"]) == 0
    capsys.readouterr()
    assert main(base + ["--ep", "3", "--etp", "1"]) == 2
    assert "--ep 3 must be a multiple of tp/etp = 2" in capsys.readouterr().err
    assert main(base + ["--ep", "4", "--etp", "3"]) == 2
    assert "--etp 3 must divide --tp 2" in capsys.readouterr().err
    dense = ["train", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--chips", "8", "--tp", "2"]
    assert main(dense + ["--etp", "1", "--global-batch", "64", "--seq", "4096"]) == 2
    assert "--etp 1: llama-3.1-8b has no experts" in capsys.readouterr().err
    assert main(base + ["--ep", "4"]) == 2  # 4 does not divide dp 2: folding would fit, and the error says so
    assert "(or --etp 1: the experts split over the tp ranks too" in capsys.readouterr().err


def test_a_training_study_sweeps_etp_and_its_rows_run_through_jaxplat_train(tmp_path, capsys):
    """A study's `etp` axis folds the experts as `jaxplat train --etp` does,
    and its `recompute_moe_act` axis recomputes the experts' activation as
    `--recompute-modules moe_act` does: every feasible row of top_k.csv,
    sent back through `jaxplat train` with its flags (and through the
    printed command's), gives the same step time; etp 3 does not divide
    tp 2, so its points are not feasible."""
    from jaxplat.search.train_study import load_study
    study = dict(name="moe-fold", task="train", models=["mixtral-8x7b"], hardware="dgx-h100-pod",
                 axes=dict(chips=[32], tp=[2], ep=[2, 4, 8], etp=[1, 2, 3], global_batch=[128], seq=[4096],
                           dtype=["fp8"], zero=[1], recompute_moe_act=[0, 1]),
                 objective={"maximize": "tokens_per_s_per_chip"}, top_k=20)
    path, top = sweep_training_study(tmp_path, study, capsys)
    # feasible: etp 2 (= tp) with ep 2, 4, 8 over dp 16; etp 1 with ep 4, 8 (ep 2 at etp 1 puts 4 whole
    # experts on a chip: 127 GB, no fit)
    kept = top[top["recompute_moe_act"] == 0]
    assert sorted(zip(kept["etp"], kept["ep"])) == [(1, 4), (1, 8), (2, 2), (2, 4), (2, 8)]
    assert set(top["recompute_moe_act"]) == {0, 1}
    st = load_study(path)
    for _, r in top.iterrows():
        argv = train_argv("mixtral-8x7b", "dgx-h100-pod", r) + ["--etp", str(r["etp"])]
        argv += ["--recompute-modules", "moe_act"] * int(r["recompute_moe_act"])
        assert (" --recompute-modules moe_act" in train_command(st, r)) == bool(r["recompute_moe_act"])
        assert main(argv) == 0, argv
        got = json.loads(capsys.readouterr().out)
        np.testing.assert_allclose(got["step_time_s"], r["step_time_s"], rtol=1e-5)


def test_recompute_modules_free_the_expert_activations_and_mla_projections():
    """module_savings by hand. The tiny Mixtral, moe_act: each of the 2
    copies' activation output, 2·f_e = 256 bytes per token, 512 in all.
    DeepSeek-V3 (128 heads, nope 128 + rope 64, v 128), mla_up_proj: Q of
    128·192 and K, V of 128·192 and 128·128 elements, 2 bytes each:
    2·24,576 + 2·(24,576 + 16,384) = 131,072 bytes per token; no dense MLP
    saving there but 3 of its 61 layers' share."""
    from jaxplat.cost.training_memory import RECOMPUTE_MODULES, module_savings
    from jaxplat.model import load_model

    tiny = dict(zip(RECOMPUTE_MODULES, np.asarray(module_savings(model_from_config(CONFIG)))))
    assert tiny["moe_act"] == TOPK * 2 * FF and tiny["mla_up_proj"] == 0 and tiny["mlp"] == 0
    ds = dict(zip(RECOMPUTE_MODULES, np.asarray(module_savings(load_model("deepseek-v3")))))
    np.testing.assert_allclose(ds["mla_up_proj"], 131072)
    np.testing.assert_allclose(ds["mlp"], 3 / 61 * (2 * 2 * 18432 + 2 * 18432), rtol=1e-6)


def test_moe_layers_expose_their_host_time_per_micro_batch(model):
    """TrainWorkload.moe_layer_host_s and moe_expert_host_s by hand: the
    tiny Mixtral's 4 MoE layers on ep 2 hold 8 / 2 = 4 experts each; 2
    micro-batches per step, so the step grows by 2 x 4 x (a + 4 b), as the
    `host` phase; a dense model has none (test_training's phases sum
    without it)."""
    a, b = 1e-3, 1e-4
    par = Parallel(ep=2.0, dp=2.0)
    none = step(model, chip(1.0), par, global_batch=8.0, moe_layer_host_s=0.0, moe_expert_host_s=0.0)
    some = step(model, chip(1.0), par, global_batch=8.0, moe_layer_host_s=a, moe_expert_host_s=b)
    assert none.microbatches == 2.0 and none.host == 0.0
    np.testing.assert_allclose(some.host, 2 * L * (a + 4 * b), rtol=1e-5)
    np.testing.assert_allclose(some.step_time_s - none.step_time_s, 2 * L * (a + 4 * b), rtol=1e-4)
