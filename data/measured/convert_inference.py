"""Rows of inference_2026-12.csv (issue 37) in the schema `jaxplat calibrate`
reads (README.md, "Calibration rows"), by split role (inference_split.yaml).

    python data/measured/convert_inference.py      # from the repository root

writes calibration_rows_2026-12.csv: every row of calibration_rows.csv (the
shipped fit's input) followed by the `fit` rows of inference_2026-12.csv that
the calibration machinery can express. `inference_rows(role)` gives the
validation and test rows the same way (experiments/calibration_check.py
predicts them; they are never written next to the fit rows).

What each kind of row becomes (each assumption lands in the row's `note`):
- ANL LLM-Inference-Bench static batches: load `batch` (B requests of ISL
  prompt and OSL output tokens, one replica), metric throughput_tok_s =
  B * OSL / e2e_batch_latency_s (cost.inference: throughput = batch x output /
  e2e, so its error is the e2e latency's, inverted); `total_tok_s` rows are the
  same measurement and are not counted twice. fp16 runs as bf16 (same width
  and peak); tp = the row's tp, or its chips where the CSV names none
  (DeepSpeed-MII: tensor parallel over its GPUs). Engines, named by the
  campaign since the CSV gives no H100 release: anl-vllm, anl-trtllm,
  anl-deepspeed-mii, and anl-vllm-rocm for the MI300X's vLLM 0.6.1 ROCm build
  (a row on an AMD chip also takes the part `rocm`, as every AMD row does).
- tt-inference-server closed-loop sweeps: load `concurrency`, ttft_ms and
  tpot_ms_mean as ttft_s / tpot_s (the throughput columns' definitions are not
  in the source's excerpt: left out); bf16 assumed (precision not stated);
  vLLM defaults (KV block 16, an 8192-token iteration budget, as convert.py).
- Kernel rows are not rows of a deployment: experiments/kernel_check.py
  predicts them one operator at a time.
Models and chips without a spec in the repository are skipped (listed on
stderr): DeciLM-7B and five single-row 7B models of the ANL table;
Llama-3.2-90B-Vision of the closed-loop sweeps. Three configs came after the
2026-12-04 refit (data/hf_configs: Qwen2-7B, Mistral-7B-v0.1, Qwen3-1.7B):
their validation and test rows were first predicted on 2026-12-05, and
calibration_rows_2026-12.csv, the refit's input, is kept as it was: run
again, this script adds Mistral-7B's 118 fit rows (H100, MI300X) to it.
"""

import csv
import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))
from jaxplat.design.splits import load_inference_split

SHIPPED_ROWS = HERE / "calibration_rows.csv"
OUT = HERE / "calibration_rows_2026-12.csv"
# Models of the CSV -> specs (experiments/static_batch_check.py reads this map too: Llama-3-8B/70B have
# Llama-3.1's dimensions, Qwen2-72B Qwen2.5-72B's architecture, huggyllama LLaMA-1 7B Llama-2-7B's).
MODELS = {
    "meta-llama/Llama-2-7b-hf": "llama-2-7b",
    "meta-llama/Llama-2-70b-hf": "llama-2-70b",
    "meta-llama/Meta-Llama-3-8B": "llama-3.1-8b",
    "meta-llama/Meta-Llama-3-70B": "llama-3.1-70b",
    "mistralai/Mixtral-8x7B-v0.1": "mixtral-8x7b",
    "Qwen/Qwen2-72B": "data/hf_configs/qwen2.5-72b.json",
    "huggyllama/llama-7b": "llama-2-7b",
    "Qwen2.5-72B-Instruct": "data/hf_configs/qwen2.5-72b.json",
    "Qwen3-1.7B": "data/hf_configs/qwen3-1.7b.json",
    "Qwen/Qwen2-7B": "data/hf_configs/qwen2-7b.json",
    "mistralai/Mistral-7B-v0.1": "data/hf_configs/mistral-7b-v0.1.json",
}
# Chips: the A100 as ALCF Polaris's A100 SXM4 40GB (ANL ran LLM-Inference-Bench on Polaris; datasheet-only spec).
CHIPS = {"H100": "h100-sxm", "MI300X": "mi300x", "A100": "experiments/specs/a100-40gb-polaris.yaml"}
ENGINES = {("vLLM", "MI300X"): "anl-vllm-rocm", "vLLM": "anl-vllm", "TensorRT-LLM": "anl-trtllm",
           "DeepSpeed-MII": "anl-deepspeed-mii", "vLLM (GPU reference)": "vllm"}
