"""The published training runs of data/measured/training_2026-12.csv as
`cost.training.train_step` inputs (model, hardware, parallel, workload).

A run is expressible when its model's dimensions are known (the row's own
columns, a built-in spec for the MoE models, MosaicML's MPT configs, or NeMo's
launcher configs for the NeMo 24.07 rows that print none), its
degrees multiply to its chips, ep divides dp (Megatron carves EP out of
DP) and its sequence length and global batch are given (TorchTitan's AsyncTP
benchmark: `seq_len`; its pipelined rows: `batches`). Its measured tokens/s per chip is the
row's own number, or, for Megatron-LM's rows that give TFLOP/s or MFU only,
that number over the FLOPs per token of the paper's own formula:
  SC'21 Tables 1-2 (recompute counted): 96·l·h²·(1 + s/6h + V/16lh) per
    sequence-token (Narayanan et al. SC'21 eq. 3, divided by B·s);
  Korthikanti et al. README (MFU, no recompute): 72·l·h²·(1 + s/6h + V/16lh)
    at the A100's 312 TFLOP/s;
  Megatron-Core r0.8 (TFLOP/s, no recompute): 72·l·h²·(1 + s/6h + V/12lh)
    (megatron/training/training.py num_floating_point_operations for
    multi-head attention and a 4h GELU MLP).
NeMo's long-sequence tables give TFLOP/s per GPU by a count whose attention
term is not known (`nemo_long_sequence_tokens`): `runs()` leaves them out.
Assumptions per source family, chosen from the published configurations,
not from the errors, are in `options_for`.
"""

import csv
import functools
from pathlib import Path

import yaml

from jaxplat.cost.attention_kernels import kernel_fields
from jaxplat.cost.training import TrainOptions, TrainWorkload, fold_experts
from jaxplat.model import Options, Parallel, load_hardware, load_model, replace
from jaxplat.specs.units import DTYPES

ROOT = Path(__file__).resolve().parents[2]
CSV = ROOT / "data/measured/training_2026-12.csv"
SPLIT = ROOT / "data/measured/training_split.yaml"

# MosaicML LLM Foundry MPT configs (scripts/train/yamls/pretrain/mpt-*.yaml): d_model, n_heads,
# n_layers; vocab 50368 (padded GPT-NeoX), MLP 4·d_model GELU (not gated), tied embeddings.
MPT = {"125m": (768, 12, 12), "350m": (1024, 16, 24), "760m": (1536, 12, 24), "1b": (2048, 16, 24),
       "3b": (2560, 20, 32), "7b": (4096, 32, 32), "13b": (5120, 40, 40), "30b": (7168, 64, 48),
       "70b": (8192, 64, 80)}
MPT_VOCAB = 50368.0
# The NeMo 24.07 rows whose dimensions the performance summary does not print, from NeMo-Framework-
# Launcher's training configs of those models (launcher_scripts/conf/training/gpt3/5b.yaml, 20b.yaml;
# nemotron/nemotron_8b.yaml, nemotron_22b.yaml, nemotron_340b.yaml): layers, hidden, ffn_hidden, heads,
# query groups, vocab. GPT-3: 4h GELU MLP, tied embeddings, the GPT-2 BPE vocab (51,200 as the other
# GPT rows take it); Nemotron: a squared-ReLU MLP (not gated), untied embeddings, the 256k SentencePiece
# vocab (nemotron_2_256k). Checked against the summary's own model TFLOP/s: tokens/s x (6N + 12·l·h·s)
# matches it within 0.1% for every one (tests/test_training_guard.py).
NEMO_2407_DIMS = {"GPT3-5B": (24, 4096, 16384, 32, 32, 51200), "GPT3-20B": (44, 6144, 24576, 48, 48, 51200),
                  "Nemotron-8B": (32, 4096, 16384, 32, 32, 256000),
                  "Nemotron-22B": (40, 6144, 24576, 48, 48, 256000),
                  "Nemotron-340B": (96, 18432, 73728, 96, 8, 256000)}
