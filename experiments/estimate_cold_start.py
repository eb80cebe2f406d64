"""Where the time of one `jaxplat estimate` goes, cold and warm.

Runs one configuration's estimate in fresh processes against a fresh cache
directory, first cold (nothing cached: the cost model is traced and
XLA-compiled, and the executable saved), then warm (the same shape again:
the executable is read back), each part timed inside the process (wall and
CPU seconds):

  import   python's own start is not in it: import jax and the command
  specs    read the model, hardware and workload specs
  key      the cache key (hash of the code, shapes, options)
  build    trace and compile the one call, and save it (cold only)
  load     read the compiled call back (warm only)
  run      run it and fetch the arrays
  report   format the text report (the tables the command prints)

then the whole command (`python -m jaxplat estimate`, --json and text), cold
and warm, as a user runs it, and the floor under it: `python -c "import
jaxplat"`. On a shared machine wall time counts other processes' time; the
CPU seconds do not (the load average is printed).

Usage: .venv/bin/python experiments/estimate_cold_start.py [--model llama-3.1-70b] [--hardware h100-sxm] [--tp 8]
"""

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))


def _clock():
    return time.perf_counter(), time.process_time()


def phases(args, cache):
    """One text-mode estimate, each part timed (runs in a child process)."""
    out, t = {}, _clock()

    def lap(name):
        nonlocal t
        now = _clock()
        out[name] = (now[0] - t[0], now[1] - t[1])
        t = _clock()

    import jax

    from jaxplat.cli import compiled
    from jaxplat.cli.estimate import estimate_arrays
    from jaxplat.cost import breakdown_rows, comm_rows
    from jaxplat.model import Options, Parallel, load_hardware, load_model, load_workload
    from jaxplat.report import format_comm_breakdown, operator_table
    lap("import")
    model, hw, wl = load_model(args.model), load_hardware(args.hardware), load_workload(args.workload)
    par, opts = Parallel(tp=args.tp), Options()
    lap("specs")
    call_args, static = (model, hw, par, wl, None), (opts, None, True)
    path = compiled.program_path(compiled.cache_dir(cache), "estimate", call_args, static)
    lap("key")
    program = compiled.load(path)
    if program is None:
        program, needs = compiled.build(estimate_arrays, call_args, static)
        compiled.save(path, program, needs)
        lap("build")
    else:
        lap("load")
    res = jax.device_get(program(*call_args))
    lap("run")
    tables = {ph: t for ph, (t, _) in res["operators"].items()}
    format_comm_breakdown(comm_rows(tables, res["comm"], opts), ["level"] * 3)
    for ph in ("prefill", "decode"):
        operator_table(breakdown_rows(*res["operators"][ph]), ph)
    lap("report")
    return out


def _child_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(cmd, env):
    """Wall and CPU seconds of a command in a fresh process."""
    c0, t0 = _child_cpu(), time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0, _child_cpu() - c0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="llama-3.1-70b")
    ap.add_argument("--hardware", default="h100-sxm")
    ap.add_argument("--workload", default="chatbot")
    ap.add_argument("--tp", type=int, default=8)
    ap.add_argument("--child", help=argparse.SUPPRESS)  # cache dir of a timed child run
    args = ap.parse_args()
    if args.child:
        for name, (wall, cpu) in phases(args, args.child).items():
            print(f"{name} {wall} {cpu}")
        return
    print(f"{args.model} on {args.hardware} x{args.tp}, {args.workload}; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    same = ["--model", args.model, "--hardware", args.hardware, "--workload", args.workload, "--tp", str(args.tp)]
    with tempfile.TemporaryDirectory(prefix="jaxplat-estimate-") as cache:
        for label in ("cold", "warm"):
            out = subprocess.run([sys.executable, __file__, "--child", cache, *same], capture_output=True, text=True,
                                 check=True, env=ENV)
            rows = [line.split() for line in out.stdout.splitlines()]
            parts = ", ".join(f"{n} {float(w):.2f} s ({float(c):.2f} s CPU)" for n, w, c in rows)
            total_w, total_c = sum(float(r[1]) for r in rows), sum(float(r[2]) for r in rows)
            print(f"in-process, {label}: {parts}; in all {total_w:.2f} s ({total_c:.2f} s CPU)")
    wall, cpu = timed([sys.executable, "-c", "import jaxplat"], ENV)
    print(f"python -c 'import jaxplat' (the floor): {wall:.2f} s wall, {cpu:.2f} s CPU")
    for extra, label in ((["--json"], "--json"), ([], "text")):
        with tempfile.TemporaryDirectory(prefix="jaxplat-estimate-") as cache:
            for state in ("cold", "warm"):
                wall, cpu = timed([sys.executable, "-m", "jaxplat", "estimate", *same, *extra],
                                  dict(ENV, JAXPLAT_CACHE_DIR=cache))
                print(f"python -m jaxplat estimate {label}, {state}: {wall:.2f} s wall, {cpu:.2f} s CPU")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
