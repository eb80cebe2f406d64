"""GenZ 0.0.16 (PyPI genz-llm) platform requirements of the paper's models and use cases, as GenZ's
"Paper charts/Sec 7. Platform Requirements" computes them, from its model-profiling summaries
(tensor_parallel = pipeline_parallel = 1). Run with the genz-llm venv's Python; prints CSV."""
import csv
import sys
import warnings

warnings.filterwarnings("ignore")
from GenZ import decode_moddeling, prefill_moddeling  # noqa: E402

MODELS = {"llama-2-7b": "meta-llama/Llama-2-7B", "mixtral-8x7b": "mistralai/Mixtral-8x7B",
          "llama-3.1-70b": "meta-llama/Llama-3.1-70B", "gpt-3-175b": "gpt-3", "gpt-4-1.8t": "gpt-4"}
# GenZ's use cases (variables.py): batch, beams, input, output, TTFT (s), TPOT (s)
USECASES = {"qa": (1, 4, 1000, 200, 0.2, 0.01), "chatbot": (1, 2, 3000, 1000, 0.2, 0.01),
            "qa-rag": (1, 4, 10000, 200, 0.4, 0.01), "summarization": (1, 4, 15000, 1000, 2.0, 0.02),
            "code-generation": (1, 4, 20000, 50, 5.0, 0.02)}
MIB = 2.0**20
w = csv.writer(sys.stdout)
w.writerow(["model", "workload", "dtype", "weights_mib", "unused_weights_mib", "kv_mib", "prefill_mmacs",
            "mem_bytes", "decode_mem_bw_bytes_s", "prefill_flops_s"])
for dtype in ("bf16", "int8"):
    for ours, genz in MODELS.items():
        for uc, (b, bb, inp, out, ttft, tpot) in USECASES.items():
            _, d = decode_moddeling(model=genz, batch_size=b, Bb=bb, input_tokens=inp, output_tokens=out,
                                    model_profilling=True, tensor_parallel=1, pipeline_parallel=1, bits=dtype)
            _, p = prefill_moddeling(model=genz, batch_size=b, input_tokens=inp, model_profilling=True,
                                     tensor_parallel=1, pipeline_parallel=1, bits=dtype)
            weights, unused, kv = (float(d[k].values[0]) for k in
                                   ("Total Weights (MB)", "Unused Weights (MB)", "KV Cache (MB)"))
            macs = float(p["MACs (MFLOP)"].values[0])  # model-profiling mode: multiply-adds / 1e6
            w.writerow([ours, uc, dtype, repr(weights), repr(unused), repr(kv), repr(macs),
                        repr((weights + kv) * MIB), repr((weights + kv - unused) * MIB / tpot),
                        repr(2.0 * macs * 1e6 / ttft)])