MOE_SPECS = {"DeepSeekV3": "deepseek-v3", "Qwen3_30B_a3B": "qwen3-30b-a3b", "Qwen3_235B_a22B": "qwen3-235b-a22b",
             "GPT OSS 120B": "gpt-oss-120b", "Nemotron_3_Nano": "nemotron-3-nano-30b-a3b"}
FAMILIES = ("Megatron-Bridge/NeMo", "LLM Foundry", "Megatron-LM SC21", "Megatron-Core r0.8", "NeMo 24.07",
            "NeMo long-sequence", "TorchTitan", "Megatron-LM README 2022")


def family(source: str) -> str:
    return next((f for f in FAMILIES if source.startswith(f)), source)


@functools.cache
def test_prefixes() -> tuple:
    """The sources of the declared test split (read once: every row asks)."""
    return tuple(yaml.safe_load(SPLIT.read_text())["test_source_prefixes"])


def is_test(row) -> bool:
    return row["source"].startswith(test_prefixes())


def _num(x, default=None):
    return float(x) if x not in ("", None) else default


_BASE = {}


def _base(name):
    if name not in _BASE:
        _BASE[name] = load_model(name)
    return _BASE[name]


def _dense(layers, hidden, heads, kv_heads, intermediate, vocab, tied: bool, gated: bool):
    """A dense decoder of these dimensions (Llama-2-7B's spec with them replaced; no context limit)."""
    f = float
    return replace(_base("llama-2-7b"), layers=f(layers), dense_layers=f(layers), hidden=f(hidden), heads=f(heads),
                   kv_heads=f(kv_heads), head_dim=f(hidden) / f(heads), intermediate=f(intermediate), vocab=f(vocab),
                   tied=1.0 if tied else 0.0, gated=1.0 if gated else 0.0, max_context=0.0)


def model_for(row):
    """The Model of a row, or None (dimensions unknown)."""
    name = row["model"]
    for prefix, spec in MOE_SPECS.items():
        if name.startswith(prefix):
            return _base(spec)
    if name.startswith("MPT "):
        d, a, n = MPT[name.split()[1]]
        return _dense(n, d, a, a, 4 * d, MPT_VOCAB, tied=True, gated=False)
    if family(row["source"]) == "NeMo 24.07" and name in NEMO_2407_DIMS and not row["layers"]:
        L, h, ffn, heads, kv, vocab = NEMO_2407_DIMS[name]
        return _dense(L, h, heads, kv, ffn, vocab, tied=name.startswith("GPT"), gated=False)
    L, h, heads = _num(row["layers"]), _num(row["hidden"]), _num(row["heads"])
    if None in (L, h, heads) or "Nemotron" in name or "OSS" in name:
        return None
    gpt = name.upper().startswith("GPT")
    return _dense(L, h, heads, _num(row["kv_heads"], heads), _num(row["ffn_hidden"], 4.0 * h),
                  _num(row["vocab"], 51200.0), tied=gpt, gated=not gpt)


@functools.lru_cache(maxsize=None)  # a handful of chips among hundreds of rows; a Hardware is immutable
def hardware_for(chip: str):
    """The Hardware of a row's chip (built-in specs; A100 40 GB and the
    96 GB Grand Teton H100 as variants of them; its 500 W limit is the
    run's power cap, `power_cap`), or None."""
    if chip.startswith("A100-40GB"):
        hw = load_hardware("a100-80gb")  # A100 40GB datasheet: 40 GB HBM2, 1,555 GB/s
        return replace(hw, mem_size=hw.memory.size.at[0].set(40.0 * 2**30),
                       mem_bw=hw.memory.bandwidth.at[0].set(1.555e12))
    if chip.startswith("A100"):
        return load_hardware("a100-80gb")
    if chip.startswith("H100 SXM 96GB"):
        hw = load_hardware("h100-sxm")
        return replace(hw, mem_size=hw.memory.size.at[0].set(96.0 * 2**30))
    if chip.startswith("H100"):
        return load_hardware("h100-sxm")
    if chip.startswith("B200"):
        return load_hardware("b200")
    return None


def power_cap(chip: str) -> float:
    """TrainWorkload.power_cap_w of a row's chip: Meta's Grand Teton H100s
    run at 500 W (TorchTitan, Liang et al. 2024, arXiv 2410.06511, its
    experimental setup), below the H100 SXM's 700 W TDP; 0 elsewhere."""
    return 500.0 if chip.startswith("H100 SXM 96GB") else 0.0


