"""Convert the measured tables in this folder into the rows `jaxplat calibrate`
reads (schema: README.md, "Calibration rows"), writing calibration_rows.csv
(the rows the calibration fits) and heldout_rows.csv (rows it never fits:
experiments/heldout_check.py predicts them).

    python data/measured/convert.py            # from the repository root

Every assumption the source tables leave open is a named constant below and
is written into the row's `note`. Rows jaxplat cannot express yet (a chip
without a built-in spec, a parallelism without a Parallel field) are left out
and listed on stderr with the reason; rerun after adding the chip.
"""

import csv
import math
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))
from jaxplat.model import Parallel, load_hardware, load_model  # noqa: E402
from jaxplat.model.architecture import param_count  # noqa: E402
from jaxplat.specs import builtin_names, dtype_triple, units  # noqa: E402

OUT = HERE / "calibration_rows.csv"
HELDOUT = HERE / "heldout_rows.csv"
COLUMNS = ["model", "hardware", "tp", "pp", "ep", "moe_ep", "moe_gather", "dp", "microbatches", "dtype", "prompt",
           "output", "prompt_cv", "output_cv", "batch", "concurrency", "rate", "offline", "max_batch", "max_num_tokens",
           "chunk", "kv_block", "mem_fraction", "prefill_first", "metric", "value", "engine", "source", "note"]

# --- assumptions (each one lands in the rows' notes) -----------------------
# Engine defaults: KV block tokens, iteration token budget, chunked prefill.
ENGINES = {
    "trtllm": dict(kv_block=32, max_num_tokens=8192, chunk=0),   # TensorRT-LLM tokens_per_block 32, max_num_tokens 8192
    "vllm": dict(kv_block=16, max_num_tokens=8192, chunk=0),     # vLLM block_size 16
    "sglang": dict(kv_block=1, max_num_tokens=8192, chunk=8192),  # SGLang token-level pages, chunked_prefill_size 8192
}
# MLPerf datasets: mean output from the README; mean input unknown (bounded
# by 1024 for OpenOrca, ~20k for the 405B set): assumed, spread assumed.
DATASETS = {
    "llama-2-70b": dict(prompt=512, output=294.45, prompt_cv=0.7, output_cv=0.9,
                        note="OpenOrca mean input assumed 512 (bound 1024), length CVs assumed"),
    "mixtral-8x7b": dict(prompt=512, output=144.84, prompt_cv=0.7, output_cv=0.9,
                         note="mixed dataset mean input assumed 512, length CVs assumed"),
    "llama-3.1-405b": dict(prompt=8000, output=684.7, prompt_cv=0.7, output_cv=0.7,
                           note="405B dataset mean input assumed 8000 (up to ~20k), length CVs assumed"),
}
# Parallelism where the v5.0 configs were not retrieved: the v5.1 settings the
# source names, or the same model's setting on the previous chip.
ASSUMED_PARALLEL = {
    ("llama-3.1-405b", "b200", "Offline"): (2, 2), ("llama-3.1-405b", "b200", "Server"): (4, 1),
    ("llama-3.1-405b", "gb200-nvl72", "Offline"): (2, 2), ("llama-3.1-405b", "gb200-nvl72", "Server"): (2, 2),
    ("llama-3.1-405b", "h200-sxm", "Offline"): (4, 2), ("llama-3.1-405b", "h200-sxm", "Server"): (8, 1),
    ("mixtral-8x7b", "b200", "Offline"): (1, 1), ("mixtral-8x7b", "b200", "Server"): (1, 1),
}
# KV-cache dtype of the dstack DeepSeek-R1 runs: none of their launch flags
# sets one (vLLM and SGLang --kv-cache-dtype, TensorRT-LLM's kv_cache_config
# dtype default to "auto", the checkpoint's activation dtype: bf16 for the FP8
# DeepSeek-R1 checkpoint, whose config.json has torch_dtype bfloat16 and no KV
# quantization). Weights FP8 (block-scaled), GEMM activations FP8.
DSTACK_DTYPE = "fp8/fp8/bf16"
# vLLM 0.7 with chunked prefill off (it is, for MLA models) sizes an
# iteration at the model length: max_num_batched_tokens = max(max_model_len,
# 2048) (vllm/config.py SchedulerConfig of v0.7.3); max_model_len is
# --max-model-len where the flags give it, else the checkpoint's
# max_position_embeddings (deepseek-ai/DeepSeek-R1 config.json: 163840).
DEEPSEEK_R1_MAX_MODEL_LEN = 163840
TRTLLM_TABLE_MEM_FRACTION = 0.95  # perf-overview: KV fraction 0.95 (0.90 where that ran out of memory)

