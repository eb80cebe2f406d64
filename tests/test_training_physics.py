"""Training-step physics added for issue 38's accuracy (cost.training): the
fp32 loss over the logits, the attention kernel generation of the training
stack, and the dtype fallback of a chip without units for the recipe's
dtype. Numbers worked by hand on the tiny model of tests/test_training.py
(8 layers, hidden 64, 4 heads of 16, vocabulary 256) and on the A100 spec.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxplat.cost import training
from jaxplat.cost.attention_kernels import FA2_ON_HOPPER
from jaxplat.cost.training import TrainOptions, TrainWorkload, forward_table, rank_weights, train_step
from jaxplat.model import Parallel, hardware_from_dict, load_hardware, load_model, model_from_config
from jaxplat.specs.units import DTYPES

CONFIG = {"model_type": "llama", "num_hidden_layers": 8, "hidden_size": 64, "num_attention_heads": 4,
          "num_key_value_heads": 4, "intermediate_size": 128, "vocab_size": 256, "max_position_embeddings": 4096,
          "tie_word_embeddings": True}
FAST = {"flops": {"bf16": 1e12}, "memory": [{"name": "hbm", "size": 80e9, "bandwidth": 1e18}],
        "network": [{"name": "nvlink", "domain": 8, "bandwidth": 1e11, "latency": 0.0, "topology": "switch"}],
        "compute": {"vector_flops": 1e30}, "tdp_w": 700}
L, D, H, DH, FF, V = 8, 64, 4, 16, 128, 256


def _step(hw, **kw):
    kw = {"global_batch": 2.0, "micro_batch": 2.0, "seq": 128.0, "eff_network": 0.0, "backward_efficiency": 1.0,
          **kw}
    return jax.device_get(train_step(model_from_config(CONFIG), hw, Parallel(), TrainWorkload(**kw)))


def test_loss_bytes_by_hand():
    """The fp32 cross-entropy over 2 sequences x 128 tokens x 256 logits =
    65,536 logits: forward 14 bytes each (917,504 B), backward 22
    (1,441,792 B), at a 1 TB/s memory derated by the chip's eff_memory."""
    hw = hardware_from_dict({**FAST, "memory": [{"name": "hbm", "size": 80e9, "bandwidth": 1e12}]})
    twl = TrainWorkload(global_batch=2.0, micro_batch=2.0, seq=128.0)
    t, _ = forward_table(model_from_config(CONFIG), Parallel(), twl, TrainOptions())
    fwd, bwd = training._loss_times(t, hw, rank_weights(t, Parallel()))
    bw = 1e12 * float(hw.eff_memory)
    np.testing.assert_allclose([fwd, bwd], [917504 / bw, 1441792 / bw], rtol=1e-6)


def test_attention_kernel_speed_by_hand():
    """FlashAttention-2 on Hopper runs its matmuls at 0.384 of the chip's own
    attention kernel's (the FA3 paper's FA2 rows; tests/test_kernel_check.py):
    the causal attention's forward FLOPs (8 layers x 2 x 2·b·heads·d·T(T+1)/2
    = 33,816,576) take 1/0.384 as long, the backward's 2.5x of them too; the
    GEMMs do not change."""
    hw = hardware_from_dict(FAST)
    attn = L * 2 * (2 * 2 * H * DH * 128 * 129 / 2)
    assert attn == 33816576
    speed = FA2_ON_HOPPER
    base, slow = _step(hw), _step(hw, attention_kernel_speed=speed)
    assert speed == 0.384
    np.testing.assert_allclose(slow.forward - base.forward, attn / 1e12 * (1 / speed - 1), rtol=1e-4)
    np.testing.assert_allclose(slow.backward - base.backward, 2.5 * attn / 1e12 * (1 / speed - 1), rtol=1e-4)