def recipe(dtype: str, chip: str):
    """(bytes_act, compute dtype, scale_block) of a row's precision column."""
    d = dtype.lower()
    if "nvfp4" in d:
        return 0.5 + 1.0 / 16.0, "fp4", 16.0
    if "fp8" in d or "float8" in d:
        if "alt quantization" in d:  # the 25.09 table's alternate: MXFP8 on B200, 1x128 / 128x128 blocks on H100
            return 1.0, "fp8", 32.0 if chip.startswith("B200") else 128.0
        # Per-tensor (current or delayed) scaling unless the row names MX: the 25.09 table's primary FP8
        # is not MXFP8 (MXFP8 is its alternate on B200), later tables name FP8-CS and FP8-MX apart.
        return 1.0, "fp8", 32.0 if "mx" in d else 0.0
    return 2.0, "bf16", 0.0


def zero_stage(row) -> float:
    z = row["zero_or_fsdp"].lower()
    if "full_shard" in z or "zero-3" in z or z.startswith("fsdp") or "megatron-fsdp" in z:
        return 3.0
    if "shard_grad_op" in z:
        return 2.0
    if "distributed optimizer" in z:
        return 1.0
    # NeMo / Megatron-Bridge / Megatron-Core run the distributed optimizer by default; SC'21 predates it.
    return 1.0 if family(row["source"]) in ("Megatron-Bridge/NeMo", "NeMo 24.07", "Megatron-Core r0.8",
                                            "NeMo long-sequence") else 0.0


def overlap(row) -> float:
    """Parallel.overlap of a row: 1 where the source's configurations run
    TP communication beside the GEMMs (NeMo / Megatron-Bridge performance
    recipes set tp_comm_overlap; Megatron-Core's scaling runs overlap TP,
    DP and PP communication; TorchTitan's AsyncTP), else 0 (Megatron-LM in
    2021-22, LLM Foundry's FSDP without TP)."""
    fam = family(row["source"])
    if fam in ("Megatron-Bridge/NeMo", "NeMo 24.07", "Megatron-Core r0.8", "NeMo long-sequence"):
        return 1.0
    # TorchTitan names AsyncTP in the precision column (2024-12 tables) or as "async TP" in the notes
    # (the 2025-06 AsyncTP benchmark, beside its "vanilla TP" rows).
    return 1.0 if "asynctp" in row["dtype"].lower() or "async tp" in row["notes"].lower() else 0.0


def ep_overlap(row) -> float:
    """TrainWorkload.ep_overlap of a row: 1 where its Megatron-Bridge recipe
    sets moe_a2a_overlap=True, the EP all-to-alls hidden behind another
    micro-batch's compute: Qwen3-235B-A22B on H100, and DeepSeek-V3 on B200
    at pp 8, vp 2, ep 32 (DEEPSEEK_V3_PRETRAIN_CONFIG_B200_FP8_MX_V2, the
    only B200 DeepSeek-V3 recipe at those degrees; the pp-16 ep-8 ones set
    it False); 0 elsewhere (the recipes of the other MoE rows set it False
    or not at all)."""
    name = row["model"].lower()
    if family(row["source"]) != "Megatron-Bridge/NeMo":
        return 0.0
    if "235b" in name and row["chip"].startswith("H100"):
        return 1.0
    deg = (_num(row["pp"], 1), _num(row["vp"], 1), _num(row["ep"], 1))
    return 1.0 if "deepseek" in name and row["chip"].startswith("B200") and deg == (8, 2, 32) else 0.0


