"""How long a co-design study takes the first time and when it is run
again: `jaxplat codesign` keeps its compiled programs in the persistent
compilation cache (`--cache-dir`, as `sweep` does), so running the same
study again (into another --out, say) reads them back instead of compiling
them.

Runs the command in fresh processes against a fresh cache folder, cold then
warm, and prints each run's wall and CPU seconds (the process and its
children; on a shared machine wall time counts other processes' time, the
CPU seconds do not).

    .venv/bin/python experiments/codesign_rerun.py [--study codesign-llama70b-chatbot] [--runs 2]
"""

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--study", default="codesign-llama70b-chatbot", help="built-in name or YAML path")
    ap.add_argument("--runs", type=int, default=2, help="runs against the same cache: the first is cold")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cache = os.path.join(tmp, "cache")
        for i in range(args.runs):
            cmd = [sys.executable, "-m", "jaxplat.cli", "codesign", args.study, "--out", os.path.join(tmp, f"out{i}"),
                   "--no-progress", "--cache-dir", cache]
            t, c = time.perf_counter(), _cpu()
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            kept = len(os.listdir(cache))
            print(f"run {i + 1} ({'cold' if i == 0 else 'warm'}): {time.perf_counter() - t:.1f} s wall, "
                  f"{_cpu() - c:.1f} s CPU; {kept} entries in the cache; load average {os.getloadavg()[0]:.1f} on "
                  f"{os.cpu_count()} cores", flush=True)


if __name__ == "__main__":
    main()
