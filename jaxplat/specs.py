"""YAML specs -> pytrees, validated on the host with one-line errors.

Model specs use Hugging Face `config.json` keys (extra keys are ignored: a
real config.json has dozens we do not use). Hardware and workload specs are
ours, so an unknown key there is a typo and an error that names it.
"""

import difflib
import math
import os
import re
from pathlib import Path

import numpy as np
import yaml

from jaxplat import cost, energy
from jaxplat._pytree import as_f32
from jaxplat.hardware import MAX_MEM_LEVELS, MAX_NET_LEVELS, TOPOLOGIES, Hardware
from jaxplat.model import Model
from jaxplat.units import BYTES_PER_ELEMENT, DTYPE_FALLBACK, DTYPES
from jaxplat.workload import Workload

SPEC_ROOT = Path(os.environ.get("JAXPLAT_SPECS", Path(__file__).resolve().parent.parent / "specs"))
UNBOUNDED_SLO = 1e9  # s: an SLO that is never violated


class SpecError(ValueError):
    """A spec that cannot be used; the message is one line for the user."""


class _Loader(yaml.SafeLoader):
    """SafeLoader that also reads 80e9, 1e-6 and 3.35e12 as floats.

    PyYAML follows YAML 1.1, whose float needs a dot and a signed exponent.
    """


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:\d[\d_]*)?(?:\.\d*)?[eE][-+]?\d+$|^[-+]?(?:\d[\d_]*)\.\d*$|^[-+]?\.\d+$"
               r"|^[-+]?\.(?:inf|Inf|INF)$|^\.(?:nan|NaN|NAN)$"),
    list("-+0123456789."))


