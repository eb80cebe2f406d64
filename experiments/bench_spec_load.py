"""How long building a configuration's specs takes once their files are
parsed (jaxplat.specs keeps each parsed text): a chip, a model, a workload
and a `Parallel`, as the calibration checks and the training runs build one
per measured row. Prints the mean milliseconds of CPU time per set.

Usage: .venv/bin/python experiments/bench_spec_load.py [--repeats 200]
"""

import argparse
import time

import jaxplat as jp


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=200)
    ap.add_argument("--model", default="llama-3.1-70b")
    ap.add_argument("--hardware", default="h100-sxm")
    ap.add_argument("--workload", default="chatbot")
    args = ap.parse_args()

    def one_set():
        jp.load_hardware(args.hardware), jp.load_model(args.model), jp.load_workload(args.workload)
        jp.Parallel(tp=2)
    one_set()  # parses the files and compiles the conversions once
    t = time.process_time()
    for _ in range(args.repeats):
        one_set()
    ms = (time.process_time() - t) / args.repeats * 1e3
    print(f"{args.hardware} + {args.model} + {args.workload} + Parallel: {ms:.2f} ms of CPU per set "
          f"(mean of {args.repeats})")


if __name__ == "__main__":
    main()