def recompute_modules(row) -> dict:
    """TrainWorkload's recompute_<module> flags of a row from its
    Megatron-Bridge recipe's recompute_modules
    (scripts/performance/configs/deepseek/deepseek_workload_base_configs.py):
    DeepSeek-V3 on B200 at pp 16 (the V1 recipe) recomputes mla_up_proj, at
    pp 8 vp 2 ep 32 (B200_FP8_MX_V2) and on H100 mla_up_proj and mlp; the
    Qwen3 and Llama recipes name none; GPT-OSS-120B's on B200 and H100
    (gpt_oss/gpt_oss_workload_base_configs.py, every B200 and H100 variant)
    layernorm and moe_act."""
    if family(row["source"]) != "Megatron-Bridge/NeMo":
        return {}
    if row["model"].startswith("GPT OSS") and row["chip"].startswith(("B200", "H100")):
        return {"recompute_layernorm": 1.0, "recompute_moe_act": 1.0}
    if "deepseek" not in row["model"].lower():
        return {}
    v1_b200 = row["chip"].startswith("B200") and _num(row["pp"], 1) == 16
    return {"recompute_mla_up_proj": 1.0, **({} if v1_b200 else {"recompute_mlp": 1.0})}


def moe_dispatcher(row) -> str:
    """TrainOptions.moe_dispatcher of a row's software: Megatron-Bridge's
    performance recipes (scripts/performance/configs/qwen, deepseek and
    nemotronh, *_workload_base_configs.py) run Qwen3-30B-A3B, DeepSeek-V3
    and Nemotron 3 Nano on the flex dispatcher with HybridEP
    (moe_flex_dispatcher_backend="hybridep"),
    Qwen3-235B-A22B on B200 and H100 on the all-to-all dispatcher
    (moe_token_dispatcher_type="alltoall"); every other row takes the
    default, the all-to-all dispatcher Megatron-Core's MoE README
    recommends with expert parallelism."""
    name = row["model"].lower()
    if family(row["source"]) == "Megatron-Bridge/NeMo" and ("30b_a3b" in name or "deepseek" in name
                                                           or "nemotron_3_nano" in name):
        return "fused"
    return "alltoall"


def expert_tp(row, deg) -> int:
    """The expert tensor-parallel degree of a row (`fold_experts`). Megatron-Bridge's
    MoE performance recipes set expert_tensor_parallel_size=1 (BASE_QWEN3_*_CONFIG,
    BASE_DEEPSEEK_V3_CONFIG in scripts/performance/configs), so with tp > 1
    their experts are split over the tp ranks too (MoE parallel folding) and
    `ep` counts them; every other row keeps expert tensor parallelism at tp."""
    moe = row["ep"] and int(_num(row["ep"], 1)) > 1
    return 1 if moe and family(row["source"]) == "Megatron-Bridge/NeMo" else deg["tp"]


def train_options(row) -> TrainOptions:
    """Megatron-LM of 2021-22 (SC'21, the Korthikanti et al. README) had no
    FlashAttention (Dao et al., May 2022; Megatron took it up in 2023): its
    attention wrote the scores to memory (a fused scale-mask-softmax
    kernel between two batched GEMMs), `Options(fused_attention=False)`.
    SC'21's Megatron-LM also predates sequence parallelism (Korthikanti et
    al. 2022), so its tensor-parallel sublayers end in all-reduces and
    their norms run on every rank. TorchTitan's sequence parallelism is
    PyTorch DTensor's, whose autograd saves each gathered input
    (`TrainOptions.sp_regather` False) unless activation checkpointing
    says otherwise: under full AC the recomputed forward gathers and saves
    it again (the model's full recomputation), and its per-op selective AC
    does not save all-gathers (torchtitan's _op_sac_save_list: matmuls,
    attention, reduce-scatters, max), so the backward gathers again as
    Megatron's does. The MoE dispatcher: `moe_dispatcher`."""
    fam = family(row["source"])
    if fam in ("Megatron-LM SC21", "Megatron-LM README 2022"):
        return TrainOptions(options=Options(fused_attention=False), sequence_parallel=fam != "Megatron-LM SC21",
                            moe_dispatcher=moe_dispatcher(row))
    regather = fam != "TorchTitan" or "per-op" in row["recompute"].lower()
    return TrainOptions(sp_regather=regather, moe_dispatcher=moe_dispatcher(row))


