"""`jaxplat sweep STUDY.yaml --out DIR`: evaluate a whole study on every device.

Writes into DIR: top_k.{parquet,csv}, pareto.{parquet,csv}, axes.{parquet,csv}
(per-axis-value counts and best objective), histogram.csv, summary.json,
pareto.png, and state.npz (the resumable state, rewritten after every step).
On several hosts, every process runs the same command with the coordinator
address, the process count and its id (flags or JAXPLAT_COORDINATOR,
JAXPLAT_NUM_PROCESSES, JAXPLAT_PROCESS_ID); process 0 writes the files.
"""

import math
import os
import sys
import time
from pathlib import Path

from jaxplat.cli.cache_args import add_cache_arguments, use_cache
from jaxplat.cli.calibration_args import add_calibration_arguments
from jaxplat.cli.slo_args import add_slo_arguments, slo_flags
from jaxplat.specs import SpecError, read_yaml, resolve


def register(sub):
    p = sub.add_parser("sweep", help="evaluate every configuration of a study",
                       description="Sweep a study (specs/studies/*.yaml) on all devices: top-k, Pareto front, "
                                   "feasible counts and per-axis summaries.")
    p.add_argument("study", help="study YAML file (or a built-in name from specs/studies)")
    p.add_argument("--out", required=True, help="output directory (created; resumed if it holds a state)")
    p.add_argument("--restart", action="store_true", help="discard a saved state in --out and start over")
    p.add_argument("--block", type=int, help="configurations per block (overrides engine.block)")
    p.add_argument("--blocks-per-step", type=int, help="blocks per device per step (overrides engine.blocks_per_step)")
    p.add_argument("--fast-compile", action="store_true",
                   help="CPU: compile about 25%% faster, run about 20%% slower (for short studies; "
                        "engine.fast_compile in the study)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_slo_arguments(p, "the study's constraints (default there: each workload's slo)")
    add_calibration_arguments(p)
    p.add_argument("--devices", type=int, help="on CPU, split the sweep over this many host devices "
                                              "(default: one per core; on one process only)")
    add_cache_arguments(p, "a rerun or resume skips the compile")
    p.add_argument("--coordinator", default=os.environ.get("JAXPLAT_COORDINATOR"),
                   help="host:port of process 0, for a multi-host sweep (env JAXPLAT_COORDINATOR)")
    p.add_argument("--num-processes", type=int, default=_env_int("JAXPLAT_NUM_PROCESSES"),
                   help="processes in a multi-host sweep (env JAXPLAT_NUM_PROCESSES)")
    p.add_argument("--process-id", type=int, default=_env_int("JAXPLAT_PROCESS_ID"),
                   help="this process's id, 0 .. num-processes - 1 (env JAXPLAT_PROCESS_ID)")
    p.add_argument("--distributed", action="store_true",
                   help="call jax.distributed.initialize() with no arguments (SLURM, Cloud TPU, ... detect them)")
    p.set_defaults(func=run)


def _env_int(name):
    v = os.environ.get(name)
    return int(v) if v not in (None, "") else None


def init_distributed(coordinator=None, num_processes=None, process_id=None, auto=False) -> bool:
    """Join a multi-process JAX job if asked to; True if one was joined.

    Must run before anything else touches JAX devices. On CPU the
    cross-process collectives go through gloo.
    """
    if not (coordinator or auto):
        return False
    import jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    if auto:
        jax.distributed.initialize()
    else:
        if num_processes is None or process_id is None:
            raise SpecError("--coordinator needs --num-processes and --process-id")
        jax.distributed.initialize(coordinator_address=coordinator, num_processes=num_processes,
                                   process_id=process_id)
    return True


