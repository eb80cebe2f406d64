"""Spec loading: built-ins, Hugging Face configs, and the promised one-line errors."""

import json
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

import jaxplat as jp
from jaxplat.model import hardware_from_dict, workload_from_dict
from jaxplat.model.hardware_layout import flat_layout
from jaxplat.specs import SpecError, builtin_names, dtype_triple, read_yaml
from jaxplat.specs.units import DTYPES

HF = Path(__file__).resolve().parents[1] / "data" / "hf_configs"
REQUIRED_BUILTINS = {
    "models": ["llama-2-7b", "llama-2-13b", "llama-2-70b", "llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b",
               "mixtral-8x7b", "mixtral-8x22b", "deepseek-v3", "qwen3-235b-a22b", "gpt-3-175b", "gemma-2-27b"],
    "hardware": ["a100-80gb", "h100-sxm", "h200-sxm", "b200", "gb200", "mi300x", "gaudi3", "tpu-v4", "tpu-v5e",
                 "tpu-v5p", "groq-lpu", "cerebras-wse-3", "sambanova-sn40l", "gh200", "mi325x", "mi355x", "gb300"],
    "workloads": ["chatbot", "qa", "summarization", "code-generation", "long-context-reasoning"],
}
LOADERS = {"models": jp.load_model, "hardware": jp.load_hardware, "workloads": jp.load_workload}
H100 = dict(flops={"bf16": 989e12}, memory=[{"name": "hbm", "size": 80e9, "bandwidth": 3.35e12}],
            network=[{"domain": 8, "bandwidth": 450e9, "latency": 1e-6, "topology": "switch"}], tdp_w=700)


@pytest.mark.parametrize("kind", sorted(REQUIRED_BUILTINS))
def test_every_builtin_loads(kind):
    names = builtin_names(kind)
    assert set(REQUIRED_BUILTINS[kind]) <= set(names)
    for name in names:
        LOADERS[kind](name)


# Built-ins that differ from the hub's config.json on purpose (their YAML says why).
DIFFERS_FROM_HUB = {"falcon-mamba-7b": {".vocab"}}  # GenZ's Falcon-Mamba: Mamba-2.8B's 50280 tokens


@pytest.mark.parametrize("name", sorted(p.stem for p in HF.glob("*.json") if p.stem in builtin_names("models")))
def test_builtin_model_equals_its_hf_config(name):
    """A built-in model spec (written by hand from the model's config.json)
    gives the same model as the published config.json itself."""
    ours, hub = jp.load_model(name), jp.load_model(HF / f"{name}.json")
    assert jax.tree.structure(ours) == jax.tree.structure(hub)  # the static fields (attention kind...) too
    differ = {jax.tree_util.keystr(path)
              for (path, a), b in zip(jax.tree_util.tree_leaves_with_path(ours), jax.tree.leaves(hub), strict=True)
              if not np.array_equal(np.asarray(a), np.asarray(b))}
    assert differ == DIFFERS_FROM_HUB.get(name, set()), name


@pytest.mark.parametrize("name, bf16, hbm_bw, hbm", [
    ("h100-sxm", 989.4e12, 3.35e12, 80 * 2**30),   # NVIDIA H100 datasheet (SXM; dense = sparse / 2; its GB are GiB)
    ("mi300x", 1307.4e12, 5.3e12, 192 * 2**30),    # AMD Instinct MI300X datasheet (GB = GiB: rocminfo's pool)
    ("tpu-v5e", 197e12, 819e9, 16e9),        # Google Cloud TPU v5e documentation
])
def test_builtin_chips_carry_datasheet_figures(name, bf16, hbm_bw, hbm):
    from jaxplat.specs.units import DTYPES

    hw = jp.load_hardware(name)
    assert float(hw.flops[DTYPES.index("bf16")]) == pytest.approx(bf16, rel=1e-6)
    assert float(hw.mem_bw[0]) == pytest.approx(hbm_bw, rel=1e-6)
    assert float(hw.mem_size[0]) == pytest.approx(hbm, rel=1e-3)  # the spec's 4 digits


def test_yaml_reads_exponent_floats_without_dot(tmp_path):
    # PyYAML (YAML 1.1) would read these as strings.
    p = tmp_path / "x.yaml"
    p.write_text("a: 80e9\nb: 1e-6\nc: 3.35e12\nd: 1.5\ne: 7\n")
    d = read_yaml(p)
    assert d == {"a": 8.0e10, "b": 1e-6, "c": 3.35e12, "d": 1.5, "e": 7}
    assert isinstance(d["a"], float)


