"""Hugging Face config.json keys -> `Model`."""

import math

from jaxplat.model.architecture import Model
from jaxplat.model.pytree import as_f32
from jaxplat.specs import SpecError, number, read_yaml, resolve

_UNSUPPORTED_TYPES = ("zamba", "zamba2", "rwkv", "rwkv5", "rwkv6", "bamba", "falcon_h1")
_MAMBA_TYPES = ("mamba", "falcon_mamba", "mamba2")
_NON_GATED_TYPES = ("opt", "gpt2", "gpt3", "gpt_neox", "gptj", "gpt_bigcode", "bloom", "falcon", "phi")
_ALIASES = {  # other spellings of the keys we read (GPT-2, OPT and Nemotron-H configs)
    "n_layer": "num_hidden_layers", "n_embd": "hidden_size", "n_head": "num_attention_heads",
    "n_inner": "intermediate_size", "ffn_dim": "intermediate_size", "n_positions": "max_position_embeddings",
    "attention_head_dim": "head_dim",  # Nemotron-H 8B/47B/56B configs
}
# Model types whose transformers config defaults tie_word_embeddings to false
# (Llama4Config and Llama4TextConfig, transformers/models/llama4); every other
# config takes PretrainedConfig's true.
_UNTIED_BY_DEFAULT = ("llama4", "llama4_text")
_LAYER_TYPES = {"full_attention": "global", "sliding_attention": "sliding", "chunked_attention": "chunked"}
# Hugging Face keys that add, remove or reshape layers and that this loader
# does not read: a value other than the harmless one is refused by name, so a
# layer never disappears silently. key -> (value that changes nothing, what it adds).
_REFUSED = {
    "word_embed_proj_dim": (lambda v, c: v in (None, c.get("hidden_size")),
                            "OPT's project_in/project_out layers (embeddings narrower than hidden_size)"),
    "full_attention_interval": (lambda v, c: v is None, "Qwen3-Next's linear-attention (Gated DeltaNet) layers"),
    "attn_type_list": (lambda v, c: not v or (isinstance(v, list) and all(x == 1 for x in v)),
                       "MiniMax's lightning (linear) attention layers"),
    "parallel_attn_mlp_res": (lambda v, c: not v, "Snowflake Arctic's dense residual MLP beside the experts"),
    "moe_layer_frequency": (lambda v, c: v in (None, 1), "Arctic's MoE on every n-th layer only"),
    "cross_attention_layers": (lambda v, c: not v, "Llama 3.2 Vision's cross-attention layers"),
    "num_kv_shared_layers": (lambda v, c: not v, "Gemma 3n's layers that reuse another layer's KV cache"),
    "moe_latent_size": (lambda v, c: not v, "Nemotron 3's latent MoE (experts in a projected latent width)"),
}
# Read nowhere and deliberately so: multi-token-prediction modules
# (num_nextn_predict_layers: DeepSeek-V3, "MTP modules can be discarded at
# inference", arXiv 2412.19437 Sec. 2.2, and its 671B excludes them;
# use_mtp / num_mtp_modules / mtp_transformer_layers: MiniMax) are not in the
# forward pass that serves tokens (at most a draft model: --speculative);
# pretraining_tp only slices training matmuls; biases, soft-capping and
# partial rotary dims change no GEMM shape.


