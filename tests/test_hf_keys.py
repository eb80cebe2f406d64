"""Hugging Face keys that change the architecture: read, or refused by name
(issue 39, item 8). Each test fails on a loader that drops the key silently."""

import json
from pathlib import Path

import pytest

from jaxplat.model import checkpoint_dtype, model_from_config
from jaxplat.model.architecture import param_count
from jaxplat.specs import SpecError

HF = Path(__file__).resolve().parent.parent / "data" / "hf_configs"

# Qwen/Qwen1.5-MoE-A2.7B config.json: the keys the loader reads (the hub file,
# as copied in public test suites; model card: 14.3B parameters, 2.7B activated).
QWEN15_MOE = {
    "architectures": ["Qwen2MoeForCausalLM"], "model_type": "qwen2_moe", "decoder_sparse_step": 1,
    "hidden_size": 2048, "intermediate_size": 5632, "moe_intermediate_size": 1408,
    "shared_expert_intermediate_size": 5632, "num_attention_heads": 16, "num_key_value_heads": 16,
    "num_experts": 60, "num_experts_per_tok": 4, "num_hidden_layers": 24, "vocab_size": 151936,
    "max_position_embeddings": 8192, "tie_word_embeddings": False, "mlp_only_layers": [],
}


def test_qwen2_moe_keeps_its_shared_expert():
    """By hand: per layer attention 4 * 2048^2 = 16.78M, 60 routed experts
    3 * 2048 * 1408 each = 519.0M, the shared expert 3 * 2048 * 5632 = 34.6M,
    router 2048 * 60; x 24 layers = 13.69B, + untied embeddings
    2 * 151936 * 2048 = 0.622B: 14.31B (the model card's 14.3B). Without the
    shared expert (the old loader) it was 13.48B."""
    d, layers = 2048, 24
    per_layer = 4 * d * d + 60 * 3 * d * 1408 + 3 * d * 5632 + d * 60
    want = layers * per_layer + 2 * 151936 * d
    assert want == pytest.approx(14.31e9, rel=1e-3)
    m = model_from_config(QWEN15_MOE, src="qwen1.5-moe")
    assert float(m.shared_experts) == 4.0  # 5632 / 1408 routed-expert widths
    assert float(param_count(m)) == pytest.approx(want, rel=1e-6)


def test_shared_width_and_count_together_are_refused():
    with pytest.raises(SpecError, match="shared_expert_intermediate_size or n_shared_experts"):
        model_from_config({**QWEN15_MOE, "n_shared_experts": 2}, src="q")


def test_mlp_only_layers_without_sparse_step():
    """transformers' Qwen2MoE: layer i is dense when i is in mlp_only_layers
    (decoder_sparse_step defaults to 1). Three listed layers: 3 dense, 21 MoE.
    The old loader read mlp_only_layers only next to a decoder_sparse_step."""
    cfg = {k: v for k, v in QWEN15_MOE.items() if k != "decoder_sparse_step"}
    m = model_from_config({**cfg, "mlp_only_layers": [0, 5, 23]}, src="q")
    assert float(m.dense_layers) == 3.0


def test_deepseek_moe_layer_freq():
    """DeepSeek-V3's config with moe_layer_freq 2: layer i is MoE when
    i >= first_k_dense_replace (3) and i % 2 == 0: of 61 layers, the even
    ones from 4 to 60 (29) are MoE, 32 dense. The old loader took 58 MoE."""
    cfg = json.loads((HF / "deepseek-v3.json").read_text())
    assert float(model_from_config(cfg, src="v3").dense_layers) == 3.0  # freq 1 as shipped
    m = model_from_config({**cfg, "moe_layer_freq": 2}, src="v3")
    assert float(m.dense_layers) == 61 - len(range(4, 61, 2)) == 32


@pytest.mark.parametrize("key, value", [
    ("word_embed_proj_dim", 512), ("full_attention_interval", 4), ("attn_type_list", [0, 1]),
    ("parallel_attn_mlp_res", True), ("moe_layer_frequency", 2), ("cross_attention_layers", [3, 8]),
    ("num_kv_shared_layers", 10),
])
def test_unread_architecture_keys_are_refused_by_name(key, value):
    cfg = json.loads((HF / "llama-3.1-8b.json").read_text())
    with pytest.raises(SpecError, match=f"{key} = .* is not modelled") as e:
        model_from_config({**cfg, key: value}, src="cfg.json")
    assert "\n" not in str(e.value)


def test_harmless_values_of_refused_keys_load():
    """OPT-66B's word_embed_proj_dim equals its hidden size; MTP modules are ignored."""
    opt = json.loads((HF / "opt-66b.json").read_text())
    model_from_config(opt, src="opt")
    cfg = json.loads((HF / "llama-3.1-8b.json").read_text())
    base = float(param_count(model_from_config(cfg, src="a")))
    more = {**cfg, "attn_type_list": [1] * 32, "num_nextn_predict_layers": 1, "moe_layer_frequency": 1}
    assert float(param_count(model_from_config(more, src="b"))) == base


@pytest.mark.parametrize("block", ["128x128", "128", [128], [128, "128"], [0, 128], True])
def test_weight_block_size_must_be_two_integers(block):
    cfg = json.loads((HF / "deepseek-v3.json").read_text())
    assert checkpoint_dtype(cfg) == "fp8/fp8/bf16"  # [128, 128] as shipped
    bad = {**cfg, "quantization_config": {**cfg["quantization_config"], "weight_block_size": block}}
    for call in (model_from_config, checkpoint_dtype):
        with pytest.raises(SpecError, match="weight_block_size must be a list of two positive integers"):
            call(bad, src="v3")