def attention_kernel(row) -> str:
    """The ATTENTION_KERNELS name of a row's software stack, from its
    published configuration: LLM Foundry's H100 runs install flash-attn
    2.4.2 (scripts/train/benchmarking/submit_benchmarks.py, `pip install
    flash-attn==2.4.2`, extras gpu-flash2): FlashAttention-2 on Hopper
    ("fa2"); its A100 tables were made with the script's earlier default
    `--attn_impl triton` (Triton FlashAttention: "triton"). TorchTitan calls
    PyTorch's scaled_dot_product_attention, whose flash backend is
    FlashAttention-2 (on H100 as LLM Foundry's). Megatron/NeMo run
    Transformer Engine's cuDNN fused attention, written for the chip:
    "native"."""
    fam, chip = family(row["source"]), row["chip"]
    if fam == "LLM Foundry":
        return "fa2" if chip.startswith("H100") else "triton"
    if fam == "TorchTitan" and chip.startswith("H100"):
        return "fa2"
    return "native"


def grad_comm_bytes(row) -> float:
    """TrainWorkload.bytes_grad_comm of a row: 2 (bf16) where its stack reduces
    the gradients in 16 bits, LLM Foundry's FSDP in its PURE mixed-precision
    mode and Megatron-Bridge's performance recipes (their common configs set
    `mixed_precision.grad_reduce_in_fp32 = False` and `ddp.grad_reduce_in_fp32
    = False`: scripts/performance/configs/llama/llama3_llm_pretrain.py
    `set_llama3_common_configs`, and the qwen, deepseek, gpt_oss and
    nemotronh ones alike); else 4 (fp32: Megatron-LM's arguments turn on
    accumulate_allreduce_grads_in_fp32 with bf16)."""
    if "pure" in row["zero_or_fsdp"].lower() or family(row["source"]) == "Megatron-Bridge/NeMo":
        return 2.0
    return 4.0


def dropout(row) -> float:
    """1 for Megatron's and NeMo's GPT models (hidden and attention dropout
    0.1 by default in Megatron-LM's arguments and NeMo's GPT-3 configs), 0
    for Llama, Qwen, DeepSeek and MPT (LLM Foundry's yamls set every pdrop
    to 0)."""
    return 1.0 if row["model"].upper().startswith("GPT") else 0.0


def seq_len(row):
    """Tokens per sequence of a row, or None. TorchTitan's AsyncTP benchmark (2025-06) states none, but
    gives its commands: torchtitan/models/llama3/train_configs/llama3_8b.toml and llama3_70b.toml with
    no --training.seq_len, so the configs' seq_len = 8192 (the rule the CSV's notes apply to the
    2024-12 TorchTitan rows, from the configs at commit 9dec370)."""
    s = _num(row["seq_len"])
    if s is None and row["source"].startswith("TorchTitan AsyncTP benchmark 2025-06"):
        return 8192.0
    return s


def batches(row, deg):
    """(global batch, micro-batch) of a row in sequences; global None when not given. TorchTitan's
    tables give each data-parallel rank's local batch (the micro_batch column) and, with pipeline
    parallelism, split it into as many micro-batches as there are stages: TorchTitan's default when
    `experimental.pipeline_parallel_microbatches` is unset (build_pipeline_schedule, 2024), and its
    tables set none. So a pipelined TorchTitan row runs pp micro-batches of local/pp sequences, and its
    global batch, where the table omits it, is the local batch times dp (Table 5's rows give both:
    256 = 32 x 8)."""
    gb, mb = _num(row["global_batch_seqs"]), _num(row["micro_batch"], 1.0)
    if family(row["source"]) == "TorchTitan" and deg["pp"] > 1:
        gb = mb * deg["dp"] if gb is None else gb
        mb = mb / deg["pp"]
    return gb, mb


def recompute_code(text: str) -> float:
    t = text.lower()
    if "full" in t:
        return 2.0
    if "selective" in t or "sac" in t:
        return 1.0
    return 0.0


def _megatron_flops(row, factor, logit_div):
    L, h, s = _num(row["layers"]), _num(row["hidden"]), _num(row["seq_len"])
    V = _num(row["vocab"], 51200.0)
    return factor * L * h * h * (1.0 + s / (6.0 * h) + V / (logit_div * L * h))