def run(args) -> int:
    from jaxplat import search

    distributed = bool(args.coordinator or args.distributed)
    if args.devices is not None and args.devices < 1:
        raise SpecError(f"--devices must be positive, got {args.devices}")
    if args.devices is not None or not distributed:  # one process: a host device per core
        search.split_cpu_devices(args.devices)
    init_distributed(args.coordinator, args.num_processes, args.process_id, args.distributed)
    import jax

    from jaxplat.search import study_from_dict

    slos = slo_flags(args)
    use_cache(args)
    from jaxplat.model import select_engine
    path = resolve("studies", args.study)
    d = read_yaml(path)
    if slos and isinstance(d.get("constraints", {}) or {}, dict):  # the flags replace the study's constraints
        d["constraints"] = {**(d.get("constraints") or {}), **{k: v if v is not None else "none"
                                                              for k, v in slos.items()}}
    study = study_from_dict(d, str(path), *select_engine(args.calibration, args.engine))
    for flag in ("block", "blocks_per_step"):
        v = getattr(args, flag)
        if v is not None and v < 1:
            raise SpecError(f"--{flag.replace('_', '-')} must be positive, got {v}")
    out = Path(args.out)
    lead = jax.process_index() == 0
    if lead:
        if args.restart and (out / search.STATE_FILE).exists():
            (out / search.STATE_FILE).unlink()
        out.mkdir(parents=True, exist_ok=True)
    engine = search.Engine(study, block=args.block, blocks_per_step=args.blocks_per_step,
                           fast_compile=True if args.fast_compile else None)
    if lead:
        g = engine.grid
        side = "hardware" if study.inner else "grid: " + ", ".join(a.name for a in engine.st.inner)
        print(f"study {study.name}: {study.size:,} configurations ({g.n_outer:,} outer x {g.n_inner:,} {side}), "
              f"{g.n_blocks:,} blocks of {g.co} x {g.ci} on {engine.n_dev} device(s) in "
              f"{jax.process_count()} process(es)", file=sys.stderr)
        print(constraints_text(study, slos), file=sys.stderr)
    compile_s = engine.compile()
    # Seconds to pause after each step: only to let tests interrupt a sweep midway.
    pause = float(os.environ.get("JAXPLAT_SWEEP_STEP_PAUSE", "0") or 0)
    on_step = (lambda _: time.sleep(pause)) if pause > 0 else None
    say = (lambda line: print(line, file=sys.stderr)) if lead else None
    result = search.run(engine, out / search.STATE_FILE, progress=lead and not args.no_progress, on_step=on_step,
                        say=say)
    if lead:
        tables = write_outputs(engine, result, out, compile_s)
        print(summary_text(engine, result, tables, compile_s))
    return 0


# ----------------------------------------------------------------- outputs

_UNIT_SUFFIX = {"s": "_s", "tok/s": "_tok_s", "tok/s/chip": "_tok_s", "B": "", "chips": "", "": "",
                "USD/Mtok": "", "J/tok": ""}


def metric_columns(names) -> list[str]:
    """Column names with their SI unit, e.g. tpot -> tpot_s."""
    from jaxplat.search import METRICS

    return [n if n.endswith(s := _UNIT_SUFFIX.get(METRICS[n][2], "")) else n + s for n in names]  # step_time_s


def result_frames(engine, result) -> dict:
    """pandas DataFrames of a result: top_k, pareto, axes, histogram."""
    import numpy as np
    import pandas as pd

    st = engine.study
    cols = metric_columns(engine.metrics)

    def configs(index, vals):
        df = pd.DataFrame({"index": np.asarray(index, np.int64)})
        for name, v in st.decode(index).items():
            df[name] = v
        for c, v in zip(cols, np.asarray(vals, np.float64).reshape(len(df), len(cols)).T):
            df[c] = v
        if getattr(st, "task", "infer") == "train":  # named by `jaxplat train`'s flags
            from jaxplat.search.train_study import flag_frame
            df = flag_frame(st, df)
        return df

    top = configs(result.top["index"], result.top["vals"])
    top.insert(0, "rank", np.arange(1, len(top) + 1))
    front = configs(result.front["index"], result.front["vals"])
    sign = 1.0 if st.maximize else -1.0
    group = st.outer[st.group_by] if st.group_by >= 0 else None
    rows = []
    for g in range(st.n_groups):
        off = 0
        for a in st.axes:
            for j in range(len(a)):
                best = float(result.ax_best[g, off + j])
                rows.append(dict(group=str(group.label(g)) if group else "", axis=a.name, value=str(a.label(j)),
                                 n_feasible=int(result.ax_feas[g, off + j]), n_ok=int(result.ax_ok[g, off + j]),
                                 **{f"best_{st.objective}": sign * best if np.isfinite(best) else np.nan}))
            off += len(a)
    axes = pd.DataFrame(rows, columns=["group", "axis", "value", "n_feasible", "n_ok", f"best_{st.objective}"])
    lo, hi = st.histogram_range
    edges = np.geomspace(lo, hi, st.histogram_bins + 1)
    hist = pd.DataFrame(dict(bin_lo=np.concatenate([[0.0], edges]), bin_hi=np.concatenate([edges, [np.inf]]),
                             count=result.hist))
    return dict(top_k=top, pareto=front, axes=axes, histogram=hist)