def local_attention(cfg: dict, mtype: str, layers: int, src) -> dict:
    """Model fields local_layers, window, chunked from a config's local
    attention, as Hugging Face transformers reads it:

    * `layer_types` (gpt-oss, recent configs): one entry per layer,
      'sliding_attention' (window `sliding_window`), 'chunked_attention'
      (window `attention_chunk_size`) or 'full_attention';
    * Gemma 2: every other layer, from the first, has a `sliding_window`
      window; Gemma 3: all but every `sliding_window_pattern`-th (default 6);
    * Llama 4 (`attention_chunk_size`): chunked attention on the RoPE layers,
      `no_rope_layers[i]` = 1, by default all but every
      `no_rope_layer_interval`-th (4);
    * Qwen2-style `use_sliding_window`: layers from `max_window_layers` on;
      false or a null `sliding_window`: none. Otherwise (Mistral) a
      `sliding_window` applies to every layer.
    """
    def window(key):
        return number(src, key, cfg.get(key))

    none = dict(local_layers=0.0, window=0.0, chunked=0.0)
    types = cfg.get("layer_types")
    if types is not None:
        if not isinstance(types, list) or len(types) != layers:
            raise SpecError(f"{src}: layer_types must list one entry per layer ({layers}), got {types!r:.80}")
        bad = [t for t in types if t not in _LAYER_TYPES]
        if bad:
            raise SpecError(f"{src}: layer_types has {bad[0]!r}; supported: {', '.join(_LAYER_TYPES)}")
        kinds = {_LAYER_TYPES[t] for t in types} - {"global"}
        if len(kinds) > 1:
            raise SpecError(f"{src}: layer_types mixes sliding and chunked attention; one kind is supported")
        if not kinds:
            return none
        chunked = kinds == {"chunked"}
        n_local = sum(_LAYER_TYPES[t] != "global" for t in types)
        key = "attention_chunk_size" if chunked else "sliding_window"
        return dict(local_layers=float(n_local), window=window(key), chunked=float(chunked))
    if cfg.get("attention_chunk_size") is not None:  # Llama 4
        rope = cfg.get("no_rope_layers")
        if rope:
            if not isinstance(rope, list) or len(rope) != layers:
                raise SpecError(f"{src}: no_rope_layers must list one 0/1 per layer ({layers})")
            n_local = sum(1 for x in rope if x)
        else:
            every = int(number(src, "no_rope_layer_interval", cfg.get("no_rope_layer_interval", 4)))
            n_local = sum(1 for i in range(layers) if (i + 1) % every)
        return dict(local_layers=float(n_local), window=window("attention_chunk_size"), chunked=1.0)
    if cfg.get("sliding_window") is None or cfg.get("use_sliding_window") is False:
        return none
    if mtype == "gemma2":
        n_local = (layers + 1) // 2
    elif mtype.startswith("gemma3"):
        every = int(number(src, "sliding_window_pattern", cfg.get("sliding_window_pattern", 6)))
        n_local = layers - layers // every
    elif cfg.get("use_sliding_window"):
        n_local = layers - min(layers, int(number(src, "max_window_layers", cfg.get("max_window_layers", 0),
                                                  allow_zero=True)))
    else:
        n_local = layers
    return dict(local_layers=float(n_local), window=window("sliding_window"), chunked=0.0)


