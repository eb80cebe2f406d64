"""Hugging Face config.json keys -> `Model`."""

from jaxplat.model.architecture import Model
from jaxplat.model.pytree import as_f32
from jaxplat.specs import SpecError, number, read_yaml, resolve

_SSM_TYPES = ("mamba", "mamba2", "falcon_mamba", "jamba", "zamba", "zamba2", "rwkv")
_NON_GATED_TYPES = ("opt", "gpt2", "gpt3", "gpt_neox", "gptj", "gpt_bigcode", "bloom", "falcon", "phi")
_ALIASES = {  # other spellings of the keys we read (GPT-2 and OPT configs)
    "n_layer": "num_hidden_layers", "n_embd": "hidden_size", "n_head": "num_attention_heads",
    "n_inner": "intermediate_size", "ffn_dim": "intermediate_size",
}


def model_from_config(cfg: dict, src="model") -> Model:
    """Build a `Model` from Hugging Face config.json keys (others ignored)."""
    cfg = dict(cfg)
    if isinstance(cfg.get("text_config"), dict):  # multimodal wrappers (Llama 4)
        cfg = {**cfg, **cfg["text_config"]}
    for alias, key in _ALIASES.items():
        if cfg.get(key) is None and cfg.get(alias) is not None:
            cfg[key] = cfg[alias]
    mtype = str(cfg.get("model_type", "")).lower()
    if mtype in _SSM_TYPES or "layers_block_type" in cfg or "state_size" in cfg:
        raise SpecError(f"{src}: model_type {mtype!r} has state-space (Mamba) layers, which jaxplat does "
                        "not model yet; supported: decoder-only transformers (MHA/GQA/MQA/MLA, dense or MoE)")
    for k in ("num_hidden_layers", "hidden_size", "num_attention_heads", "vocab_size"):
        if cfg.get(k) is None:
            raise SpecError(f"{src}: missing key {k!r}")
    num = lambda k, default=None, **kw: number(src, k, cfg.get(k) if cfg.get(k) is not None else default, **kw)  # noqa: E731
    L, D, H = num("num_hidden_layers"), num("hidden_size"), num("num_attention_heads")
    Hkv = num("num_key_value_heads", H)
    if H % Hkv:
        raise SpecError(f"{src}: num_attention_heads ({H:g}) must be a multiple of num_key_value_heads ({Hkv:g})")
    head_dim = num("head_dim", D / H)
    mla = cfg.get("kv_lora_rank") is not None
    mla_dims = dict(q_lora_rank=0.0, kv_lora_rank=0.0, rope_dim=0.0, nope_dim=0.0, v_head_dim=0.0)
    if mla:
        mla_dims = dict(q_lora_rank=num("q_lora_rank", 0.0, allow_zero=True), kv_lora_rank=num("kv_lora_rank"),
                        rope_dim=num("qk_rope_head_dim"), nope_dim=num("qk_nope_head_dim"),
                        v_head_dim=num("v_head_dim"))
        head_dim = mla_dims["nope_dim"] + mla_dims["rope_dim"]

    experts = 0.0
    for k in ("num_local_experts", "n_routed_experts", "num_experts"):
        if cfg.get(k):
            experts = num(k)
            break
    top_k = num("num_experts_per_tok", 0.0, allow_zero=True) if experts else 0.0
    if experts and not top_k:
        raise SpecError(f"{src}: an MoE model needs num_experts_per_tok")
    if top_k > experts:
        raise SpecError(f"{src}: num_experts_per_tok ({top_k:g}) exceeds the number of experts ({experts:g})")
    dense_width = num("intermediate_size_mlp", None) if cfg.get("intermediate_size_mlp") else None
    if cfg.get("intermediate_size") is None and dense_width is None:
        if mtype in _NON_GATED_TYPES:
            cfg["intermediate_size"] = 4 * D  # GPT-2 convention when n_inner is null
        else:
            raise SpecError(f"{src}: missing key 'intermediate_size'")
    inter = num("intermediate_size")
    expert_width = num("moe_intermediate_size", inter) if experts else 0.0
    dense_layers = L
    if experts:
        if cfg.get("first_k_dense_replace") is not None:
            dense_layers = num("first_k_dense_replace", allow_zero=True)
        elif cfg.get("interleave_moe_layer_step"):  # Llama 4: every step-th layer is MoE
            dense_layers = L - L // num("interleave_moe_layer_step")
        elif cfg.get("decoder_sparse_step"):  # Qwen MoE
            step = int(num("decoder_sparse_step"))
            skip = set(cfg.get("mlp_only_layers") or [])
            dense_layers = float(sum(1 for i in range(int(L)) if i in skip or (i + 1) % step))
        else:
            dense_layers = 0.0
    shared = num("n_shared_experts", 1.0 if mtype.startswith("llama4") else 0.0, allow_zero=True) if experts else 0.0
    if "gated_ffn" in cfg:
        if not isinstance(cfg["gated_ffn"], bool):
            raise SpecError(f"{src}: gated_ffn must be true or false, got {cfg['gated_ffn']!r}")
        gated = cfg["gated_ffn"]
    else:
        gated = mtype not in _NON_GATED_TYPES
    tied = cfg.get("tie_word_embeddings", True)  # the transformers default
    return as_f32(
        Model, layers=L, dense_layers=dense_layers, hidden=D, heads=H, kv_heads=Hkv, head_dim=head_dim,
        intermediate=dense_width or inter, vocab=num("vocab_size"), tied=float(bool(tied)),
        gated=float(gated), experts=experts, top_k=top_k, expert_intermediate=expert_width,
        shared_experts=shared, attention="mla" if mla else "gqa", **mla_dims)


def load_model(name_or_path) -> Model:
    """Load a built-in model by name (e.g. 'llama-3.1-70b') or a YAML / config.json file."""
    path = resolve("models", name_or_path)
    return model_from_config(read_yaml(path), src=str(path))