def collapse_frames(engine, frames) -> dict:
    """Top-k and Pareto rows that differ only in axes that change no metric,
    collapsed (search.alike): {'top_k': DataFrame, 'pareto': DataFrame}, the
    axis columns as text ('any', '>=141 GB', ...), `covers` = rows merged.
    Adds `same_as_rank` to frames['top_k'] (the rank of the row that stands
    for it; its own rank when it stands for itself)."""
    import numpy as np

    from jaxplat.report import sweep_tables
    from jaxplat.search import alike

    out = {}
    cols = metric_columns(engine.metrics)
    for name in ("top_k", "pareto"):
        df = frames[name]
        if not len(df):
            out[name] = df.assign(covers=np.zeros(0, int))
            continue
        reps, covered, masks = alike.collapse(engine, df["index"].to_numpy(), df[cols].to_numpy())
        out[name] = sweep_tables.collapsed_frame(engine.study, df, masks, {"positions": reps, "covered_by": covered})
        if name == "top_k":
            df["same_as_rank"] = df["rank"].to_numpy()[covered]
    return out


def write_outputs(engine, result, out: Path, compile_s: float) -> dict:
    """Write the result files into `out`; returns the DataFrames (plus
    'top_k_collapsed' and 'pareto_collapsed', 'requirements' rows)."""
    from jaxplat.report import plots, sweep_tables
    from jaxplat.search import AMONG_ALL, COUNTERS, METRICS

    st = engine.study
    frames = result_frames(engine, result)
    collapsed = collapse_frames(engine, frames)
    for name in ("top_k", "pareto", "axes"):
        frames[name].to_parquet(out / f"{name}.parquet", index=False)
        frames[name].to_csv(out / f"{name}.csv", index=False)
    for name, df in collapsed.items():
        df.to_csv(out / f"{name}_collapsed.csv", index=False)
        frames[f"{name}_collapsed"] = df
    frames["histogram"].to_csv(out / "histogram.csv", index=False)
    reqs = sweep_tables.requirements(st, result.ax_ok)
    frames["requirements"] = reqs
    if reqs:
        import pandas as pd
        pd.DataFrame(reqs).to_csv(out / "requirements.csv", index=False)
    cols = dict(zip(engine.metrics, metric_columns(engine.metrics)))
    x, y = st.pareto
    group = st.outer[st.group_by] if st.group_by >= 0 else None
    plots.pareto_plot(frames["pareto"], frames["top_k"], cols[x], cols[y], METRICS[x][2], METRICS[y][2],
                      out / "pareto.png", title=f"{st.name}: Pareto front and top {st.top_k}",
                      group=group.name if group is not None else None,
                      groups=[str(group.label(j)) for j in range(len(group))] if group is not None else None)
    summary = dict(study=st.name, configurations=st.size, **{k: int(v) for k, v in zip(COUNTERS, result.counts)},
                   counted_among={k: ("all" if k in AMONG_ALL else "feasible") for k in COUNTERS[3:]},
                   objective=("maximize " if st.maximize else "minimize ") + st.objective,
                   pareto=list(st.pareto), pareto_points=len(frames["pareto"]),
                   top_k_distinct=len(collapsed["top_k"]),
                   pareto_truncated_per_block=int(result.front_overflow), devices=engine.n_dev,
                   pricing=st.pricing, technology=st.technology_name or None,
                   compile_s=compile_s, sweep_s=result.elapsed,
                   configs_per_s=(int(result.counts[0]) / result.elapsed) if result.elapsed > 0 else None,
                   **study_info(st))
    from jaxplat.report import json_text

    (out / "summary.json").write_text(json_text(summary, indent=2))  # strict JSON: no bare NaN
    return frames


