"""A dtype the chip has no units for runs emulated: its GEMMs compute in the
nearest wider native dtype (that dtype's peak, derates and activation width)
while the weights keep their stored width (cost.dtypes.computed_workload).
Once, FP4 on an H100 ran with FP4's derate and 0.5-byte activations on its
FP8 units, silently."""

import jax.numpy as jnp
import numpy as np
import pytest
from helpers import workload

import jaxplat as jp
from jaxplat.cli import main
from jaxplat.cost.dtypes import computed_workload
from jaxplat.serving.iteration import iteration_time
from jaxplat.specs.units import DTYPES

# A compute-bound prefill: 8 prompts of 4096 tokens of Llama-3.1-8B on one chip.
PREFILL = dict(batch=8, prompt=4096, output=64)
HEAD = 2 * 128256 * 4096 * 2.0  # embedding table and LM head, kept 16-bit (Conventions.wide_head)


def test_chips_say_what_their_gemms_run_in():
    run = lambda name, dt: DTYPES[int(jp.load_hardware(name).gemm_dtype[DTYPES.index(dt)])]  # noqa: E731
    assert run("h100-sxm", "fp4") == "fp8" and run("h100-sxm", "int4") == "int8"
    assert run("h100-sxm", "fp8") == "fp8" and run("b200", "fp4") == "fp4"
    assert run("a100-80gb", "fp8") == "bf16" and run("a100-80gb", "fp4") == "bf16"
    assert run("tpu-v5e", "fp8") == "bf16" and run("groq-lpu", "bf16") == "fp16"
    assert run("tpu-v5e", "fp32") == "fp32"  # emulated by 16-bit passes at its own (filled) rate


def test_fp4_on_h100_computes_as_fp8(llama8b):
    """The prefill's GEMMs run on the FP8 units at FP8's rate with 1-byte
    activations: the same TTFT as FP8 (the old code charged FP4's derate on
    FP8's peak: 0.63 s against 0.42 s), to 0.1% (the prefill attention
    kernel's 2-norm of compute and memory sees the FP4 cache's smaller
    K and V streams); the weights still stream at NVFP4's 4.5 bits
    (16-bit head and embedding aside), so a memory-bound decode step is
    faster."""
    h100 = jp.load_hardware("h100-sxm")
    fp8, fp4 = (jp.evaluate(llama8b, h100, jp.Parallel(), workload(**PREFILL, dtype=d)) for d in ("fp8", "fp4"))
    np.testing.assert_allclose(float(fp4.ttft), float(fp8.ttft), rtol=1e-3)
    assert float(fp4.activation_bytes) == float(fp8.activation_bytes)
    assert float(fp4.weights_bytes) - HEAD == pytest.approx((float(fp8.weights_bytes) - HEAD) * 4.5 / 8, rel=1e-6)
    assert float(fp4.tpot) < float(fp8.tpot)


def test_fp8_on_a100_is_bf16_math_on_fp8_weights(llama8b):
    # An A100 has no FP8 units: FP8 (weights, activations and KV) costs exactly what FP8
    # weights with 16-bit activations (W8A16, weight-only quantization) cost.
    a100 = jp.load_hardware("a100-80gb")
    fp8 = jp.evaluate(llama8b, a100, jp.Parallel(), workload(**PREFILL, dtype="fp8"))
    w8a16 = jp.evaluate(llama8b, a100, jp.Parallel(), workload(
        **PREFILL, dtype={"weights": "fp8", "activations": "bf16", "kv": "fp8"}))
    for key in ("ttft", "tpot", "weights_bytes", "activation_bytes", "energy_per_token_j"):
        np.testing.assert_allclose(float(getattr(fp8, key)), float(getattr(w8a16, key)), rtol=1e-6, err_msg=key)


def test_native_dtypes_and_genz_are_left_alone():
    wl = workload(**PREFILL, dtype="fp4")
    b200, h100 = jp.load_hardware("b200"), jp.load_hardware("h100-sxm")
    same = computed_workload(b200, wl, jp.Options())
    assert float(same.compute_dtype) == DTYPES.index("fp4") and float(same.bytes_act) == 0.5
    genz = computed_workload(h100, wl, jp.Options(profile="genz"))  # GenZ: bf16 peak x 2 / bytes
    assert float(genz.bytes_act) == 0.5
    run = computed_workload(h100, wl, jp.Options())
    assert float(run.compute_dtype) == DTYPES.index("fp8") and float(run.bytes_act) == 1.0
    assert float(run.bytes_weight) == float(wl.bytes_weight) == 0.5625


def test_serving_iteration_prices_the_same_dtype(llama8b):
    # iteration_time of one 512-token prompt is evaluate's TTFT at batch 1 (its docstring), emulated or not.
    h100 = jp.load_hardware("h100-sxm")
    wl = workload(batch=1, prompt=512, output=2, dtype="fp4")
    ttft = float(jp.evaluate(llama8b, h100, jp.Parallel(), wl).ttft)
    z = jnp.zeros((1,), jnp.float32)
    it = float(iteration_time(llama8b, h100, jp.Parallel(), wl, jp.Options(), 0.0, 0.0, z + 512.0, z))
    np.testing.assert_allclose(it, ttft, rtol=1e-5)


def test_estimate_warns_of_emulation(capsys):
    args = ["estimate", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--json", "--no-cache"]
    assert main(args + ["--dtype", "fp4"]) == 0
    out, err = capsys.readouterr()
    import json
    warnings = json.loads(out)["warnings"]
    assert any("no fp4 units" in w and "emulated in fp8" in w for w in warnings), warnings
    assert "emulated in fp8" in err
    assert main(args + ["--dtype", "fp8"]) == 0
    out, _ = capsys.readouterr()
    assert not any("emulated" in w for w in json.loads(out)["warnings"])
