"""`jaxplat estimate`: one configuration, its summary and per-operator table."""

import json

import jax

from jaxplat.cli import serving_args
from jaxplat.cost import attention_split, breakdown, comm_breakdown, divisibility, evaluate
from jaxplat.model import (
    PROFILES,
    Options,
    Parallel,
    load_hardware,
    load_model,
    load_workload,
    network_level_names,
    replace,
)
from jaxplat.report import format_comm_breakdown, operator_table, table
from jaxplat.specs import SpecError, units

# Metrics field -> JSON key with its SI unit.
JSON_KEYS = {
    "ttft": "ttft_s", "tpot": "tpot_s", "e2e": "e2e_s", "throughput": "throughput_tok_s",
    "prefill_time": "prefill_s", "decode_time": "decode_s", "comm_time": "comm_s",
    "weights_bytes": "weights_bytes", "kv_bytes": "kv_bytes", "activation_bytes": "activation_bytes",
    "memory_bytes": "memory_bytes", "capacity_bytes": "capacity_bytes", "chips": "chips",
    "fits": "fits", "feasible": "feasible", "divisible": "divisible", "chips_ok": "chips_ok",
    "bubble": "pipeline_bubble_fraction", "context_ok": "context_ok", "throttle": "power_throttle",
    "energy_per_token_j": "energy_per_token_j", "power_w": "power_w", "cost_per_mtok_usd": "cost_per_mtok_usd",
}


def register(sub):
    p = sub.add_parser("estimate", help="cost of one model on one deployment",
                       description="Estimate TTFT, TPOT, throughput and memory of one configuration.")
    p.add_argument("--model", required=True, help="built-in model name or a YAML / config.json path")
    p.add_argument("--hardware", required=True, help="built-in chip name or a hardware YAML path")
    p.add_argument("--workload", default="chatbot", help="built-in workload name or a YAML path (default: chatbot)")
    for flag, helptext in (("batch", "sequences per replica"), ("prompt", "prompt tokens"),
                           ("output", "output tokens"), ("beams", "beams per sequence")):
        p.add_argument(f"--{flag}", type=int, help=f"override the workload's {helptext}")
    for flag, helptext in (("tp", "tensor"), ("pp", "pipeline"), ("ep", "expert (attention data parallel)"),
                           ("dp", "data"), ("sp", "sequence (context)")):
        p.add_argument(f"--{flag}", type=int, default=1, help=f"{helptext}-parallel degree (default 1)")
    p.add_argument("--moe-ep", type=int, default=1,
                   help="experts split this many ways over the --tp chips, MoE TP = tp / moe-ep (TRT-LLM "
                        "moe_expert_parallel_size, vLLM --enable-expert-parallel); must divide --tp (default 1)")
    p.add_argument("--microbatches", type=int, default=1, help="pipeline micro-batches in flight (default 1)")
    p.add_argument("--overlap", type=float, default=0.0,
                   help="fraction of communication hidden behind compute, 0..1 (default 0, GenZ's assumption)")
    p.add_argument("--imbalance", type=float, default=1.0,
                   help="MoE load imbalance: busiest expert's tokens over the mean, >= 1 (default 1)")
    p.add_argument("--dtype", choices=units.DTYPES, help="one dtype for weights, activations and KV cache")
    p.add_argument("--profile", choices=PROFILES, default="default",
                   help="'genz' follows GenZ's accounting conventions (default: default)")
    p.add_argument("--json", action="store_true", help="print one JSON object (SI units in the key names)")
    serving_args.add_arguments(p)
    p.set_defaults(func=run)


def _overrides(wl, args):
    changes = {}
    for flag in ("batch", "prompt", "output", "beams"):
        v = getattr(args, flag)
        if v is not None:
            if v <= 0:
                raise SpecError(f"--{flag} must be positive, got {v}")
            changes[flag] = float(v)
    for flag in ("tp", "pp", "ep", "dp", "sp", "microbatches", "moe_ep"):
        if getattr(args, flag, 1) <= 0:  # (commands without a flag leave its default, 1)
            raise SpecError(f"--{flag.replace('_', '-')} must be positive, got {getattr(args, flag)}")
    if not 0.0 <= args.overlap <= 1.0:
        raise SpecError(f"--overlap is a fraction in [0, 1], got {args.overlap}")
    if args.imbalance < 1.0:
        raise SpecError(f"--imbalance must be >= 1 (1 = perfectly balanced), got {args.imbalance}")
    if args.dtype:
        b = units.BYTES_PER_ELEMENT[args.dtype]
        changes.update(bytes_weight=b, bytes_act=b, bytes_kv=b, compute_dtype=float(units.DTYPES.index(args.dtype)))
    return replace(wl, **changes) if changes else wl