def model_from_config(cfg: dict, src="model") -> Model:
    """Build a `Model` from Hugging Face config.json keys (others ignored)."""
    cfg = dict(cfg)
    if isinstance(cfg.get("text_config"), dict):  # multimodal wrappers (Llama 4)
        cfg = {**cfg, **cfg["text_config"]}
    for alias, key in _ALIASES.items():
        if cfg.get(key) is None and cfg.get(alias) is not None:
            cfg[key] = cfg[alias]
    mtype = str(cfg.get("model_type", "")).lower()
    for key, (harmless, what) in _REFUSED.items():
        if not harmless(cfg.get(key), cfg):
            raise SpecError(f"{src}: {key} = {cfg[key]!r:.60} is not modelled ({what}); "
                            "supported: configs without it")
    _check_quantization(cfg, src)
    if mtype in _UNSUPPORTED_TYPES or ("layers_block_type" in cfg and mtype != "nemotron_h"):
        raise SpecError(f"{src}: model_type {mtype!r} is not modelled; supported: decoder-only transformers "
                        "(MHA/GQA/MQA/MLA, dense or MoE), Mamba / Mamba-2 / Falcon-Mamba, Jamba and Nemotron-H "
                        "hybrids")
    if mtype in _MAMBA_TYPES or ("state_size" in cfg and "num_attention_heads" not in cfg):
        return _mamba_from_config(cfg, mtype, src)
    for k in ("num_hidden_layers", "hidden_size", "num_attention_heads", "vocab_size"):
        if cfg.get(k) is None:
            raise SpecError(f"{src}: missing key {k!r}")
    num = lambda k, default=None, **kw: _finite(src, k, number(src, k, cfg.get(k) if cfg.get(k) is not None  # noqa: E731
                                                             else default, **kw))
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
        if cfg.get(k) is not None and not isinstance(cfg.get(k), (int, float, str)):
            raise SpecError(f"{src}: {k} must be a number of experts, got {cfg.get(k)!r}")
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
        if cfg.get("first_k_dense_replace") is not None or cfg.get("moe_layer_freq") is not None:
            # DeepSeek-V2/V3 (transformers' DeepseekV3DecoderLayer): layer i is MoE when
            # i >= first_k_dense_replace and i % moe_layer_freq == 0.
            first = int(num("first_k_dense_replace", 0.0, allow_zero=True))
            freq = int(num("moe_layer_freq", 1.0))
            dense_layers = float(sum(1 for i in range(int(L)) if i < first or i % freq))
        elif cfg.get("interleave_moe_layer_step"):  # Llama 4: every step-th layer is MoE
            dense_layers = L - L // num("interleave_moe_layer_step")
        elif cfg.get("decoder_sparse_step") or cfg.get("mlp_only_layers"):  # Qwen MoE (step default 1)
            step = int(num("decoder_sparse_step", 1.0))
            skip = set(cfg.get("mlp_only_layers") or [])
            dense_layers = float(sum(1 for i in range(int(L)) if i in skip or (i + 1) % step))
        else:
            dense_layers = 0.0
    shared = num("n_shared_experts", 1.0 if mtype.startswith("llama4") else 0.0, allow_zero=True) if experts else 0.0
    shared = _shared_width(cfg, src, expert_width, shared) if experts else 0.0
    if "gated_ffn" in cfg:
        if not isinstance(cfg["gated_ffn"], bool):
            raise SpecError(f"{src}: gated_ffn must be true or false, got {cfg['gated_ffn']!r}")
        gated = cfg["gated_ffn"]
    else:
        gated = mtype not in _NON_GATED_TYPES
    ssm = {}
    if mtype == "jamba" or cfg.get("attn_layer_period") is not None:
        ssm, dense_layers = _jamba_layers(cfg, num, L, experts, src)
    if mtype == "nemotron_h":
        ssm, L, dense_layers = _nemotron_h(cfg, num, L, experts, expert_width, src)
        shared, gated = ssm.pop("shared"), False
    tied = cfg.get("tie_word_embeddings", mtype not in _UNTIED_BY_DEFAULT)
    max_ctx = num("max_position_embeddings") if cfg.get("max_position_embeddings") is not None else 0.0
    local = local_attention(cfg, mtype, int(L), src)
    return as_f32(
        Model, layers=L, dense_layers=dense_layers, hidden=D, heads=H, kv_heads=Hkv, head_dim=head_dim,
        intermediate=dense_width or inter, vocab=num("vocab_size"), tied=float(bool(tied)),
        gated=float(gated), experts=experts, top_k=top_k, expert_intermediate=expert_width,
        shared_experts=shared, attention="mla" if mla else "gqa", max_context=max_ctx,
        windowed=local["local_layers"] > 0, **local, **mla_dims, **ssm)


def _finite(src, key, x: float) -> float:
    """x, or a SpecError: no model dimension is infinite."""
    if not math.isfinite(x):
        raise SpecError(f"{src}: {key} must be a finite number, got {x}")
    return x