def study_info(st) -> dict:
    """What a report needs to read the tables: the axes in order, the
    per-axis summaries' grouping, and the constraints (SLOs in seconds, per
    workload where the study takes them from its workloads)."""
    def slo(v, field):
        if v == "workload":
            return {n: float(f"{float(getattr(w, field)):.7g}") for n, w in zip(st.workload_names, st.workloads)}
        return None if v is None else float(f"{float(v):.7g}")  # float32 in the pytrees: 0.2, not 0.2000000030

    return dict(kind="sweep", axes=[a.name for a in st.axes],
                group_by=st.outer[st.group_by].name if st.group_by >= 0 else None,
                models=list(st.model_names), workloads=list(st.workload_names),
                hardware=", ".join(st.hardware_names) or st.hardware_name,
                constraints=dict(max_chips=float(st.max_chips) if math.isfinite(st.max_chips) else None,
                                 ttft_s=slo(st.ttft, "ttft_slo"), tpot_s=slo(st.tpot, "tpot_slo"),
                                 max_memory_fraction=float(st.max_memory_fraction)
                                 if math.isfinite(st.max_memory_fraction) else None))


def constraints_text(st, flags=()) -> str:
    """The constraints a sweep applies, one short block: each SLO with its
    source (each workload's file, the study, or --ttft/--tpot: `flags`),
    max_chips and the memory fraction."""
    from jaxplat.specs import UNBOUNDED_SLO, units

    def limit(v):
        return "no limit" if v is None or v >= UNBOUNDED_SLO else f"<= {units.fmt_time(v)}"

    lines = ["constraints:"]
    for key in () if getattr(st, "task", "infer") == "train" else ("ttft", "tpot"):  # training: no SLOs
        v = getattr(st, key)
        if v == "workload":
            per = ", ".join(f"{n} {limit(float(getattr(w, key + '_slo')))}"
                            for n, w in zip(st.workload_names, st.workloads))
            lines.append(f"  {key.upper()}: each workload's slo ({per}; --{key} or constraints.{key} overrides)")
        else:
            lines.append(f"  {key.upper()} {limit(v)} ({f'--{key}' if key in flags else f'study constraints.{key}'})")
    chips = f"at most {st.max_chips:g}" if math.isfinite(st.max_chips) else "no limit"
    lines.append(f"  chips: {chips} (constraints.max_chips); memory per chip <= {st.max_memory_fraction:.0%} "
                 "of capacity (constraints.max_memory_fraction)")
    return "\n".join(lines)


_COUNTER_TEXT = {"over_chips": "more chips than max_chips", "wrong_chips": "not the study's chip count",
                 "over_memory": "over the memory limit", "over_ttft": "over the TTFT SLO",
                 "over_tpot": "over the TPOT SLO"}


def _in_group(cell, want) -> bool:
    """Whether a top_k_collapsed cell is in the group labelled `want`: the cell carries its unit ("32
    chips", "1 seq"), or is "any"; a named axis' cell is its name."""
    text = str(cell)
    if text == "any" or text == str(want):
        return True
    try:
        return float(text.split()[0]) == float(want)
    except (ValueError, TypeError, IndexError):
        return False


