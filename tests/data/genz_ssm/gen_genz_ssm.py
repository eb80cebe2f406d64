"""GenZ 0.0.16 (PyPI genz-llm) reference numbers for Falcon-Mamba-7B on GenZ's
H100_GPU preset, bf16: prefill and decode latency (ms), weights and KV (MiB)."""
import csv
import sys
import warnings

warnings.filterwarnings("ignore")
from GenZ import decode_moddeling, prefill_moddeling

w = csv.writer(sys.stdout)
w.writerow(["model", "batch", "beams", "tp", "prompt", "output", "prefill_ms", "decode_ms", "decode_weights_mib", "decode_kv_mib"])
for tp in (1, 2):
    for batch, beams in ((1, 1), (8, 2)):
        for prompt in (1024, 4096, 16384, 65536, 131072):
            out = 256
            p = prefill_moddeling(model="tiiuae/falcon-mamba-7b", batch_size=batch, input_tokens=prompt,
                                  system_name="H100_GPU", bits="bf16", tensor_parallel=tp)
            d = decode_moddeling(model="tiiuae/falcon-mamba-7b", batch_size=batch, Bb=beams, input_tokens=prompt,
                                 output_tokens=out, system_name="H100_GPU", bits="bf16", tensor_parallel=tp)
            s = d["summary_table"]
            w.writerow(["falcon-mamba-7b", batch, beams, tp, prompt, out, repr(float(p["Latency"])), repr(float(d["Latency"])),
                        repr(float(s["Total Weights (MB)"].values[0])), repr(float(s["KV Cache (MB)"].values[0]))])