MODELS = {"llama-3.3-70b": "llama-3.1-70b", "llama-3.1-8b": "llama-3.1-8b", "Llama-2-70B-chat": "llama-2-70b",
          "llama-3.1-405b": "llama-3.1-405b", "qwen3-235b-a22b": "qwen3-235b-a22b",
          "qwen3-30b-a3b": "qwen3-30b-a3b", "llama-4-scout": "llama-4-scout", "llama-4-maverick": "llama-4-maverick",
          "Mixtral-8x7B-Instruct": "mixtral-8x7b", "Llama-3.1-405B-Instruct": "llama-3.1-405b",
          "DeepSeek-R1 (671B MoE, 37B active)": "deepseek-v3"}  # R1 has the V3 architecture
HARDWARE = (("GB200 NVL72", "gb200-nvl72"), ("H100-SXM", "h100-sxm"), ("H200-SXM", "h200-sxm"),
            ("B200-SXM", "b200"), ("GH200", "gh200"), ("MI300X", "mi300x"), ("MI325X", "mi325x"),
            ("Gaudi 2", "gaudi2"))
METRICS = {"output_throughput_system": "throughput_tok_s", "TTFT_mean": "ttft_s", "TPOT_mean": "tpot_s"}


def _row(**kw):
    r = {c: "" for c in COLUMNS}
    r.update({k: v for k, v in kw.items() if v is not None})
    return r


def trtllm_bench_settings(model, hardware, dtype, tp, pp, isl, osl, fraction=TRTLLM_TABLE_MEM_FRACTION):
    """(max_batch_size, max_num_tokens) that `trtllm-bench throughput` picks
    when the command line gives neither, as the perf-overview runs did:
    tensorrt_llm/bench/build/tuning.py (calc_engine_setting, finetune_setting;
    NVIDIA/TensorRT-LLM, v0.17-v1.0) through bench/benchmark/utils/general.py
    (get_settings: without chunked prefill, max_num_tokens grows to hold the
    longest prompt beside a full batch).

    KV requests = fraction x (GiB of the tp x pp devices - parameters x bytes
    per weight) / (2 x layers x max(tp, kv heads) x head size x KV bytes x
    (ISL + OSL)); batch = that, at most 4096, over pp, rounded up to 32 / 128
    / 256; tokens = batch x (1 + ISL / OSL), at most 32768, rounded up to 256
    / 512 / 1024, at least 2048. A batch here is per scheduler: with
    attention data parallel each rank has its own.
    """
    m = load_model(model)
    gib = float(load_hardware(hardware).mem_size[0]) / 2**30  # nvml total memory, GiB (bench/build/utils.py)
    d = dtype_triple("trtllm_bench_settings", dtype)
    w, kv = units.BYTES_PER_ELEMENT[d["weights"]], units.BYTES_PER_ELEMENT[d["kv"]]
    engine_gib = float(param_count(m)) * w / 2**30
    per_token = 2 * float(m.layers) * max(tp, float(m.kv_heads)) * float(m.head_dim) * kv / 2**30
    requests = fraction * (gib * tp * pp - engine_gib) / (per_token * (isl + osl))
    raw_bs = min(requests, 4096) / pp
    raw_tok = min(raw_bs * (1 + isl / osl), 32768)
    bs = _round_up(raw_bs, ((256, 32), (1024, 128), (math.inf, 256)), least=64)
    tok = _round_up(raw_tok, ((4096, 256), (8192, 512), (math.inf, 1024)), least=2048)
    return bs, max(tok, isl + bs)