def test_attention_backward_speed_by_hand():
    """A kernel whose backward runs its matmuls at 0.55 of its forward's rate
    (FlashAttention-2 on Hopper, FA2_BACKWARD_ON_HOPPER) makes the backward's
    2.5x of the causal attention's forward FLOPs (33,816,576, above) take
    1/0.55 as long, with or without a slower forward; the forward, the GEMMs
    and the exponentials (the chip's exp_rate, 528,384 of them: below) do not
    change."""
    attn, exps = 33816576, 528384
    slow_sfu = hardware_from_dict({**FAST, "compute": {**FAST["compute"], "exp_rate": 1e10}})
    for fwd_speed in (1.0, 0.5):
        base = _step(slow_sfu, attention_kernel_speed=fwd_speed)
        slow = _step(slow_sfu, attention_kernel_speed=fwd_speed, attention_backward_speed=0.55)
        np.testing.assert_allclose(slow.forward, base.forward, rtol=1e-6)
        np.testing.assert_allclose(slow.backward - base.backward,
                                   2.5 * attn / 1e12 / fwd_speed * (1 / 0.55 - 1), rtol=1e-4)
        assert float(base.backward) > 2.5 * attn / 1e12 / fwd_speed + exps / 1e10  # the GEMMs are still there


def test_exponentials_once_in_the_backward():
    """The softmax's exponentials, one per causal score (8 layers x 2 sequences x 4 heads x 128 x 129 / 2 =
    528,384) at the chip's exp_rate (1e10/s here), in the forward and once again in the backward (FlashAttention-2
    recomputes P from the saved log-sum-exp, Algorithm 2), not 2.5x as its matmuls; a slower attention kernel
    does not slow them."""
    exps = L * 2 * H * 128 * 129 / 2
    assert exps == 528384
    hw = hardware_from_dict(FAST)
    slow_sfu = hardware_from_dict({**FAST, "compute": {**FAST["compute"], "exp_rate": 1e10}})
    for kw in ({}, {"attention_kernel_speed": 0.5}):
        base, with_exp = _step(hw, **kw), _step(slow_sfu, **kw)
        np.testing.assert_allclose(with_exp.forward - base.forward, exps / 1e10, rtol=1e-4)
        np.testing.assert_allclose(with_exp.backward - base.backward, exps / 1e10, rtol=1e-4)


def test_fp8_on_a_chip_without_fp8_runs_bf16():
    """An A100 has no FP8 units: an FP8 recipe's GEMMs run widened to bf16
    (cost.dtypes.computed_workload, as inference does), so the step is the
    bf16 step: no casts to 8 bits, 2-byte activations, MFU over the bf16
    peak (the old step cast to FP8, moved 1-byte activations and derated by
    eff_narrow: 10.5 s against 9.5 s here)."""
    model, hw, par = load_model("llama-3.1-8b"), load_hardware("a100-80gb"), Parallel(tp=2.0, dp=4.0)

    def run(dtype, width):
        twl = TrainWorkload(global_batch=64.0, micro_batch=1.0, seq=4096.0, bytes_act=width,
                            compute_dtype=float(DTYPES.index(dtype)))
        return jax.device_get(train_step(model, hw, par, twl))

    bf16, fp8 = run("bf16", 2.0), run("fp8", 1.0)
    assert float(fp8.scaling) == 0.0
    np.testing.assert_allclose(fp8.step_time_s, bf16.step_time_s, rtol=1e-6)
    np.testing.assert_allclose(fp8.mfu, bf16.mfu, rtol=1e-6)
    np.testing.assert_allclose(fp8.memory_bytes, bf16.memory_bytes, rtol=1e-6)
    assert jnp.isfinite(fp8.step_time_s)