def read_yaml(path: Path) -> dict:
    """Parse a YAML (or JSON) file into a dict, or raise SpecError."""
    try:
        data = yaml.load(Path(path).read_text(), Loader=_Loader)  # noqa: S506 (a SafeLoader)
    except yaml.YAMLError as e:
        raise SpecError(f"{path}: not valid YAML ({str(e).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise SpecError(f"{path}: expected a mapping of keys at the top level")
    return data


def builtin_names(kind: str) -> list[str]:
    """Names of the built-in specs of a kind ('models', 'hardware', 'workloads')."""
    return sorted(p.stem for p in (SPEC_ROOT / kind).glob("*.yaml"))


def _resolve(kind: str, name_or_path) -> Path:
    p = Path(str(name_or_path))
    if p.suffix in (".yaml", ".yml", ".json") or p.exists():
        if not p.is_file():
            raise SpecError(f"{kind} spec file not found: {p}")
        return p
    builtin = SPEC_ROOT / kind / f"{name_or_path}.yaml"
    if builtin.is_file():
        return builtin
    names = builtin_names(kind)
    close = difflib.get_close_matches(str(name_or_path), names, n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else f"; built-in: {', '.join(names)}"
    raise SpecError(f"unknown {kind[:-1] if kind != 'hardware' else kind} {name_or_path!r}{hint}")


def _number(src, key, value, *, positive=True, allow_zero=False) -> float:
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise SpecError(f"{src}: {key} must be a number, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise SpecError(f"{src}: {key} must be a number, got {value!r}")
    if positive and (value < 0 or (value == 0 and not allow_zero)):
        raise SpecError(f"{src}: {key} must be {'non-negative' if allow_zero else 'positive'}, got {value}")
    return float(value)


def _check_keys(src, where, data: dict, allowed, required=()):
    for k in data:
        if k not in allowed:
            close = difflib.get_close_matches(k, allowed, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise SpecError(f"{src}: unknown key {where}{k!r}{hint}; allowed: {', '.join(allowed)}")
    for k in required:
        if k not in data:
            raise SpecError(f"{src}: missing key {where}{k!r}")


def _dtype(src, key, value) -> str:
    if value not in DTYPES:
        raise SpecError(f"{src}: {key} has unknown dtype {value!r}; allowed: {', '.join(DTYPES)}")
    return value


# ----------------------------------------------------------------- hardware

_HW_KEYS = ("name", "description", "flops", "memory", "network", "efficiency", "tdp_w", "price_usd",
            "energy", "tco")  # energy, tco, pj_per_bit: jaxplat.energy / jaxplat.cost (defaults there)
_MEM_KEYS = ("name", "size", "bandwidth", "pj_per_bit")
_NET_KEYS = ("name", "domain", "bandwidth", "latency", "topology", "pj_per_bit")
_EFF_KEYS = ("compute", "memory", "network")


def hardware_from_dict(d: dict, src="hardware") -> Hardware:
    """Validate a hardware spec dict (schema in README) and build `Hardware`."""
    _check_keys(src, "", d, _HW_KEYS, required=("flops", "memory", "network"))
    flops = d["flops"]
    if not isinstance(flops, dict) or not flops:
        raise SpecError(f"{src}: flops must map dtypes to FLOP/s, e.g. {{bf16: 989e12}}")
    peak = {_dtype(src, "flops", k): _number(src, f"flops.{k}", v) for k, v in flops.items()}
    for dt in DTYPES:  # a dtype without native support runs on the next wider unit
        fb = dt
        while fb is not None and fb not in peak:
            fb = DTYPE_FALLBACK[fb]
        if fb is None:  # nothing wider: take the fastest listed
            fb = max(peak, key=peak.get)
        peak.setdefault(dt, peak[fb])

    levels = d["memory"]
    if not isinstance(levels, list) or not levels:
        raise SpecError(f"{src}: memory must be a non-empty list of levels, fastest first")
    if len(levels) > MAX_MEM_LEVELS:
        raise SpecError(f"{src}: at most {MAX_MEM_LEVELS} memory levels, got {len(levels)}")
    mem = []
    for i, lv in enumerate(levels):
        if not isinstance(lv, dict):
            raise SpecError(f"{src}: memory[{i}] must be a mapping with keys {', '.join(_MEM_KEYS)}")
        _check_keys(src, f"memory[{i}].", lv, _MEM_KEYS, required=_MEM_KEYS[:3])
        mem.append((str(lv["name"]), _number(src, f"memory[{i}].size", lv["size"]),
                    _number(src, f"memory[{i}].bandwidth", lv["bandwidth"])))
    sram_size = sram_bw = 0.0
    if mem[0][0] == "sram":
        _, sram_size, sram_bw = mem[0]
        mem = mem[1:]
        if not mem:  # SRAM-only chip (Groq, Cerebras): SRAM is also main memory
            mem = [("sram", sram_size, sram_bw)]
            sram_size = 0.0
    mem_size = [m[1] for m in mem] + [0.0] * (MAX_MEM_LEVELS - len(mem))
    mem_bw = [m[2] for m in mem] + [1.0] * (MAX_MEM_LEVELS - len(mem))

    nets = d["network"]
    if not isinstance(nets, list) or not nets or len(nets) > MAX_NET_LEVELS:
        raise SpecError(f"{src}: network must be a list of 1 to {MAX_NET_LEVELS} levels, innermost first")
    dom, bw, lat, topo = [], [], [], []
    for i, lv in enumerate(nets):
        if not isinstance(lv, dict):
            raise SpecError(f"{src}: network[{i}] must be a mapping with keys {', '.join(_NET_KEYS)}")
        _check_keys(src, f"network[{i}].", lv, _NET_KEYS, required=("domain", "bandwidth", "latency"))
        dom.append(_number(src, f"network[{i}].domain", lv["domain"]))
        bw.append(_number(src, f"network[{i}].bandwidth", lv["bandwidth"]))
        lat.append(_number(src, f"network[{i}].latency", lv["latency"], allow_zero=True))
        t = lv.get("topology", "switch")
        if t not in TOPOLOGIES:
            raise SpecError(f"{src}: network[{i}].topology {t!r} unknown; allowed: {', '.join(TOPOLOGIES)}")
        topo.append(float(TOPOLOGIES.index(t)))
        if i and dom[i] <= dom[i - 1]:
            raise SpecError(f"{src}: network[{i}].domain must exceed the level inside it ({dom[i - 1]:g})")
    while len(dom) < MAX_NET_LEVELS:  # padding: an unbounded copy of the outermost level
        dom.append(max(1e9, dom[-1] * 2))
        bw.append(bw[-1])
        lat.append(lat[-1])
        topo.append(topo[-1])

    eff = d.get("efficiency", {}) or {}
    _check_keys(src, "efficiency.", eff, _EFF_KEYS)
    effs = {}
    for k in _EFF_KEYS:
        effs[k] = _number(src, f"efficiency.{k}", eff.get(k, 1.0))
        if effs[k] > 1.0:
            raise SpecError(f"{src}: efficiency.{k} is a fraction of peak in (0, 1], got {effs[k]}")
    return as_f32(
        Hardware, flops=np.array([peak[dt] for dt in DTYPES]), sram_size=sram_size, sram_bw=sram_bw,
        mem_size=np.array(mem_size), mem_bw=np.array(mem_bw), net_domain=np.array(dom),
        net_bw=np.array(bw), net_latency=np.array(lat), net_topology=np.array(topo),
        eff_compute=effs["compute"], eff_memory=effs["memory"], eff_network=effs["network"],
        tdp=_number(src, "tdp_w", d.get("tdp_w", 0.0), allow_zero=True),
        price=_number(src, "price_usd", d.get("price_usd", 0.0), allow_zero=True),
        **energy.hardware_energy_fields(d, src), **cost.tco_fields(d.get("tco"), src))


def network_level_names(name_or_path) -> list[str]:
    """Names of a hardware spec's network levels, innermost first (for reports)."""
    nets = read_yaml(_resolve("hardware", name_or_path)).get("network") or []
    return [str(lv.get("name", f"level {i}")) for i, lv in enumerate(nets)]


def load_hardware(name_or_path) -> Hardware:
    """Load a built-in chip by name (e.g. 'h100-sxm') or a YAML/JSON file."""
    path = _resolve("hardware", name_or_path)
    return hardware_from_dict(read_yaml(path), src=str(path))


# -------------------------------------------------------------------- models

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
    num = lambda k, default=None, **kw: _number(src, k, cfg.get(k) if cfg.get(k) is not None else default, **kw)  # noqa: E731
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
    path = _resolve("models", name_or_path)
    return model_from_config(read_yaml(path), src=str(path))


# ----------------------------------------------------------------- workloads

_WL_KEYS = ("name", "description", "batch", "prompt", "output", "beams", "dtype", "slo")
_DTYPE_KEYS = ("weights", "activations", "kv")
_SLO_KEYS = ("ttft", "tpot")


def workload_from_dict(d: dict, src="workload") -> Workload:
    """Validate a workload spec dict and build `Workload`."""
    _check_keys(src, "", d, _WL_KEYS, required=("batch", "prompt", "output"))
    dt = d.get("dtype", "bf16")
    if isinstance(dt, str):
        dt = {k: dt for k in _DTYPE_KEYS}
    if not isinstance(dt, dict):
        raise SpecError(f"{src}: dtype must be a dtype name or a mapping with keys {', '.join(_DTYPE_KEYS)}")
    _check_keys(src, "dtype.", dt, _DTYPE_KEYS)
    dts = {k: _dtype(src, f"dtype.{k}", dt.get(k, "bf16")) for k in _DTYPE_KEYS}
    slo = d.get("slo", {}) or {}
    _check_keys(src, "slo.", slo, _SLO_KEYS)
    return as_f32(
        Workload, batch=_number(src, "batch", d["batch"]), prompt=_number(src, "prompt", d["prompt"]),
        output=_number(src, "output", d["output"]), beams=_number(src, "beams", d.get("beams", 1)),
        bytes_weight=BYTES_PER_ELEMENT[dts["weights"]], bytes_act=BYTES_PER_ELEMENT[dts["activations"]],
        bytes_kv=BYTES_PER_ELEMENT[dts["kv"]], compute_dtype=float(DTYPES.index(dts["activations"])),
        ttft_slo=_number(src, "slo.ttft", slo.get("ttft", UNBOUNDED_SLO)),
        tpot_slo=_number(src, "slo.tpot", slo.get("tpot", UNBOUNDED_SLO)))


def load_workload(name_or_path) -> Workload:
    """Load a built-in workload by name (e.g. 'chatbot') or a YAML file."""
    path = _resolve("workloads", name_or_path)
    return workload_from_dict(read_yaml(path), src=str(path))