COLUMNS = ["model", "hardware", "tp", "pp", "ep", "moe_ep", "moe_gather", "dp", "microbatches", "dtype", "prompt",
           "output", "prompt_cv", "output_cv", "batch", "concurrency", "rate", "offline", "max_batch", "max_num_tokens",
           "chunk", "kv_block", "mem_fraction", "prefill_first", "metric", "value", "engine", "source", "note"]
CLOSED_LOOP_METRICS = {"ttft_ms": "ttft_s", "tpot_ms_mean": "tpot_s"}


def _row(r, line, metric, value, load, note):
    engine = ENGINES.get((r["engine"], r["chip"]), ENGINES.get(r["engine"], r["engine"]))
    out = dict.fromkeys(COLUMNS, "")
    out.update(model=MODELS[r["model"]], hardware=CHIPS[r["chip"]], tp=r["tp"] or r["chips"], pp=1, ep=1, moe_ep=1,
               dp=1, dtype="bf16", prompt=r["isl"], output=r["osl"], metric=metric, value=f"{value:.6g}",
               engine=engine, source="anl-llm-inference-bench" if load == "batch" else "tt-inference-server",
               note=f"inference_2026-12.csv line {line}: {note}")
    out[load] = r["concurrency_or_batch"]
    if load == "concurrency":
        out.update(kv_block=16, max_num_tokens=8192)
    return out


def inference_rows(role: str, skipped: Counter | None = None) -> list[dict]:
    """Calibration-schema rows (dicts of COLUMNS) of the inference CSV's rows of split `role`
    (fit, validation or test) that a spec in the repository can express (module docstring)."""
    rows, roles = load_inference_split()
    out = []
    for line, (r, ro) in enumerate(zip(rows, roles), start=2):
        if ro != role or r["load_kind"] == "kernel":
            continue
        kind = r["load_kind"]
        usable = (kind == "static_batch" and r["metric"] == "e2e_batch_latency_s") or \
                 (kind == "closed_loop" and r["metric"] in CLOSED_LOOP_METRICS)
        if not usable:
            continue
        if r["model"] not in MODELS or r["chip"] not in CHIPS:
            if skipped is not None:
                skipped[(r["model"], r["chip"], role)] += 1
            continue
        value = float(r["value"])
        if kind == "static_batch":
            thr = int(r["concurrency_or_batch"]) * int(r["osl"]) / value
            out.append(_row(r, line, "throughput_tok_s", thr, "batch",
                            f"e2e_batch_latency_s {value:.6g} s as B*OSL/e2e; fp16 as bf16"
                            + ("" if r["tp"] else "; tp = chips (not stated)")))
        else:
            out.append(_row(r, line, CLOSED_LOOP_METRICS[r["metric"]], value / 1e3, "concurrency",
                            f"{r['metric']} {value:g} ms; bf16 assumed; vLLM defaults (kv_block 16, 8192 tokens)"))
    return out


def main():
    skipped = Counter()
    new = inference_rows("fit", skipped)
    with open(SHIPPED_ROWS, newline="") as f:
        shipped = list(csv.DictReader(f))
    with open(OUT, "w", newline="") as f:
        w = csv.DictWriter(f, COLUMNS)
        w.writeheader()
        w.writerows([{c: r.get(c, "") for c in COLUMNS} for r in shipped] + new)
    for (model, chip, role), n in sorted(skipped.items()):
        print(f"skipped (no spec): {model} on {chip} [{role}] x{n}", file=sys.stderr)
    print(f"{OUT.name}: {len(shipped)} rows of {SHIPPED_ROWS.name} + {len(new)} fit rows of inference_2026-12.csv")


if __name__ == "__main__":
    main()
