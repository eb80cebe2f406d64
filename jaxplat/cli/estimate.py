"""`jaxplat estimate`: one configuration, its summary and per-operator table.

Everything it prints (metrics, divisibility checks, both per-operator tables,
the collectives per network level, the serving model's numbers) comes from
one compiled call, `estimate_arrays`, kept on disk by `cli.compiled`: a
second call of the same shape neither traces nor compiles.
"""

import argparse
import math
import sys

import jax
import numpy as np

from jaxplat.cli import compiled, serving_args
from jaxplat.cli.calibration_args import add_calibration_arguments
from jaxplat.cost import (
    attention_split,
    breakdown_rows,
    comm_arrays,
    comm_rows,
    divisibility,
    evaluate,
    microbatching,
    operator_arrays,
)
from jaxplat.cost.dtypes import emulated_dtype
from jaxplat.model import (
    PROFILES,
    Options,
    Parallel,
    chip_software_stack,
    dtype_fields,
    load_checkpoint_dtype,
    load_hardware,
    load_model,
    load_workload,
    network_level_names,
    replace,
    select_engine,
)
from jaxplat.report import format_comm_breakdown, json_text, operator_table, table
from jaxplat.specs import UNBOUNDED_SLO, SpecError, dtype_triple, spec_label, units

EXIT_INFEASIBLE = 3  # exit status of an infeasible configuration (without --allow-infeasible)

# Metrics field -> JSON key with its SI unit.
JSON_KEYS = {
    "ttft": "ttft_s", "tpot": "tpot_s", "e2e": "e2e_s", "throughput": "throughput_tok_s",
    "prefill_time": "prefill_s", "decode_time": "decode_s", "comm_time": "comm_s",
    "weights_bytes": "weights_bytes", "kv_bytes": "kv_bytes", "activation_bytes": "activation_bytes",
    "memory_bytes": "memory_bytes", "capacity_bytes": "capacity_bytes", "chips": "chips",
    "fits": "fits", "feasible": "feasible", "divisible": "divisible", "chips_ok": "chips_ok",
    "bubble": "pipeline_bubble_fraction", "context_ok": "context_ok", "throttle": "power_throttle",
    "prefill_clock": "prefill_clock_share", "decode_clock": "decode_clock_share",
    "energy_per_token_j": "energy_per_token_j", "power_w": "power_w", "cost_per_mtok_usd": "cost_per_mtok_usd",
}


def _power_note(m) -> str:
    """Which phases the chips' TDP holds below their rated clock, and how far."""
    held = [f"{name} at {100 * float(c):.0f}%" for name, c in (("prefill", m.prefill_clock),
                                                                ("decode", m.decode_clock)) if float(c) < 0.995]
    return f"TDP holds {' and '.join(held)} of the rated clock" if held else ""


def register(sub):
    p = sub.add_parser("estimate", help="cost of one model on one deployment",
                       description="Estimate TTFT, TPOT, throughput and memory of one configuration, and whether "
                                   "it meets the workload's TTFT and TPOT SLOs.")
    p.add_argument("--model", required=True, help="built-in model name or a YAML / config.json path")
    p.add_argument("--hardware", required=True, help="built-in chip name or a hardware YAML path")
    p.add_argument("--workload", default="chatbot", help="built-in workload name or a YAML path (default: chatbot)")
    for flag, helptext in (("batch", "sequences per replica"), ("prompt", "prompt tokens"),
                           ("output", "output tokens"), ("beams", "beams per sequence")):
        p.add_argument(f"--{flag}", type=int, help=f"override the workload's {helptext}")
    for flag, helptext in (("tp", "tensor"), ("pp", "pipeline"), ("ep", "expert (attention data parallel)"),
                           ("dp", "data"), ("cp", "context (Megatron's context_parallel_size)")):
        p.add_argument(f"--{flag}", type=int, default=1, help=f"{helptext}-parallel degree (default 1)")
    add_sp_alias(p)
    p.add_argument("--moe-ep", type=int, default=1,
                   help="experts split this many ways over the --tp chips, MoE TP = tp / moe-ep (TRT-LLM "
                        "moe_expert_parallel_size, vLLM --enable-expert-parallel); must divide --tp (default 1)")
    p.add_argument("--moe-gather", action="store_true",
                   help="with --ep: tokens reach the experts by all-gather and come back by reduce-scatter "
                        "(TensorRT-LLM attention DP on one NVLink node, SGLang DP attention) instead of "
                        "all-to-all (DeepEP)")
    p.add_argument("--microbatches", type=int, default=1, help="pipeline micro-batches in flight (default 1)")
    p.add_argument("--overlap", type=float, default=0.0,
                   help="fraction of communication hidden behind compute, 0..1 (default 0, GenZ's assumption)")
    p.add_argument("--imbalance", type=float, default=1.0,
                   help="MoE load imbalance: busiest expert's tokens over the mean, >= 1 (default 1)")
    add_dtype_argument(p)
    p.add_argument("--profile", choices=PROFILES, default="default",
                   help="'genz' follows GenZ's accounting conventions (default: default)")
    p.add_argument("--json", action="store_true", help="print one JSON object (SI units in the key names)")
    p.add_argument("--allow-infeasible", action="store_true",
                   help=f"print the numbers of an infeasible configuration (degrees that do not divide the model, "
                        f"memory that does not fit) and exit 0; without it such a configuration exits "
                        f"{EXIT_INFEASIBLE} with the reasons")
    add_calibration_arguments(p)
    p.add_argument("--no-cache", action="store_true",
                   help="compile in memory only (default: keep the compiled estimate in $JAXPLAT_CACHE_DIR, else "
                        "~/.cache/jaxplat/xla, so that the next call of the same shape skips tracing and compiling)")
    serving_args.add_arguments(p)
    p.set_defaults(func=run)