def _shared_width(cfg, src, expert_width, n_shared):
    """Shared experts in units of one routed expert's width: Qwen2-MoE /
    Qwen3-Next (`shared_expert_intermediate_size`) and MiniMax
    (`shared_intermediate_size`) give the shared expert's FFN width, a gated
    MLP like a routed expert's (transformers' Qwen2MoeSparseMoeBlock), so it is
    width / expert width experts (Qwen1.5-MoE-A2.7B: 5632 / 1408 = 4; its
    1-wide sigmoid gate is not charged). Otherwise `n_shared`."""
    keys = [k for k in ("shared_expert_intermediate_size", "shared_intermediate_size") if cfg.get(k) is not None]
    if not keys:
        return n_shared
    width = number(src, keys[0], cfg[keys[0]], allow_zero=True)
    if width and cfg.get("n_shared_experts"):
        raise SpecError(f"{src}: give either {keys[0]} or n_shared_experts, not both")
    return width / expert_width if width else n_shared


def _check_quantization(cfg, src):
    """quantization_config.weight_block_size: a list of two positive integers
    (DeepSeek-V3's [128, 128]) when given."""
    q = cfg.get("quantization_config")
    block = q.get("weight_block_size") if isinstance(q, dict) else None
    if block is not None and not (isinstance(block, list) and len(block) == 2
                                  and all(isinstance(b, int) and not isinstance(b, bool) and b > 0 for b in block)):
        raise SpecError(f"{src}: quantization_config.weight_block_size must be a list of two positive integers "
                        f"(e.g. [128, 128]), got {block!r:.40}")


def _jamba_layers(cfg, num, L, experts, src):
    """Jamba (Lieber et al. 2024, arXiv 2403.19887): layer i has attention when
    i % attn_layer_period == attn_layer_offset (else a Mamba block), and an
    MoE FFN when i % expert_layer_period == expert_layer_offset (else dense).
    Returns (Mamba fields, dense FFN layers)."""
    a_per, a_off = int(num("attn_layer_period")), int(num("attn_layer_offset", 0.0, allow_zero=True))
    attn = sum(1 for i in range(int(L)) if i % a_per == a_off)
    dense = L
    if experts:
        e_per = int(num("expert_layer_period", 1.0))
        e_off = int(num("expert_layer_offset", 0.0, allow_zero=True))
        dense = float(sum(1 for i in range(int(L)) if i % e_per != e_off))
    D = num("hidden_size")
    dims = dict(ssm="mamba1", mamba_layers=L - attn, d_inner=num("mamba_expand", 2.0) * D,
                d_state=num("mamba_d_state", 16.0), d_conv=num("mamba_d_conv", 4.0),
                dt_rank=_dt_rank(cfg.get("mamba_dt_rank", "auto"), D, src))
    return dims, dense


# Mamba-2's SSD chunk length when a config gives no `chunk_size` (mamba_ssm's Mamba2 and
# transformers' Mamba2Config default, tokens).
SSD_CHUNK = 256.0

# Nemotron-H's block letters (hybrid_override_pattern) and names (layers_block_type).
_NEMOTRON_H_BLOCKS = {"M": "mamba", "E": "moe", "*": "attention", "-": "mlp"}


