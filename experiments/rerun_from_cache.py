"""How long a `jaxplat` command takes the first time and when it is run
again: `codesign`, `requirements` and `sweep` keep their compiled programs
in the persistent compilation cache (`--cache-dir`), so running the same
command again (a co-design into another --out, say) reads them back instead
of compiling them.

Runs the command in fresh processes against a fresh cache folder, cold then
warm, and prints each run's wall and CPU seconds (the process and its
children; on a shared machine wall time counts other processes' time, the
CPU seconds do not). The command's words follow the options; a codesign or
sweep without --out writes each run into a temporary folder.

    .venv/bin/python experiments/rerun_from_cache.py [--runs 2] [COMMAND ...]
    .venv/bin/python experiments/rerun_from_cache.py codesign codesign-llama70b-chatbot --no-progress   # the default
    .venv/bin/python experiments/rerun_from_cache.py requirements --model llama-3.1-70b --workload chatbot
"""

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time

DEFAULT = ["codesign", "codesign-llama70b-chatbot", "--no-progress"]


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=2, help="runs against the same cache: the first is cold")
    ap.add_argument("command", nargs=argparse.REMAINDER, help=f"the jaxplat command (default: {' '.join(DEFAULT)})")
    args = ap.parse_args()
    words = args.command or DEFAULT
    with tempfile.TemporaryDirectory() as tmp:
        cache = os.path.join(tmp, "cache")
        print(f"jaxplat {' '.join(words)}", flush=True)
        for i in range(args.runs):
            writes = words[0] in ("codesign", "sweep") and "--out" not in words
            out = ["--out", os.path.join(tmp, f"out{i}")] if writes else []
            cmd = [sys.executable, "-m", "jaxplat.cli", *words, *out, "--cache-dir", cache]
            t, c = time.perf_counter(), _cpu()
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            kept = len(os.listdir(cache))
            print(f"run {i + 1} ({'cold' if i == 0 else 'warm'}): {time.perf_counter() - t:.1f} s wall, "
                  f"{_cpu() - c:.1f} s CPU; {kept} entries in the cache; load average {os.getloadavg()[0]:.1f} on "
                  f"{os.cpu_count()} cores", flush=True)


if __name__ == "__main__":
    main()