def add_sp_alias(p):
    """--sp: the former name of --cp (context parallelism), kept for users'
    scripts and hidden from --help (Megatron's sequence parallelism is another thing)."""
    p.add_argument("--sp", type=int, default=None, help=argparse.SUPPRESS)


def context_degree(args) -> int:
    """The context-parallel degree of --cp, or of its former name --sp."""
    sp = getattr(args, "sp", None)
    if sp is None:
        return args.cp
    if args.cp not in (1, sp):
        raise SpecError(f"--sp is the former name of --cp: give one of them, got --cp {args.cp} and --sp {sp}")
    return sp


def add_dtype_argument(p):
    """The --dtype flag (estimate, requirements)."""
    p.add_argument("--dtype", metavar="DTYPE[/ACT/KV[/EXPERTS]]",
                   help=f"one dtype for weights, activations and KV cache ({', '.join(units.DTYPES)}), or "
                        "weights/activations/kv, e.g. fp4/fp4/fp8 (NVFP4 GEMMs, FP8 KV cache) or mxfp4/bf16/bf16 "
                        "(MXFP4 weights, 16-bit GEMMs), and /experts for the routed experts' weights when a "
                        "checkpoint stores them apart, e.g. bf16/bf16/bf16/mxfp4 (gpt-oss); 'checkpoint': what "
                        "the model's config.json quantization_config says")


def _overrides(wl, args):
    changes = {}
    for flag in ("batch", "prompt", "output", "beams"):
        v = getattr(args, flag)
        if v is not None:
            if v <= 0:
                raise SpecError(f"--{flag} must be positive, got {v}")
            changes[flag] = float(v)
    for flag in ("tp", "pp", "ep", "dp", "cp", "sp", "microbatches", "moe_ep"):
        value = getattr(args, flag, 1)  # (commands without a flag leave its default, 1; --sp None)
        if value is not None and value <= 0:
            raise SpecError(f"--{flag.replace('_', '-')} must be positive, got {getattr(args, flag)}")
    if not 0.0 <= args.overlap <= 1.0:
        raise SpecError(f"--overlap is a fraction in [0, 1], got {args.overlap}")
    if not 1.0 <= args.imbalance < math.inf:  # (NaN fails the comparison: refused too)
        raise SpecError(f"--imbalance must be a finite number >= 1 (1 = perfectly balanced), got {args.imbalance}")
    if args.dtype:
        text = args.dtype
        if text.strip().lower() == "checkpoint":
            text = load_checkpoint_dtype(args.model)
            if text is None:
                raise SpecError(f"--dtype checkpoint: {args.model} has no quantization_config that jaxplat reads "
                                "(a 16-bit checkpoint: --dtype bf16)")
        changes.update(dtype_fields(dtype_triple("--dtype", text)))
    return replace(wl, **changes) if changes else wl