def test_power_cap_by_hand():
    """A chip (700 W TDP, 105 W static) whose forward draws P = 1,030 W of
    dynamic power at its rated clock (1 nJ per FLOP; measured with no
    limit) keeps (595 / P)^(1/3) = 0.832 of it under its TDP and (395 /
    P)^(1/3) = 0.727 held to 500 W (cube law of DVFS, both above the
    voltage floor's 0.62): its compute-bound forward and backward (memory
    is free) take the inverse as long, and it draws its limit. Ten times
    the energy per FLOP puts 500 W below the floor, where the clock falls
    at a fixed voltage: 395 / (P 0.62²). The tiny model at the default
    0.8 pJ/FLOP draws under a watt: no cap throttles it."""
    def chip(pj, tdp=700.0):
        return hardware_from_dict({**FAST, "tdp_w": tdp, "energy": {"pj_per_flop": {"bf16": pj}, "static_w": 105.0}})
    free = _step(chip(1e3, tdp=1e9))
    p = float(free.power_w) - 105.0
    assert 1000.0 < p < 1100.0
    base, capped = _step(chip(1e3)), _step(chip(1e3), power_cap_w=500.0)
    for run, budget in ((base, 595.0), (capped, 395.0)):
        clock = (budget / p) ** (1 / 3)
        np.testing.assert_allclose(run.forward / free.forward, 1 / clock, rtol=1e-4)
        np.testing.assert_allclose(run.backward / free.backward, 1 / clock, rtol=1e-4)
        np.testing.assert_allclose(run.clock, clock, rtol=1e-4)
        assert float(run.power_w) == pytest.approx(budget + 105.0, rel=1e-3)
    np.testing.assert_allclose(_step(chip(1e3), power_cap_w=700.0).step_time_s, base.step_time_s, rtol=1e-7)
    hot_free, hot = _step(chip(1e4, tdp=1e9)), _step(chip(1e4), power_cap_w=500.0)
    np.testing.assert_allclose(hot.clock, 395.0 / ((float(hot_free.power_w) - 105.0) * 0.62 ** 2), rtol=1e-4)
    cool = hardware_from_dict(FAST)
    np.testing.assert_allclose(_step(cool, power_cap_w=500.0).step_time_s, _step(cool).step_time_s, rtol=1e-7)


@pytest.mark.parametrize("name,dispatcher", [("llama-3.1-8b", "alltoall"), ("qwen3-30b-a3b", "alltoall"),
                                             ("qwen3-30b-a3b", "fused")])
def test_low_precision_quantizes_only_the_gemm_inputs(name, dispatcher):
    """An FP8 recipe's forward table moves what the bf16 one moves, but for
    the GEMMs' (and the routed experts' grouped GEMMs') inputs, which it
    reads at 1 byte instead of 2: outputs, norms, residual adds, attention,
    activation functions, the MoE permutes and the dispatch stay 16-bit, as
    Transformer Engine quantizes only GEMM operands. The FLOPs are the same;
    the routed experts' weights are read as their FP8 copies."""
    from jaxplat.cost.opkind import OpKind, kind_mask

    model, par = load_model(name), Parallel(ep=8.0 if "qwen" in name else 1.0)
    topts = TrainOptions(moe_dispatcher=dispatcher)

    def table(width, dtype):
        twl = TrainWorkload(global_batch=16.0, micro_batch=1.0, seq=1024.0, bytes_act=width,
                            compute_dtype=float(DTYPES.index(dtype)))
        return jax.device_get(forward_table(model, par, twl, topts)[0])

    bf16, fp8 = table(2.0, "bf16"), table(1.0, "fp8")
    gemm_in = kind_mask(bf16, (OpKind.GEMM, OpKind.EXPERT_GEMM)) > 0
    assert (np.asarray(bf16.a0)[gemm_in] > 0).sum() >= 4  # rows of a kind the model has none of are empty
    np.testing.assert_allclose(fp8.a0, np.where(gemm_in, 0.5, 1.0) * bf16.a0, rtol=1e-6)
    # the routed experts' weights are read as their FP8 copies, cast once per step (training._table_inputs)
    experts = kind_mask(bf16, (OpKind.EXPERT_GEMM,)) > 0
    np.testing.assert_allclose(fp8.w0, np.where(experts, 0.5, 1.0) * bf16.w0, rtol=1e-6)
    for col in ("o0", "f0", "comm_b"):
        np.testing.assert_allclose(getattr(fp8, col), getattr(bf16, col), rtol=1e-6, err_msg=col)