def _shown_rows(st, top, axes, most=10):
    """The top-k rows a summary prints: the `most` best, or with a study's
    `group_by` the best few of each group (most // groups, at least 1).
    Returns (rows, title or None, lines for groups with no row kept)."""
    import numpy as np
    import pandas as pd

    if st.group_by < 0:
        return top.head(most), None, []
    g = st.outer[st.group_by]
    per = max(1, most // len(g))
    parts, missing = [], []
    for j in range(len(g)):
        want = g.label(j)
        lab = f"{want:g}" if isinstance(want, float) else str(want)
        rows = top[[_in_group(c, want) for c in top[g.name]]].head(per)
        parts.append(rows)
        if not len(rows):
            mine = axes[(axes["group"].astype(str) == str(want)) & (axes["axis"] == g.name)]
            best = mine[f"best_{st.objective}"].to_numpy(np.float64)
            why = (f"best {st.objective} {np.nanmax(best) if st.maximize else np.nanmin(best):.4g} "
                   "(axes.csv; raise top_k to list it)" if np.isfinite(best).any() and int(mine["n_ok"].sum())
                   else "no configuration meets every constraint")
            missing.append(f"  {g.name} {lab}: none among the best kept; {why}")
    return pd.concat(parts), f"Best {per} per {g.name} (group_by)", missing


def summary_text(engine, result, frames, compile_s) -> str:
    """A short printed summary with units."""
    from jaxplat.report import table
    from jaxplat.search import AMONG_ALL, COUNTERS, METRICS
    from jaxplat.specs import units

    st = engine.study
    c = dict(zip(COUNTERS, (int(v) for v in result.counts)))
    rate = c["evaluated"] / result.elapsed if result.elapsed > 0 else float("nan")
    lines = [(f"{st.name}: {c['evaluated']:,} configurations in {result.elapsed:.3g} s "
              f"({rate:.3g} configs/s on {engine.n_dev} device(s); "
              f"compile {compile_s:.3g} s{', fast' if engine.fast_compile else ''})"),
             f"  feasible (divides, fits memory): {c['feasible']:,}; meet every constraint: {c['ok']:,}",
             f"  {st.pricing_text}",
             f"  software stack of its chips: {st.software or 'each chip default'} (specs/software; --engine "
             "or the study's software: to change)"]
    for scope, names in (("of all configurations", [k for k in COUNTERS[3:] if k in AMONG_ALL]),
                         ("of the feasible ones", [k for k in COUNTERS[3:] if k not in AMONG_ALL])):
        parts = [f"{_COUNTER_TEXT[k]} {c[k]:,}" for k in names if c[k]]
        if parts:
            lines.append(f"  rejected {scope} (one may fail several checks): " + ", ".join(parts))
    top, full = frames["top_k_collapsed"], frames["top_k"]
    if not len(top):
        lines.append("  no configuration meets every constraint")
        return "\n".join(lines)
    show = [st.objective] + [m for m in ("ttft", "tpot", "throughput", "step_time_s", "tokens_per_s_per_chip", "mfu",
                                         "train_time_s", "train_cost_usd", "chips", "memory_bytes",
                                         "cost_per_mtok_usd") if m in engine.metrics and m != st.objective]
    cols = dict(zip(engine.metrics, metric_columns(engine.metrics)))
    axis_names = [a.name for a in st.axes]
    # Times and bytes are printed with their units; the others get theirs in the header.
    head = ["#"] + axis_names + [f"{m} [{METRICS[m][2]}]" if METRICS[m][2] not in ("", "s", "B") else m
                                 for m in show]
    rows = []
    shown, title, missing = _shown_rows(st, top, frames["axes"])
    for _, r in shown.iterrows():
        row = [str(int(r["rank"]))] + [str(r[a]) for a in axis_names]
        for m in show:
            v = r[cols[m]]
            if isinstance(v, str):  # a metric that is also a collapsed axis (chips): already "64 chips" or a range
                row.append(v)
                continue
            v, unit = float(v), METRICS[m][2]
            row.append(units.fmt_time(v) if unit == "s" else units.fmt_bytes(v) if unit == "B" else f"{v:.4g}")
        rows.append(row)
    lines.append("")
    more = " (raise the study's top_k for more)" if len(top) < 10 and len(full) >= st.top_k else ""
    lines.append(f"{title or f'Top {len(rows)}'} by {'max' if st.maximize else 'min'} {st.objective} "
                 f"({len(top)} distinct among the {len(full)} best kept{more}; an axis shown as 'any' or a range "
                 "changes no metric there):")
    lines.append(table(head, rows, "r" * len(head)))
    lines += missing
    if getattr(st, "task", "infer") == "train":  # the best, as the command that costs it alone
        from jaxplat.search.train_study import train_command
        lines.append(f"\nThe best, step time split by phase and collective: {train_command(st, full.iloc[0])}")
    lines.append(f"\nPareto front ({st.pareto[0]} vs {st.pareto[1]}): {len(frames['pareto'])} points "
                 "(pareto_collapsed.csv: the axes that change no metric shown as 'any')")
    req = frames.get("requirements") or []
    if req:
        lines.append("\nWhat each hardware axis must be for some configuration to meet every constraint "
                     "(requirements.csv):")
        lines.append(table(["group", "axis", "requirement"], [[r["group"], r["axis"], r["text"]] for r in req],
                           "lll"))
    return "\n".join(lines)