def checkpoint_warnings(args, wl) -> list[str]:
    """A warning when no --dtype was given and the model's checkpoint is
    stored in other dtypes than the workload charges (a quantized
    config.json: gpt-oss's MXFP4 experts, DeepSeek's FP8)."""
    ck = None if args.dtype else load_checkpoint_dtype(args.model)
    if ck is None:
        return []
    fields = dtype_fields(dtype_triple("quantization_config", ck))
    if all(float(getattr(wl, k)) == v for k, v in fields.items()):
        return []
    return [f"{args.model}'s checkpoint is stored as {ck} (weights/activations/kv[/experts], its quantization_config); "
            f"this run charges the workload's dtypes; --dtype checkpoint charges the checkpoint's"]


def emulation_warnings(args, hw, wl, opts) -> list[str]:
    """A warning when the chip has no units for the GEMMs' dtype, so that they
    run widened to a dtype it has (cost.dtypes.computed_workload)."""
    emulated = emulated_dtype(hw, wl, opts)
    if emulated is None:
        return []
    dt, run = emulated
    return [f"{args.hardware} has no {dt} units: its GEMMs run emulated in {run} ({run}'s peak and activation "
            f"width; the weights keep their stored width)"]


def infeasible_reasons(model, par, metrics, opts, checks=None, split=None) -> list[str]:
    """Why `feasible` is False, one phrase per failed check of the cost
    model itself (`cost.divisibility`, chips, memory; `checks` and the
    attention `split` when `estimate_arrays` has computed them)."""
    if checks is None:
        checks = jax.device_get(jax.jit(divisibility, static_argnums=2)(model, par, opts))
    split = float(attention_split(par, opts) if split is None else split)
    split_name = f"tp·ep={split:g}" if opts.conv.heads_over_ep else f"tp={split:g}"
    heads, kv, experts = float(model.heads), float(model.kv_heads), float(model.experts)
    say = {"whole": "parallel degrees must be whole numbers >= 1",
           "heads": f"{split_name} does not divide the {heads:g} attention heads",
           "kv_heads": f"{split_name} and the {kv:g} KV heads do not divide one another",
           "experts": f"ep·moe_ep={float(par.ep * par.moe_ep):g} does not divide the {experts:g} experts",
           "moe_ep": (f"moe_ep={float(par.moe_ep):g} does not divide tp={float(par.tp):g}"
                      if opts.conv.moe_accounting != "genz" else "the genz profile has no --moe-ep"),
           "layers": f"pp={float(par.pp):g} exceeds the {float(model.layers):g} layers",
           "imbalance": "--imbalance must be >= 1"}
    reasons = [say[name] for name, ok in checks.items() if not bool(ok)]
    if not bool(metrics.chips_ok):
        reasons.append(f"uses {float(metrics.chips):g} chips, more than the system's network holds")
    if not bool(metrics.context_ok):
        reasons.append(f"prompt + output exceeds the model's max_position_embeddings "
                       f"({float(model.max_context):g} tokens)")
    if not bool(metrics.fits):
        reasons.append(f"needs {units.fmt_bytes(float(metrics.memory_bytes))} per chip, "
                       f"has {units.fmt_bytes(float(metrics.capacity_bytes))}")
    return reasons


def clipped_flags(args, par, wl, opts, batching=None) -> list[str]:
    """One line per flag the cost model does not use as given (`batching`:
    `microbatching`'s answer when already computed)."""
    nmb, ub = (float(x) for x in jax.device_get(microbatching(par, wl, opts) if batching is None else batching))
    if opts.conv.microbatching == "batch_over_pp":
        if args.microbatches != 1:
            return [f"--microbatches {args.microbatches} is ignored by the {opts.profile} profile (GenZ: batch // pp "
                    f"= {ub:g} sequences per micro-batch, {nmb:g} micro-batches)"]
    elif nmb != args.microbatches:
        return [f"--microbatches {args.microbatches} clipped to {nmb:g}: a micro-batch holds at least one sequence "
                f"and the batch is {float(wl.batch):g} (raise --batch)"]
    return []


def slo_check(wl, m) -> dict:
    """{metric: (value s, SLO s, met)} for the workload's bounded SLOs."""
    out = {}
    for name, value, slo in (("ttft", m.ttft, wl.ttft_slo), ("tpot", m.tpot, wl.tpot_slo)):
        if float(slo) < UNBOUNDED_SLO:
            out[name] = (float(value), float(slo), bool(float(value) <= float(slo)))
    return out