def _round_up(x, rungs, least):
    """x rounded up to the step of the first (limit, step) rung it is under, at least `least`."""
    step = next(step for limit, step in rungs if x < limit)
    return max(least, step * math.ceil(x / step))


def trtllm_table(path, source="trtllm-perf-overview"):
    """TensorRT-LLM perf-overview: offline output tokens/s, fixed ISL/OSL.
    An `ep` column (attention data parallel over ep ranks, Parallel.ep) is
    optional: 1 where absent; with ep > 1 the MoE tokens move by
    all-gather / reduce-scatter (`moe_gather`: TensorRT-LLM 1.0's fused MoE
    under attention DP takes that path unless its MNNVL all-to-all is on, a
    GB200 NVL72 feature). Batch cap and iteration budget are
    trtllm-bench's own (`trtllm_bench_settings`, per rank; the replica's cap
    is ep times a rank's); chunked prefill is off (trtllm-bench's default)."""
    e = ENGINES["trtllm"]
    for r in csv.DictReader(open(path)):
        tp, pp, gpus, ep = int(r["tp"]), int(r["pp"]), int(r["gpus"]), int(r.get("ep") or 1)
        prompt, output = int(r["isl"]), int(r["osl"])
        bs, tok = trtllm_bench_settings(MODELS[r["model"]], r["gpu"], r["dtype"], tp * ep, pp, prompt, output)
        yield _row(model=MODELS[r["model"]], hardware=r["gpu"], tp=tp, pp=pp, ep=ep, moe_ep=1,
                   moe_gather=int(ep > 1), dp=gpus // (tp * pp * ep),
                   microbatches=pp, dtype=r["dtype"], prompt=prompt, output=output, prompt_cv=0,
                   output_cv=0, offline=1, max_batch=bs * ep, max_num_tokens=tok, chunk=0, kv_block=e["kv_block"],
                   mem_fraction=TRTLLM_TABLE_MEM_FRACTION, metric="throughput_tok_s", value=r["output_tok_s"],
                   engine="trtllm", source=source,
                   note=f"trtllm-bench heuristic: max_batch_size {bs}, max_num_tokens {tok} per rank")


def static_batch_table(path, source="trtllm-v0.9-static"):
    """TensorRT-LLM v0.9.0's performance page: static batches of fixed
    lengths (gptSessionBenchmark: the batch is prefilled, then decodes to the
    end together; no scheduler, no KV paging). Throughput rows are output
    tokens/s per GPU (times tp: the deployment's), first-token rows the
    latency of one prompt at batch 1 with one output token (ms)."""
    for r in csv.DictReader(open(path)):
        tp = int(r["tp"])
        thr = r["metric"] == "throughput"
        value = float(r["value"]) * tp if thr else float(r["value"]) / 1000.0
        yield _row(model=r["model"], hardware=r["gpu"], tp=tp, pp=1, ep=1, moe_ep=1, moe_gather=0, dp=1,
                   microbatches=1, dtype=r["dtype"], prompt=int(r["isl"]), output=int(r["osl"]), prompt_cv=0,
                   output_cv=0, batch=int(r["batch"]), metric="throughput_tok_s" if thr else "ttft_s",
                   value=f"{value:.6g}", engine="trtllm-0.9", source=source,
                   note="static batch (gptSessionBenchmark), assumed from the page's commands")


def _hardware(text):
    for key, name in HARDWARE:
        if key in text:
            return name
    raise ValueError(f"unmapped hardware {text!r}")


def _engine(framework):
    f = framework.lower()
    return "trtllm" if "tensorrt" in f else "sglang" if "sglang" in f else "vllm" if "vllm" in f else "other"