def _nemotron_h(cfg, num, blocks, experts, expert_width, src):
    """Nemotron-H (NVIDIA, arXiv 2504.03624; the Nemotron 3 family adds MoE
    blocks): each of the `blocks` is one pre-norm sublayer, a Mamba-2 mixer
    (M), attention (*), an MoE (E) or a squared-ReLU MLP (-), in the order of
    `hybrid_override_pattern` (or the names of `layers_block_type`). Costs add
    up per block, so the blocks are paired into layers of a mixer and an FFN:
    as many layers as mixers, the FFN blocks in as many of them and none in
    the rest (`Model.no_ffn_layers`); pipeline stages then split these
    layers, not the blocks. Returns (Mamba fields plus the shared experts'
    width in routed experts, layers, dense layers)."""
    pattern = cfg.get("hybrid_override_pattern")
    if pattern is None and isinstance(cfg.get("layers_block_type"), list):
        names = {v: k for k, v in _NEMOTRON_H_BLOCKS.items()}
        names.update({"full_attention": "*"})
        pattern = "".join(names.get(str(b), "?") for b in cfg["layers_block_type"])
    if not isinstance(pattern, str) or not pattern or set(pattern) - set(_NEMOTRON_H_BLOCKS):
        raise SpecError(f"{src}: nemotron_h needs hybrid_override_pattern, a string of M (Mamba-2), * (attention), "
                        f"E (MoE) and - (MLP), or layers_block_type naming them; got {pattern!r:.60}")
    if len(pattern) != blocks:
        raise SpecError(f"{src}: hybrid_override_pattern has {len(pattern)} blocks, num_hidden_layers says "
                        f"{blocks:g}")
    n = {c: float(pattern.count(c)) for c in _NEMOTRON_H_BLOCKS}
    mixers, ffns = n["M"] + n["*"], n["E"] + n["-"]
    if ffns > mixers:
        raise SpecError(f"{src}: {ffns:g} FFN blocks (E, -) but {mixers:g} mixers (M, *): a pattern with more FFN "
                        "blocks than mixers is not modelled")
    if n["E"] and not experts:
        raise SpecError(f"{src}: hybrid_override_pattern has MoE blocks (E) but no n_routed_experts")
    # transformers' NemotronHMOE: one shared MLP of moe_shared_expert_intermediate_size, whatever n_shared_experts
    width = num("moe_shared_expert_intermediate_size", 0.0, allow_zero=True) if n["E"] else 0.0
    dims = dict(no_ffn_layers=mixers - ffns, shared=width / expert_width if width else 0.0)
    if n["M"]:
        heads, head_dim = num("mamba_num_heads"), num("mamba_head_dim")
        dims.update(ssm="mamba2", mamba_layers=n["M"], d_inner=heads * head_dim, d_state=num("ssm_state_size"),
                    d_conv=num("conv_kernel", 4.0), dt_rank=0.0, ssm_heads=heads, ssm_groups=num("n_groups", 1.0),
                    ssm_chunk=num("chunk_size", SSD_CHUNK))
    return dims, mixers, n["-"]


def _dt_rank(value, hidden, src):
    """Mamba's dt_rank: "auto" means ceil(hidden / 16) (Gu & Dao 2023; transformers' MambaConfig)."""
    if value in (None, "auto"):
        return math.ceil(hidden / 16.0)
    return number(src, "time_step_rank", value)


def _mamba_from_config(cfg, mtype, src) -> Model:
    """Mamba (Gu & Dao 2023, arXiv 2312.00752), Falcon-Mamba (same block) or
    Mamba-2 (Dao & Gu 2024, arXiv 2405.21060): every layer is a Mamba block,
    no attention and no FFN."""
    for k in ("num_hidden_layers", "hidden_size", "vocab_size", "state_size"):
        if cfg.get(k) is None:
            raise SpecError(f"{src}: missing key {k!r}")
    num = lambda k, default=None, **kw: _finite(src, k, number(src, k, cfg.get(k) if cfg.get(k) is not None  # noqa: E731
                                                             else default, **kw))
    L, D = num("num_hidden_layers"), num("hidden_size")
    two = mtype == "mamba2"
    if two:
        heads = num("num_heads")
        d_inner = heads * num("head_dim")
        ssm = dict(ssm="mamba2", ssm_heads=heads, ssm_groups=num("n_groups", 1.0), dt_rank=0.0,
                   ssm_chunk=num("chunk_size", SSD_CHUNK))
    else:
        # transformers' MambaConfig: intermediate_size = expand x hidden (Falcon-Mamba's
        # config says expand 16 but intermediate_size 8192, which transformers uses).
        d_inner = num("intermediate_size", num("expand", 2.0) * D)
        ssm = dict(ssm="mamba1", dt_rank=_dt_rank(cfg.get("time_step_rank", "auto"), D, src))
    return as_f32(
        Model, layers=L, dense_layers=0.0, hidden=D, heads=0.0, kv_heads=0.0, head_dim=0.0, intermediate=0.0,
        vocab=num("vocab_size"), tied=float(bool(cfg.get("tie_word_embeddings", True))), gated=0.0, experts=0.0,
        top_k=0.0, expert_intermediate=0.0, shared_experts=0.0, q_lora_rank=0.0, kv_lora_rank=0.0, rope_dim=0.0,
        nope_dim=0.0, v_head_dim=0.0, mamba_layers=L, d_inner=d_inner, d_state=num("state_size"),
        d_conv=num("conv_kernel", 4.0), **ssm)