def _slo_cell(slo: dict, name: str) -> str:
    if name not in slo:
        return ""
    _, target, met = slo[name]
    return f"{'met' if met else 'MISSED'} (<= {units.fmt_time(target)})"


def decode_title(opts) -> str:
    """Title of the decode table: what the profile's decode step is."""
    if opts.conv.decode == "final_step":
        return "Decode (GenZ's decode step: the KV cache at prompt + output tokens)"
    return "Decode (mean step over the output: the KV cache grows from prompt + 1 to prompt + output - 1 tokens)"


def estimate_arrays(model, hardware, parallel, workload, serving_inputs, options, serving_plan=None,
                    tables=True) -> dict:
    """Every number `jaxplat estimate` prints, as arrays of one trace (pure;
    `options`, `serving_plan` and `tables` static): {"metrics": Metrics,
    "checks": divisibility, "split": attention split, "batching":
    microbatching, "serving": serving_args.serving_arrays (with a plan),
    and with `tables` (text mode) "operators": {phase: (table, columns)}
    (cost.operator_arrays), "comm": cost.comm_arrays}."""
    out = {"metrics": evaluate(model, hardware, parallel, workload, options),
           "checks": divisibility(model, parallel, options), "split": attention_split(parallel, options),
           "batching": microbatching(parallel, workload, options)}
    if tables:
        out["operators"] = ops = operator_arrays(model, hardware, parallel, workload, options)
        out["comm"] = comm_arrays({phase: t for phase, (t, _) in ops.items()}, hardware, options)
    if serving_plan is not None:
        out["serving"] = serving_args.serving_arrays(model, hardware, parallel, serving_inputs, options,
                                                     serving_plan)
    return out


def run(args) -> int:
    model = load_model(args.model)
    cal, software = select_engine(args.calibration, args.engine)
    hw = load_hardware(args.hardware, cal, software)
    args.software = chip_software_stack(args.hardware, software, cal)
    wl = _overrides(load_workload(args.workload), args)
    args.cp = context_degree(args)
    par = Parallel(tp=args.tp, pp=args.pp, ep=args.ep, dp=args.dp, cp=args.cp, microbatches=args.microbatches,
                   overlap=args.overlap, imbalance=args.imbalance, moe_ep=args.moe_ep,
                   moe_gather=float(getattr(args, "moe_gather", False)))
    opts = Options(profile=args.profile)
    # A bad serving flag is reported after the infeasibility check, as the
    # serving model only runs on a feasible configuration (or --allow-infeasible).
    serving_warnings, serving_error = [], None
    try:
        splan, sinputs = serving_args.plan(args, model, par, wl, serving_warnings)
    except SpecError as e:
        splan, sinputs, serving_error = None, None, e
    # One compiled call; --json prints no tables, so its program computes none (compiles in half the time).
    res = compiled.run("estimate", estimate_arrays, (model, hw, par, wl, sinputs), (opts, splan, not args.json),
                       None if args.no_cache else compiled.cache_dir())
    metrics = res["metrics"]
    warnings = (checkpoint_warnings(args, wl) + emulation_warnings(args, hw, wl, opts)
                + clipped_flags(args, par, wl, opts, res["batching"]))
    reasons = (infeasible_reasons(model, par, metrics, opts, res["checks"], res["split"])
               if not bool(metrics.feasible) else [])
    if not bool(metrics.feasible) and not reasons:
        reasons = ["a metric is not finite"]
    blocked = bool(reasons) and not args.allow_infeasible
    slo = slo_check(wl, metrics)
    served = {}
    if not blocked:
        if serving_error is not None:
            raise serving_error
        warnings += serving_warnings
        if splan is not None:
            served = serving_args.serving_result(args, splan, res["serving"], sinputs, par, warnings)
    for w in warnings:
        print(f"jaxplat: warning: {w}", file=sys.stderr)
    if blocked:
        print(f"jaxplat: infeasible: {'; '.join(reasons)} (exit {EXIT_INFEASIBLE}; --allow-infeasible prints "
              "the numbers anyway)", file=sys.stderr)
    if args.json:
        flags = ("fits", "feasible", "divisible", "chips_ok", "context_ok")
        values = {JSON_KEYS[k]: (bool(v) if k in flags else float(v))
                  for k, v in vars(metrics).items() if k in JSON_KEYS}
        print(json_text({
            "model": args.model, "hardware": args.hardware, "workload": args.workload, "profile": args.profile,
            "software": args.software, **values, "sram_bytes": float(hw.memory.sram_size),
            "slo": {f"{k}_s": float(f"{target:.7g}") for k, (_, target, _) in slo.items()},  # float32 -> as written
            "meets_slo": all(met for *_, met in slo.values()),
            "slo_missed": [k for k, (*_, met) in slo.items() if not met],
            "infeasible_reasons": reasons, "warnings": warnings, **served}))
        return EXIT_INFEASIBLE if blocked else 0
    if blocked:
        return EXIT_INFEASIBLE
    _print_text(args, hw, wl, opts, res, slo, reasons, served)
    return 0