def infeasible_reasons(model, par, metrics, opts) -> list[str]:
    """Why `feasible` is False, one phrase per failed check of the cost
    model itself (`cost.divisibility`, chips, memory)."""
    checks = jax.device_get(jax.jit(divisibility, static_argnums=2)(model, par, opts))
    split = float(attention_split(par, opts))
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


def _human(key: str, value) -> str:
    """A serving JSON value with its unit (key suffixes carry SI units)."""
    if isinstance(value, bool):
        return str(value)
    if key.endswith("_tok_s"):
        return f"{value:.4g} tokens/s"
    if key.endswith("_req_s"):
        return f"{value:.4g} requests/s"
    if key.endswith("_s"):
        return units.fmt_time(value)
    return f"{value:.4g}"


def run(args) -> int:
    model, hw = load_model(args.model), load_hardware(args.hardware)
    wl = _overrides(load_workload(args.workload), args)
    par = Parallel(tp=args.tp, pp=args.pp, ep=args.ep, dp=args.dp, sp=args.sp, microbatches=args.microbatches,
                   overlap=args.overlap, imbalance=args.imbalance, moe_ep=args.moe_ep)
    opts = Options(profile=args.profile)
    metrics = jax.device_get(evaluate(model, hw, par, wl, opts))
    values = {JSON_KEYS[k]: (bool(v) if k in ("fits", "feasible", "context_ok") else float(v))
              for k, v in vars(metrics).items() if k in JSON_KEYS}
    served = serving_args.serving_json(args, model, hw, par, wl)
    if args.json:
        print(json.dumps({"model": args.model, "hardware": args.hardware, "workload": args.workload,
                          "profile": args.profile, **values, **served}))
        return 0
    m = metrics
    print(f"{args.model} on {args.hardware} x{float(m.chips):g} "
          f"(tp={args.tp} pp={args.pp} ep={args.ep} dp={args.dp} sp={args.sp} moe-ep={args.moe_ep}), "
          f"workload {args.workload}: "
          f"batch {float(wl.batch):g}, prompt {float(wl.prompt):g}, output {float(wl.output):g}, "
          f"beams {float(wl.beams):g}, profile {args.profile}\n")
    rows = [
        ["TTFT (prefill)", units.fmt_time(float(m.ttft))],
        ["TPOT (mean per output token)", units.fmt_time(float(m.tpot))],
        ["end-to-end latency", units.fmt_time(float(m.e2e))],
        ["throughput", f"{float(m.throughput):.4g} tokens/s"],
        ["time in collectives", units.fmt_time(float(m.comm_time))],
        ["weights per chip", units.fmt_bytes(float(m.weights_bytes))],
        ["KV cache per chip", units.fmt_bytes(float(m.kv_bytes))],
        ["activations per chip", units.fmt_bytes(float(m.activation_bytes))],
        ["memory per chip / capacity", f"{units.fmt_bytes(float(m.memory_bytes))} / "
                                       f"{units.fmt_bytes(float(m.capacity_bytes))}"],
        ["fits / feasible", f"{bool(m.fits)} / {bool(m.feasible)}"],
        ["pipeline bubble", f"{100 * float(m.bubble):.1f}%"],
        ["power-limit stretch (TDP)", f"{float(m.throttle):.3f}x"],
        ["energy per output token", f"{float(m.energy_per_token_j):.4g} J"],
        ["average power (deployment)", f"{float(m.power_w):.4g} W"],
        ["cost per million output tokens", f"${float(m.cost_per_mtok_usd):.4g}"],
    ]
    print(table(["metric", "value"], rows, "lr"))
    if served:
        print("\nServing (continuous batching; --rate 0 is offline max load)")
        unstable = served.get("stable") is False
        print(table(["metric", "value"], [[k, "unbounded (arrivals exceed capacity)"
                                           if unstable and k.endswith("_s") and not k.endswith("req_s")
                                           else _human(k, v)] for k, v in served.items()], "lr"))
    for reason in infeasible_reasons(model, par, m, opts):
        print(f"  infeasible: {reason}")
    print()
    print(format_comm_breakdown(comm_breakdown(model, hw, par, wl, opts), network_level_names(args.hardware)))
    for phase, title in (("prefill", "Prefill (one pass over the prompt)"),
                         ("decode", "Decode (mean step; GenZ profile: the step at prompt + output)")):
        print()
        print(operator_table(breakdown(model, hw, par, wl, phase, opts), title))
    return 0