def load_model(name_or_path) -> Model:
    """Load a built-in model by name (e.g. 'llama-3.1-70b') or a YAML / config.json file."""
    path = resolve("models", name_or_path)
    return model_from_config(read_yaml(path), src=str(path))


# The 16-bit dtype a checkpoint's unquantized tensors keep (config.json
# `torch_dtype`, or `dtype` in newer transformers).
_SIXTEEN = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16"}


def checkpoint_dtype(cfg: dict, src="model"):
    """The `--dtype` (weights/activations/kv[/experts]) a config.json's
    `quantization_config` describes, or None for a 16-bit checkpoint or a
    method not read here (compressed-tensors recipes name layers by regex).

    * "fp8" (DeepSeek-V3/R1, Kimi-K2, Qwen3-FP8): E4M3 weights, activations
      quantized on the fly ("dynamic"), so FP8 GEMMs; the KV cache as
      engines keep it by default, 16-bit. Its 128x128 block scales (one
      float32 per 16384 weights, 0.02%) are not charged.
    * "mxfp4" (gpt-oss): MXFP4 weights computed in 16 bits; where
      `modules_to_not_convert` lists the attention, only the routed experts
      (the fourth part).
    * "awq" / "gptq": int4 (or `bits` 8: int8) weights, 16-bit GEMMs.
    * "modelopt" (NVIDIA ModelOpt exports): `quant_algo` FP8 or NVFP4 GEMMs,
      `kv_cache_quant_algo` FP8 or a 16-bit KV cache.
    """
    cfg = {**cfg, **cfg["text_config"]} if isinstance(cfg.get("text_config"), dict) else cfg
    _check_quantization(cfg, src)
    q = cfg.get("quantization_config")
    if not isinstance(q, dict):
        return None
    wide = _SIXTEEN.get(str(cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16"), "bf16")
    method = str(q.get("quant_method", "")).lower()
    if method == "fp8":
        return f"fp8/fp8/{wide}"
    if method == "mxfp4":
        kept = " ".join(str(m) for m in q.get("modules_to_not_convert") or [])
        return f"{wide}/{wide}/{wide}/mxfp4" if "self_attn" in kept else f"mxfp4/{wide}/{wide}"
    if method in ("awq", "gptq"):
        bits = q.get("bits", q.get("w_bit", 4))
        if bits not in (4, 8):
            raise SpecError(f"{src}: quantization_config bits must be 4 or 8 for {method}, got {bits!r}")
        return f"int{bits}/{wide}/{wide}"
    if method == "modelopt":
        algo = {"FP8": "fp8", "NVFP4": "fp4"}.get(str(q.get("quant_algo", "")).upper())
        if algo is None:
            return None
        kv = "fp8" if str(q.get("kv_cache_quant_algo", "")).upper() == "FP8" else wide
        return f"{algo}/{algo}/{kv}"
    return None


def load_checkpoint_dtype(name_or_path):
    """`checkpoint_dtype` of a built-in model or a YAML / config.json file."""
    path = resolve("models", name_or_path)
    return checkpoint_dtype(read_yaml(path), src=str(path))