def test_builtin_model_dims_match_published_parameter_counts():
    from jaxplat.model import param_count
    # Published sizes (hf_configs/README.md): Llama-3.1-405B 405.9B, DeepSeek-V3 671B, Mixtral 46.7B;
    # Qwen2-7B 7.6B (the Qwen2.5-7B model card's 7.61B: the same architecture), Mistral 7B 7.3B (Mistral
    # AI's announcement, 2023-09-27).
    for name, billions in (("llama-3.1-405b", 405.9), ("deepseek-v3", 671.0), ("mixtral-8x7b", 46.7),
                           ("qwen3-235b-a22b", 235.1), (HF / "qwen2-7b.json", 7.6), (HF / "mistral-7b-v0.1.json", 7.3)):
        got = float(param_count(jp.load_model(name))) / 1e9
        assert abs(got - billions) / billions < 0.01, (name, got)


def test_every_hf_config_is_tested():
    assert len(list(HF.glob("*.json"))) == 28


@pytest.mark.parametrize("path", sorted(HF.glob("*.json")), ids=lambda p: p.stem)
def test_every_hf_config_loads(path):
    cfg = json.loads(path.read_text())
    m = jp.load_model(path)
    assert float(m.layers) == cfg.get("num_hidden_layers", cfg.get("text_config", {}).get("num_hidden_layers"))
    assert float(m.hidden) == cfg.get("hidden_size", cfg.get("d_model", cfg.get("text_config", {}).get("hidden_size")))
    if cfg.get("model_type") in ("mamba", "falcon_mamba"):  # state-space: every layer a Mamba block
        assert float(m.mamba_layers) == float(m.layers) and float(m.d_state) == cfg["state_size"]


def test_hf_config_details():
    ds = jp.load_model(HF / "deepseek-v3.json")
    assert ds.attention == "mla" and float(ds.dense_layers) == 3 and float(ds.experts) == 256
    assert float(ds.shared_experts) == 1 and float(ds.expert_intermediate) == 2048
    mav = jp.load_model(HF / "llama-4-maverick-17b-128e.json")
    assert float(mav.dense_layers) == 24 and float(mav.intermediate) == 16384  # MoE every 2nd of 48 layers
    opt = jp.load_model(HF / "opt-66b.json")
    assert float(opt.gated) == 0 and float(opt.intermediate) == 36864
    gemma = jp.load_model(HF / "gemma-2-27b.json")
    assert float(gemma.tied) == 1 and float(gemma.head_dim) == 128
    # Qwen3-1.7B: 1,720,574,976 tensors' elements in a snapshot's safetensors header (hf_configs/README.md),
    # which also holds the RMSNorm weights param_count leaves out: two per layer (2,048 each), the q and k
    # norms (128 each) and the final one.
    from jaxplat.model import param_count
    qwen = jp.load_model(HF / "qwen3-1.7b.json")
    assert float(qwen.tied) == 1 and int(param_count(qwen)) + 28 * (2 * 2048 + 2 * 128) + 2048 == 1_720_574_976


def _err(fn, *args):
    with pytest.raises(SpecError) as e:
        fn(*args)
    msg = str(e.value)
    assert "\n" not in msg
    return msg


def test_hardware_errors_name_the_key():
    assert "unknown key 'flop'" in _err(hardware_from_dict, {**H100, "flop": 1})
    assert "missing key 'memory'" in _err(hardware_from_dict, {k: v for k, v in H100.items() if k != "memory"})
    bad = {**H100, "memory": [{"name": "hbm", "size": -80e9, "bandwidth": 3.35e12}]}
    assert "memory[0].size must be positive" in _err(hardware_from_dict, bad)
    bad = {**H100, "memory": [{"name": "hbm", "size": 0, "bandwidth": 3.35e12}]}
    assert "must be positive" in _err(hardware_from_dict, bad)
    msg = _err(hardware_from_dict, {**H100, "flops": {"bf17": 1e12}})
    assert "unknown dtype 'bf17'" in msg and "bf16" in msg
    bad = {**H100, "network": [{**H100["network"][0], "topology": "donut"}]}
    assert "network[0].topology 'donut' is not one of switch" in _err(hardware_from_dict, bad)