def nemo_long_sequence_tokens(row, causal: bool):
    """Tokens/s per chip of a NeMo long-sequence table row (its TFLOP/s per GPU) by NeMo's llama2/llama3 FLOP
    formula (`nemo/utils/flops_formulas.py`): l·h²·(12 + 12·g/a + 18·f/h + 12·s/h·c + 6·V/(l·h)) per token,
    c = 1/2 in its 2025 version (causal) and 1 in its 2024 one. Which one each table used is not in the data
    (experiments/training/README.md), so `runs()` leaves these rows out and `validate.py --long-sequence`
    prints them both ways. None for another row."""
    if family(row["source"]) != "NeMo long-sequence" or row["metric"] != "tflops_per_chip":
        return None
    L, h, f = _num(row["layers"]), _num(row["hidden"]), _num(row["ffn_hidden"])
    a, g, V, s = _num(row["heads"]), _num(row["kv_heads"]), _num(row["vocab"]), _num(row["seq_len"])
    per_token = L * h * h * (12 + 12 * g / a + 18 * f / h + 12 * s / h * (0.5 if causal else 1.0) + 6 * V / (L * h))
    return _num(row["value"]) * 1e12 / per_token


def measured_tokens(row):
    """Measured tokens/s per chip of a row, or None when its metric is not
    one this script reads (see the module doc)."""
    fam, metric, v = family(row["source"]), row["metric"], _num(row["value"])
    if metric == "tokens_per_s_per_chip":
        return v
    if fam == "Megatron-LM SC21" and metric == "tflops_per_chip":
        return v * 1e12 / _megatron_flops(row, 96.0, 16.0)
    if fam == "Megatron-LM README 2022" and metric == "mfu":
        return v / 100.0 * 312e12 / _megatron_flops(row, 72.0, 16.0)
    if fam == "Megatron-Core r0.8" and metric == "tflops_per_chip" and row["tp"]:
        return v * 1e12 / _megatron_flops(row, 72.0, 12.0)
    return None


def inputs(row):
    """(model, hardware, Parallel, TrainWorkload, TrainOptions) of a row, or a string
    saying why it cannot be expressed."""
    model, hw = model_for(row), hardware_for(row["chip"])
    if model is None:
        return "model dimensions not given"
    if hw is None:
        return f"no spec for chip {row['chip']}"
    seq = seq_len(row)
    if seq is None:
        return "sequence length not given"
    deg = {k: int(_num(row[k], 1)) for k in ("tp", "pp", "vp", "cp", "dp", "ep")}
    global_batch, micro_batch = batches(row, deg)
    if global_batch is None:
        return "global batch not given"
    chips = int(_num(row["chips"]))
    if deg["tp"] * deg["pp"] * deg["cp"] * deg["dp"] != chips:
        return "degrees do not multiply to the chips"
    etp = expert_tp(row, deg)
    fold = deg["tp"] // etp
    if deg["ep"] % fold or deg["dp"] % (deg["ep"] // fold):
        return "ep does not divide dp (expert parallelism across tp ranks)"
    act, dtype, block = recipe(row["dtype"], row["chip"])
    par = fold_experts(Parallel(tp=deg["tp"], pp=deg["pp"], vp=deg["vp"], cp=deg["cp"], ep=deg["ep"], dp=deg["dp"],
                                overlap=overlap(row)), etp)
    twl = TrainWorkload(global_batch=global_batch, micro_batch=micro_batch,
                        seq=seq, recompute=recompute_code(row["recompute"]), zero=zero_stage(row),
                        bytes_act=act, compute_dtype=float(DTYPES.index(dtype)), scale_block=block,
                        bytes_grad_comm=grad_comm_bytes(row), dropout=dropout(row),
                        power_cap_w=power_cap(row["chip"]),
                        ep_overlap=ep_overlap(row), **kernel_fields(attention_kernel(row)),
                        **recompute_modules(row))
    return model, hw, par, twl, train_options(row)


def runs(measure=measured_tokens):
    """[(row, measured tokens/s per chip, inputs or reason)] for every row
    whose metric `measure` reads (default `measured_tokens`: the rows the
    figures count; `validate.py --long-sequence` passes
    `nemo_long_sequence_tokens`)."""
    out = []
    with open(CSV) as f:
        for row in csv.DictReader(f):
            m = measure(row)
            if m is not None:
                out.append((row, m, inputs(row)))
    return out

