"""`jaxplat requirements`: what a chip must offer to serve one model and use
case within its SLOs (GenZ's platform requirements, arXiv 2406.01698 Sec. 7),
by GenZ's closed forms and by inverting the full cost model."""

import sys

from jaxplat.cli.cache_args import add_cache_arguments, use_cache
from jaxplat.cli.estimate import _overrides, add_dtype_argument, add_sp_alias, checkpoint_warnings, context_degree
from jaxplat.cli.slo_args import add_slo_arguments, slo_flags
from jaxplat.design.requirements import requirements
from jaxplat.model import PROFILES, Options, Parallel, load_hardware, load_model, load_workload, replace
from jaxplat.report import json_text, table
from jaxplat.specs import UNBOUNDED_SLO, spec_label, units

ROWS = (("mem_bytes", "memory capacity", "bytes"), ("decode_mem_bw_bytes_s", "memory bandwidth (TPOT)", "bw"),
        ("prefill_flops_s", "compute (TTFT)", "flops"))


def register(sub):
    p = sub.add_parser("requirements", help="chip FLOP/s, memory bandwidth and capacity a use case needs",
                       description="Platform requirements of one model and use case: GenZ's closed forms "
                                   "(weights + KV; (used weights + KV) / TPOT; prefill FLOPs / TTFT) and the "
                                   "smallest FLOP/s, memory bandwidth and memory size of the base chip at "
                                   "which the full cost model meets the workload's SLOs (*_model).")
    p.add_argument("--model", required=True, help="built-in model name or a YAML / config.json path")
    p.add_argument("--workload", default="chatbot", help="built-in workload (GenZ's use cases) or a YAML path")
    p.add_argument("--hardware", default="h100-sxm", help="base chip for the *_model inversions (default h100-sxm)")
    for flag, helptext in (("batch", "sequences per replica"), ("prompt", "prompt tokens"),
                           ("output", "output tokens"), ("beams", "beams per sequence")):
        p.add_argument(f"--{flag}", type=int, help=f"override the workload's {helptext}")
    add_slo_arguments(p, "the workload's slo")
    for flag, helptext in (("tp", "tensor"), ("pp", "pipeline"), ("ep", "expert"), ("dp", "data"),
                           ("cp", "context (Megatron's context_parallel_size)")):
        p.add_argument(f"--{flag}", type=int, default=1, help=f"{helptext}-parallel degree (default 1)")
    add_sp_alias(p)
    add_dtype_argument(p)
    p.add_argument("--profile", choices=PROFILES, default="default",
                   help="'genz' follows GenZ's accounting conventions (default: default)")
    p.add_argument("--json", action="store_true", help="print one JSON object (SI units in the key names)")
    add_cache_arguments(p, "a later call of the same shapes skips most of its compiles")
    p.set_defaults(func=run, microbatches=1, overlap=0.0, imbalance=1.0)


def _fmt(kind: str, v: float) -> str:
    if v == float("inf"):
        return "unreachable"
    if kind == "bytes":
        return units.fmt_bytes(v)
    if kind == "bw":
        return f"{units.fmt_bytes(v)}/s"
    return f"{v / 1e12:.4g} TFLOP/s"


def run(args) -> int:
    use_cache(args, min_compile_s=0.0)  # every program, as codesign (cli/codesign.py)
    model, hw = load_model(args.model), load_hardware(args.hardware)
    wl = _overrides(load_workload(args.workload), args)
    slos = slo_flags(args)
    if slos:
        wl = replace(wl, **{f"{k}_slo": UNBOUNDED_SLO if v is None else v for k, v in slos.items()})
    par = Parallel(tp=args.tp, pp=args.pp, ep=args.ep, dp=args.dp, cp=context_degree(args))
    for w in checkpoint_warnings(args, wl):
        print(f"jaxplat: warning: {w}", file=sys.stderr)
    req = requirements(model, hw, par, wl, Options(profile=args.profile))
    if args.json:
        out = {"model": args.model, "workload": args.workload, "hardware": args.hardware, "profile": args.profile}
        out.update({k: (v if v != float("inf") else None) if isinstance(v, float) else v for k, v in req.items()})
        print(json_text(out))
        return 0
    slo = "; ".join(f"{k.upper()} " + ("no limit" if float(getattr(wl, f"{k}_slo")) >= UNBOUNDED_SLO else
                                     f"<= {float(getattr(wl, f'{k}_slo')):g} s")
                    + (f" (--{k})" if k in slos else "") for k in ("ttft", "tpot"))
    print(f"{args.model}, workload {spec_label(args.workload)} (batch {float(wl.batch):g}, prompt "
          f"{float(wl.prompt):g}, output {float(wl.output):g}, beams {float(wl.beams):g}; {slo}), "
          f"tp={args.tp} pp={args.pp} ep={args.ep}, profile {args.profile}; "
          f"*_model: other numbers from {args.hardware}\n")
    # a requirement from an SLO with no limit is met by any chip: 'none' rather than the 1e9 s SLO's figure
    free = {k for k, slo in (("prefill_flops_s", wl.ttft_slo), ("decode_mem_bw_bytes_s", wl.tpot_slo))
            if float(slo) >= UNBOUNDED_SLO}
    rows = [[label, *(("none",) * 2 if key in free else (_fmt(kind, req[key]), _fmt(kind, req[key + "_model"]))),
             _fmt(kind, req["base_" + key]), req["slo"][key + "_model"]] for key, label, kind in ROWS]
    print(table(["requirement", "closed form", "cost model", f"{args.hardware}", "constraint"], rows, "lrrrl"))
    label = dict((k, lab) for k, lab, _ in ROWS)[req["binding"]]
    print(f"\nbinding on {args.hardware}: {label} (largest required / available)")
    for key, why in req["reasons"].items():
        print(f"  {key}: {why}")
    return 0