def test_workload_errors():
    base = dict(batch=1, prompt=128, output=128)
    assert "unknown key 'batchsize'" in _err(workload_from_dict, {**base, "batchsize": 2})
    assert "missing key 'prompt'" in _err(workload_from_dict, {"batch": 1, "output": 2})
    assert "unknown dtype 'fp12'" in _err(workload_from_dict, {**base, "dtype": {"kv": "fp12"}})
    assert "batch must be positive" in _err(workload_from_dict, {**base, "batch": -1})


def test_model_errors(tmp_path):
    p = tmp_path / "m.json"
    p.write_text(json.dumps({"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4}))
    assert "missing key 'vocab_size'" in _err(jp.load_model, p)
    p.write_text(json.dumps({"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
                             "num_key_value_heads": 3, "vocab_size": 10, "intermediate_size": 8}))
    assert "multiple of num_key_value_heads" in _err(jp.load_model, p)


def test_unknown_names_list_close_matches():
    assert "did you mean llama-3.1-70b" in _err(jp.load_model, "llama-3.1-70")
    assert "h100-sxm" in _err(jp.load_hardware, "h100")
    assert "spec file not found" in _err(jp.load_model, "/nonexistent/model.yaml")


def test_dtype_fallback_fills_every_dtype():
    # One listed 16-bit peak: the narrower dtypes run on its unit at its rate; FP32 and TF32,
    # wider than any unit listed, as six and three BF16 passes (bf16_6x, bf16_3x): 989/6, 989/3.
    # (The old rule gave them the fastest listed rate: FP32 at the BF16 peak.)
    hw = hardware_from_dict(H100)
    want = {"fp32": 989e12 / 6, "tf32": 989e12 / 3} | {d: 989e12 for d in DTYPES[2:]}
    assert dict(zip(DTYPES, np.asarray(hw.flops, np.float64).tolist())) == pytest.approx(want, rel=1e-6)


def test_dtype_fallback_runs_on_the_next_wider_unit():
    # H100 SXM's dense fp32, bf16 and fp8 peaks only (datasheet), the others by the rule
    # (specs.units.DTYPE_FALLBACK) worked by hand: tf32 on the fp32 unit, fp16 on bf16's,
    # fp4 on fp8's, int8 on bf16's (its values are not exact in E4M3), int4 on int8's and so bf16's.
    hw = hardware_from_dict({**H100, "flops": {"fp32": 67e12, "bf16": 989e12, "fp8": 1979e12}})
    want = {"fp32": 67e12, "tf32": 67e12, "bf16": 989e12, "fp16": 989e12,
            "fp8": 1979e12, "int8": 989e12, "fp4": 1979e12, "int4": 989e12}
    assert dict(zip(DTYPES, np.asarray(hw.flops, np.float64).tolist())) == pytest.approx(want, rel=1e-6)
    # Nothing as wide listed (no fp32): fp32 and tf32 run as 16-bit passes, 1/6 and 1/3 of BF16's
    # rate (the old rule took the fastest unit listed, FP8's: 12x and 6x too fast).
    hw = hardware_from_dict({**H100, "flops": {"bf16": 989e12, "fp8": 1979e12}})
    assert float(hw.flops[DTYPES.index("fp32")]) == pytest.approx(989e12 / 6)
    assert float(hw.flops[DTYPES.index("tf32")]) == pytest.approx(989e12 / 3)
    # Groq's LPU lists FP16 (188 T) and INT8 (750 T): BF16 and FP8 run on the FP16 unit at 188
    # (the old rule: 750, its INT8 rate), FP4 likewise, INT4 on INT8's.
    hw = hardware_from_dict({**H100, "flops": {"fp16": 188e12, "int8": 750e12}})
    want = {"fp32": 188e12 / 6, "tf32": 188e12 / 3, "bf16": 188e12, "fp16": 188e12,
            "fp8": 188e12, "int8": 750e12, "fp4": 188e12, "int4": 750e12}
    assert dict(zip(DTYPES, np.asarray(hw.flops, np.float64).tolist())) == pytest.approx(want, rel=1e-6)


def test_dtype_fallback_needs_a_wide_unit():
    msg = _err(hardware_from_dict, {**H100, "flops": {"int8": 1e15}})
    assert "\n" not in msg and "flops" in msg and "bf16" in msg


@pytest.mark.parametrize("name", builtin_names("hardware"))
def test_no_filled_peak_beats_the_units_it_needs(name):
    """Every shipped chip: a dtype its spec does not list is never faster than
    the fastest listed dtype at least as wide, and, where none is as wide
    (FP32 on a TPU), slower than every listed one. The old "fastest listed"
    fallback broke both: Groq's BF16 at its INT8 rate, TPU FP32 at INT8's."""
    from jaxplat.specs.units import BYTES_PER_ELEMENT as B

    listed = flat_layout(read_yaml(Path(jp.specs.SPEC_ROOT) / "hardware" / f"{name}.yaml")).get("flops")
    if not listed:
        return  # a systolic array's one peak serves every dtype
    hw = jp.load_hardware(name)
    rate = dict(zip(DTYPES, np.asarray(hw.flops, np.float64).tolist()))
    for d in set(DTYPES) - set(listed):
        wide = [rate[u] for u in listed if B[u] >= B[d]]
        if wide:
            assert rate[d] <= max(wide) * (1 + 1e-6), (d, rate[d], wide)
        else:
            assert rate[d] < min(rate[u] for u in listed), (d, rate[d])


def test_nvfp4_weights_carry_their_block_scales(llama8b):
    # NVFP4 keeps one 8-bit scale per 16 four-bit weights: 4.5 bits a weight, 0.5625 of FP8's
    # bytes, by hand. Activations and the KV cache keep their bare width. A study's weight_dtype
    # axis charges the same bytes as the spec. The embedding table and the LM head stay 16-bit in
    # both (Conventions.wide_head): 2 x 128256 x 4096 weights at 2 bytes.
    from jaxplat.search.study import AXIS_KINDS

    fp8 = workload_from_dict({"batch": 1, "prompt": 128, "output": 16, "dtype": "fp8"})
    fp4 = workload_from_dict({"batch": 1, "prompt": 128, "output": 16,
                              "dtype": {"weights": "fp4", "activations": "fp4", "kv": "fp8"}})
    assert (float(fp4.bytes_weight), float(fp4.bytes_act), float(fp4.bytes_kv)) == (0.5625, 0.5, 1.0)
    hw = jp.load_hardware("b200")
    w8, w4 = (float(jp.evaluate(llama8b, hw, jp.Parallel(), wl).weights_bytes) for wl in (fp8, fp4))
    head = 2 * 128256 * 4096 * 2.0
    assert w4 - head == pytest.approx((w8 - head) * 4.5 / 8, rel=1e-6)
    swept = AXIS_KINDS["weight_dtype"].setter(fp8, jax.numpy.float32(DTYPES.index("fp4")))
    assert float(swept.bytes_weight) == 0.5625 and float(swept.bytes_act) == 1.0


def test_mxfp4_is_a_weights_format():
    # MXFP4 (gpt-oss's experts): one 8-bit scale per 32 four-bit weights, 4.25 bits = 0.53125 B,
    # by hand. A storage format, not a compute dtype: activations and KV may not take it, and the
    # GEMMs run in the activations' dtype (bf16 here, index 2).
    wl = workload_from_dict({"batch": 1, "prompt": 8, "output": 8,
                             "dtype": {"weights": "mxfp4", "activations": "bf16", "kv": "bf16"}})
    assert (float(wl.bytes_weight), float(wl.bytes_act), float(wl.compute_dtype)) == (0.53125, 2.0, 2.0)
    assert dtype_triple("--dtype", "mxfp4/bf16/fp8") == {"weights": "mxfp4", "activations": "bf16", "kv": "fp8"}
    for text in ("mxfp4", "bf16/mxfp4/bf16", "bf16/bf16/mxfp4"):
        with pytest.raises(SpecError, match=f"'{text}' is not a dtype"):
            dtype_triple("--dtype", text)
    with pytest.raises(SpecError, match="dtype.kv has unknown dtype 'mxfp4'"):
        workload_from_dict({"batch": 1, "prompt": 8, "output": 8, "dtype": {"weights": "bf16", "kv": "mxfp4"}})
    # a study's weight_dtype axis takes it (0.53125 B), its dtype axis does not
    from jaxplat.search.study import AXIS_KINDS, _values

    values, labels = _values("study", "weight_dtype", ["fp8", "mxfp4"])
    swept = [float(AXIS_KINDS["weight_dtype"].setter(wl, jax.numpy.float32(v)).bytes_weight) for v in values]
    assert labels == ("fp8", "mxfp4") and swept == [1.0, 0.53125]
    with pytest.raises(SpecError, match="axes.dtype has unknown dtype 'mxfp4'"):
        _values("study", "dtype", ["mxfp4"])


def test_routed_experts_may_be_stored_apart():
    # gpt-oss stores its routed experts in MXFP4 and the rest in BF16 (its config's
    # quantization_config.modules_to_not_convert); a 4th dtype names the experts' weights. By hand for
    # Qwen3-30B-A3B: 48 layers x 128 experts x 3 x 2048 x 768 = 28,991,029,248 expert weights, which
    # cost 0.5625 B (NVFP4) instead of 2 in bf16/bf16/bf16/fp4, everything else unchanged.
    from jaxplat.cost import build_table
    from jaxplat.search.study import AXIS_KINDS

    model, hw = jp.load_model("qwen3-30b-a3b"), jp.load_hardware("b200")
    mixed = {"weights": "bf16", "activations": "bf16", "kv": "bf16", "experts": "fp4"}
    wls = [workload_from_dict({"batch": 1, "prompt": 8, "output": 2, "dtype": d}) for d in ("bf16", mixed)]
    w16, wmix = (float(jp.evaluate(model, hw, jp.Parallel(), wl).weights_bytes) for wl in wls)
    assert wmix == pytest.approx(w16 - 28_991_029_248 * (2 - 0.5625), rel=1e-6)
    # a decode step streams the touched experts at 0.5625 B, the attention at 2
    tables = [build_table(model, jp.Parallel(), wl, "decode", jp.Options()) for wl in wls]
    w0 = [dict(zip(t.names, np.asarray(t.w0))) for t in tables]
    assert w0[1]["experts_up_gate"] == pytest.approx(w0[0]["experts_up_gate"] * 0.5625 / 2, rel=1e-6)
    assert w0[1]["qkv"] == w0[0]["qkv"]
    assert dtype_triple("--dtype", "bf16/bf16/bf16/mxfp4") == {"weights": "bf16", "activations": "bf16",
                                                              "kv": "bf16", "experts": "mxfp4"}
    for text in ("bf16/bf16/bf16/fp9", "bf16/bf16/bf16/fp4/fp4"):
        with pytest.raises(SpecError, match=f"'{text}' is not a dtype"):
            dtype_triple("--dtype", text)
    # the study's dtype axis puts everything at its dtype, the experts too
    swept = AXIS_KINDS["dtype"].setter(wls[1], jax.numpy.float32(DTYPES.index("fp8")))
    assert float(swept.bytes_expert_weight) == 0.0 and float(swept.bytes_weight) == 1.0
    # its experts_dtype axis sets the experts' weights alone, storage formats included:
    # mxfp4 experts are 0.53125 B each, the rest of the bf16 weights unchanged
    from jaxplat.search.study import _values

    values, labels = _values("study", "experts_dtype", ["bf16", "mxfp4"])
    assert labels == ("bf16", "mxfp4")
    swept = AXIS_KINDS["experts_dtype"].setter(wls[0], jax.numpy.float32(values[1]))
    assert (float(swept.bytes_expert_weight), float(swept.bytes_weight)) == (0.53125, 2.0)
    w = float(jp.evaluate(model, hw, jp.Parallel(), swept).weights_bytes)
    assert w == pytest.approx(w16 - 28_991_029_248 * (2 - 0.53125), rel=1e-6)


def test_checkpoint_dtype_is_read_from_quantization_config(capsys):
    # What each config.json's quantization_config says, by reading them: DeepSeek-V3/R1 and Kimi-K2
    # are "fp8" with dynamic E4M3 activations (FP8 GEMMs, KV 16-bit as engines keep it); gpt-oss
    # leaves attention, router, embedding and head out of MXFP4 (modules_to_not_convert): experts only.
    from jaxplat.cli import main
    from jaxplat.model import checkpoint_dtype, load_checkpoint_dtype

    expect = {"deepseek-v3": "fp8/fp8/bf16", "deepseek-r1": "fp8/fp8/bf16", "kimi-k2": "fp8/fp8/bf16",
              "gpt-oss-120b": "bf16/bf16/bf16/mxfp4"}
    found = {p.stem: load_checkpoint_dtype(str(p)) for p in sorted(HF.glob("*.json"))}
    assert {k: v for k, v in found.items() if v} == expect
    assert load_checkpoint_dtype("deepseek-v3") == "fp8/fp8/bf16"  # the built-in spec carries it too
    # the other methods, from their documented keys
    fp16 = {"torch_dtype": "float16"}
    assert checkpoint_dtype({**fp16, "quantization_config": {"quant_method": "awq", "bits": 4}}) == "int4/fp16/fp16"
    assert checkpoint_dtype({"quantization_config": {"quant_method": "gptq", "bits": 8}}) == "int8/bf16/bf16"
    assert checkpoint_dtype({"quantization_config": {"quant_method": "mxfp4"}}) == "mxfp4/bf16/bf16"
    assert checkpoint_dtype({"quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4",
                                                     "kv_cache_quant_algo": "FP8"}}) == "fp4/fp4/fp8"
    assert checkpoint_dtype({"quantization_config": {"quant_method": "compressed-tensors"}}) is None
    with pytest.raises(SpecError, match="bits must be 4 or 8 for gptq, got 3"):
        checkpoint_dtype({"quantization_config": {"quant_method": "gptq", "bits": 3}})
    # `--dtype checkpoint` is the explicit dtype; without --dtype the run warns that it charges bf16
    gpt_oss = ["estimate", "--model", str(HF / "gpt-oss-120b.json"), "--hardware", "h100-sxm", "--json",
               "--allow-infeasible"]
    out = {}
    for flag in ([], ["--dtype", "checkpoint"], ["--dtype", "bf16/bf16/bf16/mxfp4"]):
        assert main(gpt_oss + flag) == 0
        out[tuple(flag)] = json.loads(capsys.readouterr().out)
    ck, explicit, plain = out[("--dtype", "checkpoint")], out[("--dtype", "bf16/bf16/bf16/mxfp4")], out[()]
    assert ck["weights_bytes"] == explicit["weights_bytes"] < plain["weights_bytes"] / 3
    assert not ck["warnings"] and not explicit["warnings"]
    assert any("stored as bf16/bf16/bf16/mxfp4" in w for w in plain["warnings"])
    assert main(["estimate", "--model", "llama-2-7b", "--hardware", "h100-sxm", "--dtype", "checkpoint"]) == 2
    assert "has no quantization_config" in capsys.readouterr().err


def test_cli_errors_are_one_line():
    # The installed entry point: exit status 2 and one line on stderr, no traceback.
    r = subprocess.run([sys.executable, "-m", "jaxplat.cli", "estimate", "--model", "llama-2-7", "--hardware",
                        "h100-sxm"], capture_output=True, text=True)
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "did you mean llama-2-7b" in r.stderr


@pytest.mark.parametrize("flags, msg", [
    (["--batch", "-3"], "--batch must be positive"),
    (["--overlap", "1.5"], "--overlap is a fraction"),
    (["--imbalance", "0.5"], "--imbalance must"),
    (["--imbalance", "nan"], "--imbalance must be a finite number >= 1"),  # NaN fails every comparison
    (["--rate", "nan"], "--rate must be a finite number of requests/s >= 0, got nan"),
    (["--draft", "ngram", "--acceptance", "1.5"], "--acceptance is a per-token probability in [0, 1], got 1.5"),
    (["--draft", "ngram", "--draft-k", "0"], "--draft-k must be a positive number of drafted tokens, got 0"),
    (["--sp", "0"], "--sp must be positive"),
])
def test_cli_rejects_bad_flags_in_one_line(flags, msg, capsys):
    from jaxplat.cli import main

    assert main(["estimate", "--model", "llama-2-7b", "--hardware", "h100-sxm", *flags]) == 2
    err = capsys.readouterr().err
    assert msg in err and err.count("\n") == 1 and "Traceback" not in err


def test_read_yaml_hands_out_copies_of_what_the_file_says_now(tmp_path):
    """Parsed texts are cached (specs.core._parse): each caller still gets
    its own dict, and a file rewritten with other text of the same length
    is read anew."""
    path = tmp_path / "chip.yaml"
    path.write_text("name: a\nmemory: [{size: 80e9}]\n")
    first = read_yaml(path)
    first["memory"][0]["size"] = 1.0
    first["extra"] = True
    assert read_yaml(path) == {"name": "a", "memory": [{"size": 80e9}]}
    path.write_text("name: b\nmemory: [{size: 90e9}]\n")
    assert read_yaml(path) == {"name": "b", "memory": [{"size": 90e9}]}