def _print_text(args, hw, wl, opts, res, slo, reasons, served):
    m = res["metrics"]
    print(f"{args.model} on {args.hardware} x{float(m.chips):g} "
          f"(tp={args.tp} pp={args.pp} ep={args.ep} dp={args.dp} cp={args.cp} moe-ep={args.moe_ep}, "
          f"{float(res['batching'][0]):g} micro-batch(es)), workload {spec_label(args.workload)}: "
          f"batch {float(wl.batch):g}, prompt {float(wl.prompt):g}, output {float(wl.output):g}, "
          f"beams {float(wl.beams):g}, profile {args.profile}, software {args.software}\n")
    # host sum: no compiled unstack
    offchip, sram = float(np.sum(np.asarray(hw.memory.size))), float(hw.memory.sram_size)
    rows = [
        ["TTFT (prefill)", units.fmt_time(float(m.ttft)), _slo_cell(slo, "ttft")],
        ["TPOT (mean per output token)", units.fmt_time(float(m.tpot)), _slo_cell(slo, "tpot")],
        ["end-to-end latency", units.fmt_time(float(m.e2e)), ""],
        ["throughput", f"{float(m.throughput):.4g} tokens/s", ""],
        ["time in collectives", units.fmt_time(float(m.comm_time)), ""],
        ["weights per chip", units.fmt_bytes(float(m.weights_bytes)), ""],
        ["KV cache per chip", units.fmt_bytes(float(m.kv_bytes)), ""],
        ["activations per chip", units.fmt_bytes(float(m.activation_bytes)), ""],
        ["memory per chip / capacity", (f"{units.fmt_bytes(float(m.memory_bytes))} / "
                                        f"{units.fmt_bytes(float(m.capacity_bytes))}"),
         # the binary size too: the figure datasheets print (an H100's "80 GB" is 80 GiB)
         f"off-chip memory, {float(m.capacity_bytes) / 2**30:.4g} GiB" if offchip > 0
         else "on-chip SRAM (no off-chip memory)"],
    ]
    if offchip > 0 and sram > 0:
        rows.append(["on-chip SRAM", units.fmt_bytes(sram), "caches and tiles, not in capacity"])
    rows += [
        ["fits / feasible", f"{bool(m.fits)} / {bool(m.feasible)}", ""],
        ["pipeline bubble", f"{100 * float(m.bubble):.1f}%", ""],
        ["energy per output token", f"{float(m.energy_per_token_j):.4g} J", ""],
        ["average power (deployment)", f"{float(m.power_w):.4g} W", _power_note(m)],
        ["cost per million output tokens", f"${float(m.cost_per_mtok_usd):.4g}", ""],
    ]
    head = ["metric", "value", f"SLO of {spec_label(args.workload)}" if slo else ""]
    print(table(head, rows, "lrl"))
    if slo:
        missed = [f"{k.upper()} {units.fmt_time(v)} > {units.fmt_time(t)}" for k, (v, t, met) in slo.items() if not met]
        print("meets the SLOs: " + ("yes" if not missed else "no, " + "; ".join(missed)))
    for reason in reasons:
        print(f"  infeasible: {reason}")
    if served:
        print("\nServing (continuous batching; --rate 0 is offline max load)")
        print(serving_args.serving_table(served))
    print()
    tables = {phase: t for phase, (t, _) in res["operators"].items()}
    print(format_comm_breakdown(comm_rows(tables, res["comm"], opts), network_level_names(args.hardware)))
    for phase, title in (("prefill", "Prefill (one pass over the prompt)"), ("decode", decode_title(opts))):
        print()
        print(operator_table(breakdown_rows(*res["operators"][phase]), title))