def _on_rocm(engine, hw):
    """An engine run on an AMD chip runs AMD's kernel libraries (ROCm:
    hipBLASLt, Composable Kernel) where NVIDIA's chips run CUDA's, a stack
    of its own: its name gains the part 'rocm' ('vllm-0.7+rocm'), so a
    calibration can give those kernels values of their own (`--engines rocm`)
    that compose with the release's."""
    return f"{engine}+rocm" if hw.startswith("mi") else engine


def _mlperf_engine(engine, hw):
    """An MLPerf submission's engine: the submitters' tuned harnesses, the
    reference the global values describe, on the chip's own kernels. AMD's
    run AMD's ROCm builds of vLLM (0.4.3+rocm614 in v4.1, 0.6.5+mlperf50 in
    v5.0): engine 'rocm'."""
    return "rocm" if engine == "vllm" and hw.startswith("mi") else engine


def _release(engine, framework):
    """The engine and its minor release, e.g. 'vllm-0.7' (the dstack runs:
    releases of February-March 2025, weeks after DeepSeek-R1 came out)."""
    release = re.search(r"(?:TensorRT-LLM|vLLM|SGLang) (\d+\.\d+)", framework).group(1)
    return f"{engine}-{release}"


def mlperf_dstack(path, skipped):
    """MLPerf v4.0-v5.0 Offline/Server/Interactive and the dstack DeepSeek-R1 sweep."""
    for i, r in enumerate(csv.DictReader(open(path)), start=2):
        metric = METRICS.get(r["metric"])
        model, hw = MODELS[r["model"]], _hardware(r["hardware"])
        scenario = r["scenario"]
        kind = "Offline" if "Offline" in scenario else "Server" if ("Server" in scenario or "Interactive" in scenario) \
            else "closed"
        if metric is None:
            continue  # p99 rows: the schema holds means
        if metric == "throughput_tok_s" and kind == "Server":
            continue  # rate x mean output by construction: no test of the model
        engine = _engine(r["framework"])
        notes = []
        if kind == "closed":  # dstack: fixed 3200/800, closed loop
            prompt, output, pcv, ocv = 3200, 800, 0, 0
            n = int(re.search(r"max_concurrency (\d+)", r["batch_or_concurrency"]).group(1))
            load = dict(concurrency=n)
        else:
            ds = DATASETS[model]
            prompt, output, pcv, ocv = ds["prompt"], ds["output"], ds["prompt_cv"], ds["output_cv"]
            notes.append(ds["note"])
            if kind == "Offline":
                load = dict(offline=1)
            else:
                load = dict(rate=float(re.search(r"target_qps=([\d.]+)", r["batch_or_concurrency"]).group(1)))
        try:
            tp, pp = int(r["tp"]), int(r["pp"] or 1)
        except ValueError:
            key = (model, hw, kind)
            if key not in ASSUMED_PARALLEL:
                skipped.append(f"row {i}: parallelism unknown ({r['tp']!r})")
                continue
            tp, pp = ASSUMED_PARALLEL[key]
            notes.append(f"parallelism assumed TP{tp}xPP{pp}")
        ep, moe_ep, gather = 1, 1, 0
        if "dp-attention" in r["ep"]:
            tp, ep = 1, 8  # SGLang DP attention: attention data parallel over 8, experts over the 8 chips
            gather = 1  # its MoE gathers every rank's tokens and reduce-scatters the outputs (no DeepEP flag)
            notes.append("SGLang DP attention as ep=8 (attention data parallel, experts over 8 chips, "
                         "tokens all-gathered)")
        elif r["ep"].strip():
            moe_ep = int(r["ep"].split()[0])
        chips = int(r["num_chips"])
        dp = max(chips // (tp * pp * ep), 1)
        max_batch = re.search(r"max batch (\d+)", r["batch_or_concurrency"])
        mb = None
        if max_batch and kind != "closed":
            per = re.search(r"max batch (\d+) \(Offline\) / (\d+) \(Server\)", r["batch_or_concurrency"])
            mb = int(per.group(1) if kind == "Offline" else per.group(2)) if per else int(max_batch.group(1))
        if kind == "closed":
            dtype = DSTACK_DTYPE
            notes.append("KV cache bf16 (no --kv-cache-dtype among the launch flags: 'auto' = bf16)")
        elif "FP4" in r["precision"]:
            dtype = "fp4/fp4/fp8"
        else:
            dtype = "fp8"
        e = dict(ENGINES.get(engine, ENGINES["vllm"]))
        stated = re.search(r"max_num_tokens (\d+)", r["framework"])  # a launch flag the source states wins
        if stated:
            e["max_num_tokens"] = int(stated.group(1))
        stated = re.search(r"max_batch (\d+)", r["framework"])
        if stated and kind == "closed":
            mb = int(stated.group(1))
        if kind == "closed" and engine == "vllm":
            stated = re.search(r"--max-model-len (\d+)", r["framework"])
            e["max_num_tokens"] = max(int(stated.group(1)) if stated else DEEPSEEK_R1_MAX_MODEL_LEN, 2048)
            notes.append(f"vLLM iteration budget = max_model_len {e['max_num_tokens']} (chunked prefill off)")
        value = float(r["value"]) / (1000.0 if r["unit"] == "ms" else 1.0)
        if moe_ep > 1 and "moe_ep" not in Parallel.__dataclass_fields__:
            skipped.append(f"row {i}: moe_ep={moe_ep} needs Parallel.moe_ep")
            continue
        if hw not in builtin_names("hardware"):
            skipped.append(f"row {i}: no built-in chip {hw!r}")
            continue
        # Scheduler of the dstack runs (their launch flags): vLLM 0.7 turns
        # chunked prefill off for MLA models (vllm-project/vllm PR #12642,
        # vllm/config.py of v0.7.3), and its V0 scheduler then runs waiting
        # prefills before decodes; SGLang runs prefill and decode batches
        # apart (--enable-mixed-chunk not given, off by default). TensorRT-LLM
        # batches context and generation requests in one iteration (in-flight
        # batching).
        prefill_first = int(kind == "closed" and engine in ("vllm", "sglang"))
        src = "dstack" if kind == "closed" else re.search(r"(v\d\.\d)", scenario).group(1)
        yield _row(model=model, hardware=hw, tp=tp, pp=pp, ep=ep, moe_ep=moe_ep, moe_gather=gather, dp=dp,
                   microbatches=pp, dtype=dtype, prompt=prompt, output=output, prompt_cv=pcv, output_cv=ocv,
                   max_batch=mb, max_num_tokens=e["max_num_tokens"], chunk=e["chunk"], kv_block=e["kv_block"],
                   mem_fraction=0.9, prefill_first=prefill_first, metric=metric, value=f"{value:.6g}",
                   engine=(_on_rocm(_release(engine, r["framework"]), hw) if kind == "closed" else
                           _mlperf_engine(engine, hw)),
                   source=("mlperf-" + src) if src != "dstack" else "dstack-deepseek-r1",
                   note="; ".join(notes), **load)


def main():
    skipped = []
    rows = list(trtllm_table(HERE / "trtllm_offline_throughput.csv"))
    rows += list(mlperf_dstack(HERE / "mlperf_v4.0-v5.0_and_dstack.csv", skipped))
    _write(OUT, rows)
    print(f"wrote {len(rows)} rows to {OUT.relative_to(ROOT)}; left out {len(skipped)}:", file=sys.stderr)
    for s in skipped:
        print(f"  {s}", file=sys.stderr)
    held = list(trtllm_table(HERE / "trtllm_perf_overview_heldout.csv", source="trtllm-perf-overview-heldout"))
    held += list(trtllm_table(HERE / "trtllm_perf_overview_moe.csv", source="trtllm-perf-overview-moe"))
    held += list(static_batch_table(HERE / "trtllm_v0.9_static_batch.csv"))
    _write(HELDOUT, held)
    print(f"wrote {len(held)} held-out rows to {HELDOUT.relative_to(ROOT)}", file=sys.stderr)


def _write(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, COLUMNS)
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    main()
