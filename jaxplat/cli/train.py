"""`jaxplat train`: the cost of one training step on a cluster.

Data-parallel degree dp = chips / (tp·pp·cp); expert parallelism is carved
out of dp (Megatron's expert-data-parallel groups); the global batch is in
sequences. Every number comes from `cost.training.train_step` (one compiled
call, kept on disk by `cli.compiled`).
"""

import math
import sys

import numpy as np

from jaxplat.cli import compiled
from jaxplat.cost.attention_kernels import ATTENTION_KERNELS, kernel_fields
from jaxplat.cost.training import (
    COMM_NAMES,
    MOE_DISPATCHERS,
    MOE_EXPERT_HOST_S,
    MOE_LAYER_HOST_S,
    RECOMPUTE,
    SP_MODES,
    TrainOptions,
    TrainWorkload,
    fold_experts,
    sp_options,
    train_step,
)
from jaxplat.cost.training_memory import RECOMPUTE_MODULES, checks
from jaxplat.model import Parallel, load_hardware, load_model, network_level_names
from jaxplat.report import json_text, table
from jaxplat.search.train_study import RECIPES, SHARE_FLAGS, TRAIN_DTYPES
from jaxplat.specs import SpecError, choice, units

EXIT_INFEASIBLE = 3
ZERO = ("0", "1", "2", "3")
JSON_KEYS = ("step_time_s", "tokens_per_s_per_chip", "mfu", "hfu", "memory_bytes", "fits")
PHASES = (("forward", "forward"), ("backward", "backward (data + weight gradients)"), ("recompute", "recompute"),
          ("scaling", "low-precision casts"), ("host", "MoE host time (exposed)"), ("optimizer", "optimizer (Adam)"),
          ("bubble", "pipeline bubble"))


def register(sub):
    p = sub.add_parser("train", help="cost of one training step on a cluster",
                       description="Step time, tokens/s per chip, MFU/HFU and memory per chip of training a model "
                                   "with tensor (+ sequence), pipeline, context, expert and data parallelism.")
    p.add_argument("--model", required=True, help="built-in model name or a YAML / config.json path")
    p.add_argument("--hardware", required=True, help="built-in chip name or a hardware YAML path")
    p.add_argument("--chips", type=int, required=True, help="chips in the job; dp = chips / (tp·pp·cp)")
    for flag, text in (("tp", "tensor-parallel degree (with Megatron sequence parallelism)"),
                       ("pp", "pipeline stages"), ("vp", "virtual pipeline stages per rank (interleaved 1F1B)"),
                       ("cp", "context-parallel degree (ring attention)"),
                       ("ep", "expert-parallel degree, carved out of the data-parallel degree (of dp x tp/etp "
                              "with --etp)")):
        p.add_argument(f"--{flag}", type=int, default=1, help=f"{text} (default 1)")
    p.add_argument("--etp", type=int, default=None,
                   help="expert tensor-parallel degree, a divisor of tp (default tp); below tp the experts are "
                        "split over the tp ranks too and ep counts them (MoE parallel folding, Megatron-Core's "
                        "--expert-tensor-parallel-size: ep/(tp/etp) must divide dp)")
    p.add_argument("--global-batch", type=int, required=True, help="sequences per optimizer step")
    p.add_argument("--micro-batch", type=int, default=1, help="sequences per micro-batch per data-parallel rank")
    p.add_argument("--seq", type=int, required=True, help="tokens per sequence")
    p.add_argument("--dtype", default="bf16",
                   help=f"GEMM precision, one of {', '.join(TRAIN_DTYPES)}: fp8 is the chip's FP8 recipe "
                        "(per-tensor scaling on Hopper, MXFP8 where the chip has FP4, i.e. Blackwell), fp4 NVFP4, "
                        "int8 an int8 GEMM recipe (AQT)")
    p.add_argument("--recompute", default="none", help=f"activation recomputation: {', '.join(RECOMPUTE)}")
    p.add_argument("--recompute-modules", default="",
                   help="modules recomputed in the backward besides, comma-separated, of "
                        f"{', '.join(RECOMPUTE_MODULES)} (Megatron-Core's recompute_modules; default none)")
    p.add_argument("--moe-host", default=f"{MOE_LAYER_HOST_S:g},{MOE_EXPERT_HOST_S:g}",
                   help="host time a MoE layer leaves exposed per micro-batch, forward and backward: LAYER_S,EXPERT_S "
                        "seconds per MoE layer and per expert the chip holds (software: Megatron-Core's eager stack, "
                        f"fitted: default {MOE_LAYER_HOST_S:g},{MOE_EXPERT_HOST_S:g}; 0,0 for a stack that "
                        "captures its MoE layers in graphs)")
    p.add_argument("--attention-kernel", default="native",
                   help=f"the stack's attention kernel, one of {', '.join(ATTENTION_KERNELS)}: native is the chip's "
                        "own (Transformer Engine's cuDNN attention, FlashAttention-3 on Hopper), fa2 FlashAttention-2 "
                        "as it runs on Hopper (PyTorch's scaled_dot_product_attention: TorchTitan, LLM Foundry), "
                        "triton Triton's FlashAttention as it runs on Ampere; their rates over the chip's own, "
                        "forward and backward, are cost.attention_kernels' (default native)")
    p.add_argument("--zero", default="0", help="ZeRO stage 0..3 (1 = Megatron's distributed optimizer, 3 = FSDP)")
    p.add_argument("--dp-shard", type=int, default=0,
                   help="hybrid sharding (PyTorch HSDP, TorchTitan's dp_shard): the ZeRO states sharded over groups "
                        "of this many data-parallel ranks (times cp) and replicated over dp / dp-shard of them, "
                        "which all-reduce their gradient shards once per step (default 0: the whole group)")
    p.add_argument("--overlap", type=float, default=0.0,
                   help="share of the TP and PP communication run beside the GEMMs, 0..1 (Megatron-Core's "
                        "tp_comm_overlap, overlapped P2P; default 0: all exposed)")
    p.add_argument("--ep-overlap", type=float, default=0.0,
                   help="share of the EP all-to-alls hidden, 0..1 (two micro-batches interleaved: Megatron-Core's "
                        "EP overlap, DualPipe; default 0: exposed, since a dispatch feeds its own layer's experts)")
    p.add_argument("--moe-dispatcher", default="alltoall",
                   help=f"MoE token dispatcher, one of {', '.join(MOE_DISPATCHERS)}: alltoall is Megatron-Core's "
                        "all-to-all dispatcher (permute and sort passes of their own), fused its flex dispatcher on "
                        "DeepEP or HybridEP (permutes inside the communication kernels) (default alltoall)")
    p.add_argument("--sp", default="regather",
                   help=f"how tensor parallelism runs, one of {', '.join(SP_MODES)}: regather is Megatron-Core / "
                        "Transformer Engine sequence parallelism (each GEMM input's shard saved and all-gathered "
                        "again in the backward), saved PyTorch DTensor's (TorchTitan: the gathered inputs kept in "
                        "memory, no second gather), off all-reduce TP without sequence parallelism (Megatron-LM "
                        "before 2022) (default regather)")
    p.add_argument("--tokens", type=float, default=0.0, help="tokens to train on: prints days, energy and cost")
    p.add_argument("--json", action="store_true", help="print one JSON object (SI units in the key names)")
    p.add_argument("--allow-infeasible", action="store_true",
                   help=f"print the numbers of a configuration that does not fit memory (else exit {EXIT_INFEASIBLE})")
    p.set_defaults(func=run)


def _examples(target, step, count=2):
    """Multiples of `step` nearest `target` (at least one step)."""
    lo = max(step, target // step * step)
    return " or ".join(str(v) for v in sorted({lo, lo + step})[:count])


def _divisors(n, limit=6):
    return ", ".join([str(d) for d in range(1, n + 1) if n % d == 0][:limit])


def recompute_modules(args) -> list:
    """The --recompute-modules names, in the order given."""
    return [mod.strip() for mod in args.recompute_modules.split(",") if mod.strip()]


def moe_host(args) -> tuple:
    """(layer s, expert s) of --moe-host, or a one-line SpecError."""
    try:
        layer, expert = (float(x) for x in args.moe_host.split(","))
    except ValueError:
        raise SpecError(f"--moe-host must be LAYER_S,EXPERT_S (two numbers of seconds), "
                        f"got {args.moe_host!r}") from None
    if not (0.0 <= layer < 1.0 and 0.0 <= expert < 1.0):
        raise SpecError(f"--moe-host seconds must lie in [0, 1), got {args.moe_host}")
    return layer, expert


def validate(args, model) -> int:
    """One-line SpecErrors for flags that cannot describe a job; returns dp."""
    choice("--dtype", args.dtype, TRAIN_DTYPES)
    choice("--recompute", args.recompute, RECOMPUTE)
    for mod in recompute_modules(args):
        choice("--recompute-modules", mod, RECOMPUTE_MODULES)
    moe_host(args)
    choice("--moe-dispatcher", args.moe_dispatcher, MOE_DISPATCHERS)
    choice("--sp", args.sp, SP_MODES)
    choice("--attention-kernel", args.attention_kernel, ATTENTION_KERNELS)
    choice("--zero", args.zero, ZERO)
    for flag in SHARE_FLAGS:
        v = getattr(args, flag)
        if not 0.0 <= v <= 1.0:
            raise SpecError(f"--{flag.replace('_', '-')} must lie in [0, 1], got {v:g}")
    if not (math.isfinite(args.tokens) and args.tokens >= 0):  # 0: no time-to-train lines
        raise SpecError(f"--tokens must be a number of tokens to train on, >= 0 (e.g. 1.5e13), got {args.tokens:g}")
    for flag in ("chips", "tp", "pp", "vp", "cp", "ep", "global_batch", "micro_batch", "seq"):
        if getattr(args, flag) <= 0:
            raise SpecError(f"--{flag.replace('_', '-')} must be a positive whole number, got {getattr(args, flag)}")
    mp = args.tp * args.pp * args.cp
    if args.chips % mp:
        raise SpecError(f"--chips {args.chips} is not divisible by tp·pp·cp = {mp}; e.g. --chips "
                        f"{_examples(args.chips, mp)}")
    dp = args.chips // mp
    layers, heads, experts = int(model.layers), int(model.heads), int(model.experts)
    if heads % args.tp:
        raise SpecError(f"--tp {args.tp} does not divide the model's {heads} attention heads; e.g. --tp "
                        f"{_divisors(heads)}")
    if args.ep > 1 and experts == 0:
        raise SpecError(f"--ep {args.ep}: {args.model} has no experts; use --ep 1")
    if args.etp is not None and args.etp != args.tp and experts == 0:
        raise SpecError(f"--etp {args.etp}: {args.model} has no experts; leave --etp out")
    if args.etp is not None and (args.etp <= 0 or args.tp % args.etp):
        raise SpecError(f"--etp {args.etp} must divide --tp {args.tp}; e.g. --etp {_divisors(args.tp)}")
    fold = _fold(args)
    if args.ep % fold:
        raise SpecError(f"--ep {args.ep} must be a multiple of tp/etp = {fold} (the experts are split over the tp "
                        f"ranks); e.g. --ep {fold * max(args.ep // fold, 1)}")
    if dp % (args.ep // fold) or (experts and experts % args.ep):
        fit = [d * fold for d in range(1, dp + 1) if dp % d == 0 and (not experts or experts % (d * fold) == 0)]
        folds = (fold == 1 and args.tp > 1 and args.ep % args.tp == 0 and dp % (args.ep // args.tp) == 0
                 and not (experts and experts % args.ep))
        raise SpecError(f"--ep {args.ep} must divide the data-parallel degree {dp} (chips / (tp·pp·cp))"
                        + (f" times tp/etp = {fold}" if fold > 1 else "")
                        + (f" and the model's {experts} experts" if experts else "")
                        + f"; e.g. --ep {', '.join(map(str, fit[-4:]))}"
                        + (" (or --etp 1: the experts split over the tp ranks too, MoE parallel folding)"
                           if folds else ""))
    if args.dp_shard < 0 or (args.dp_shard and dp % args.dp_shard):
        raise SpecError(f"--dp-shard {args.dp_shard} must divide the data-parallel degree {dp}; e.g. --dp-shard "
                        f"{_divisors(dp)}")
    if args.dp_shard and args.zero == "0":
        raise SpecError(f"--dp-shard {args.dp_shard} shards ZeRO states, and --zero 0 has none; use --zero 1, 2 or 3")
    per = args.micro_batch * dp
    if args.global_batch % per:
        raise SpecError(f"--global-batch {args.global_batch} is not divisible by micro-batch × data-parallel degree "
                        f"= {args.micro_batch} × {dp} = {per}; e.g. --global-batch {_examples(args.global_batch, per)}")
    if args.pp > layers:
        raise SpecError(f"--pp {args.pp} exceeds the model's {layers} layers")
    if args.vp > 1 and args.pp * args.vp > layers:
        raise SpecError(f"--vp {args.vp}: more virtual stages than layers per pipeline stage (pp·vp = "
                        f"{args.pp * args.vp} for the model's {layers} layers, {layers / args.pp:g} per stage); "
                        f"at most --vp {max(layers // args.pp, 1)}")
    m = args.global_batch // per
    if args.vp > 1 and m % args.pp:
        raise SpecError(f"--vp {args.vp}: the interleaved schedule needs the micro-batches per step "
                        f"({m} = global batch / (micro-batch × dp)) to be a multiple of --pp {args.pp}; e.g. "
                        f"--global-batch {_examples(args.global_batch, per * args.pp)}")
    if args.cp > 1 and args.seq % (2 * args.cp):
        raise SpecError(f"--seq {args.seq} is not divisible by 2·cp = {2 * args.cp} (ring attention's load-balanced "
                        f"chunks); e.g. --seq {_examples(args.seq, 2 * args.cp)}")
    return dp


def _fold(args) -> int:
    """Parallel.moe_ep of the flags: the expert-parallel ways inside the tp group, tp / etp (1 without --etp)."""
    return args.tp // (args.tp if args.etp is None else args.etp)


def train_workload(args, hw) -> TrainWorkload:
    """The `TrainWorkload` of the flags: dtype recipe, recompute, ZeRO."""
    dtypes = units.DTYPES
    has_fp4 = float(hw.chip.flops[dtypes.index("fp4")]) > float(hw.chip.flops[dtypes.index("fp8")])
    recipe = RECIPES[args.dtype]  # the recipes of a training study's dtype axis (search.train_study)
    block = (32.0 if has_fp4 else 0.0) if recipe[2] < 0 else recipe[2]  # fp8: MXFP8 on Blackwell, per-tensor on Hopper
    return TrainWorkload(global_batch=float(args.global_batch), micro_batch=float(args.micro_batch),
                         seq=float(args.seq), tokens=float(args.tokens),
                         recompute=float(RECOMPUTE.index(args.recompute)), zero=float(args.zero),
                         dp_shard=float(args.dp_shard),
                         bytes_act=recipe[0], compute_dtype=float(dtypes.index(recipe[1])), scale_block=block,
                         ep_overlap=float(args.ep_overlap),
                         **kernel_fields(args.attention_kernel),
                         **dict(zip(("moe_layer_host_s", "moe_expert_host_s"), moe_host(args))),
                         **{f"recompute_{mod}": 1.0 for mod in recompute_modules(args)})


def train_arrays(model, hw, par, twl, topts):
    """Everything `jaxplat train` prints, from one trace (pure; topts static)."""
    return {"metrics": train_step(model, hw, par, twl, topts), "checks": checks(model, par, twl)}


def memory_hints(args) -> str:
    """What would lower the memory per chip, leaving out what the run has already: a higher ZeRO
    stage, more recomputation, a smaller micro-batch, more model parallelism."""
    zero = [f"--zero {z}" for z in (1, 3) if z > int(args.zero)]
    rec = [r for r in ("selective", "full") if RECOMPUTE.index(r) > RECOMPUTE.index(args.recompute)]
    hints = ([" or ".join(zero)] if zero else []) + ([f"--recompute {' or '.join(rec)}"] if rec else [])
    hints += ["a smaller --micro-batch"] if args.micro_batch > 1 else []
    return ", ".join(hints + ["more --tp / --pp"])


def run(args) -> int:
    model = load_model(args.model)
    hw = load_hardware(args.hardware)
    dp = validate(args, model)
    par = fold_experts(Parallel(tp=args.tp, pp=args.pp, vp=args.vp, cp=args.cp, ep=args.ep, dp=dp,
                                overlap=args.overlap), args.tp if args.etp is None else args.etp)
    twl = train_workload(args, hw)
    topts = TrainOptions(moe_dispatcher=args.moe_dispatcher, **sp_options(args.sp))
    res = compiled.run("train", train_arrays, (model, hw, par, twl), (topts,), compiled.cache_dir())
    m = res["metrics"]
    reasons = []
    if not bool(m.fits):
        reasons.append(f"needs {units.fmt_bytes(float(m.memory_bytes))} per chip (weights "
                       f"{units.fmt_bytes(float(m.weights_bytes))}, gradients {units.fmt_bytes(float(m.grads_bytes))},"
                       f" optimizer {units.fmt_bytes(float(m.optimizer_bytes))}, activations "
                       f"{units.fmt_bytes(float(m.activation_bytes))}), has {units.fmt_bytes(float(m.capacity_bytes))}"
                       f"; try {memory_hints(args)}")
    blocked = bool(reasons) and not args.allow_infeasible
    if blocked:
        print(f"jaxplat: infeasible: {'; '.join(reasons)} (exit {EXIT_INFEASIBLE}; --allow-infeasible prints the "
              "numbers anyway)", file=sys.stderr)
    if args.json:
        out = {k: (bool(getattr(m, k)) if k == "fits" else float(getattr(m, k))) for k in JSON_KEYS}
        out.update(model=args.model, hardware=args.hardware, chips=args.chips, dp=dp,
                   etp=args.tp if args.etp is None else args.etp, moe_dispatcher=args.moe_dispatcher, sp=args.sp,
                   attention_kernel=args.attention_kernel,
                   recompute_modules=recompute_modules(args),
                   microbatches=float(m.microbatches),
                   bubble_fraction=float(m.bubble_fraction), capacity_bytes=float(m.capacity_bytes),
                   phases_s={k: float(getattr(m, k)) for k, _ in PHASES},
                   comm_exposed_s={c: float(np.sum(m.comm[i])) for i, c in enumerate(COMM_NAMES)},
                   train_time_s=float(m.train_time_s), train_energy_j=float(m.train_energy_j),
                   train_cost_usd=float(m.train_cost_usd), power_w=float(m.power_w), clock_share=float(m.clock),
                   infeasible_reasons=reasons)
        print(json_text(out))
        return EXIT_INFEASIBLE if blocked else 0
    if blocked:
        return EXIT_INFEASIBLE
    _print_text(args, dp, m, network_level_names(args.hardware), reasons)
    return 0


def _options(args) -> str:
    """The header's non-default options: the overlap shares (SHARE_FLAGS), the MoE dispatcher, --sp,
    the attention kernel, the MoE host time."""
    names = {"overlap": "TP/PP overlap", "ep_overlap": "EP overlap"}
    parts = [f"{names[f]} {getattr(args, f):g}" for f in SHARE_FLAGS if getattr(args, f)]
    if args.moe_dispatcher != "alltoall":
        parts.append(f"MoE dispatcher {args.moe_dispatcher}")
    if args.sp != "regather":
        parts.append(f"sequence parallelism {args.sp}")
    if args.attention_kernel != "native":
        parts.append(f"attention kernel {args.attention_kernel}")
    if moe_host(args) != (MOE_LAYER_HOST_S, MOE_EXPERT_HOST_S):
        parts.append(f"MoE host {args.moe_host} s")
    return "".join(f", {p}" for p in parts)


def _print_text(args, dp, m, levels, reasons):
    step = float(m.step_time_s)
    etp = "" if args.etp is None or args.etp == args.tp else f" etp={args.etp}"
    print(f"{args.model} on {args.hardware} x{args.chips} (tp={args.tp} pp={args.pp} vp={args.vp} cp={args.cp} "
          f"ep={args.ep}{etp} dp={dp}), global batch {args.global_batch} x {args.seq} tokens, micro-batch "
          f"{args.micro_batch} ({float(m.microbatches):g} per step), {args.dtype}, recompute {args.recompute}"
          f"{' + ' + args.recompute_modules if recompute_modules(args) else ''}, "
          f"ZeRO {args.zero}{f' over groups of {args.dp_shard} (HSDP)' if args.dp_shard else ''}{_options(args)}\n")
    rows = [["step time", units.fmt_time(step)],
            ["tokens/s per chip", f"{float(m.tokens_per_s_per_chip):.4g}"],
            ["MFU / HFU", f"{100 * float(m.mfu):.1f}% / {100 * float(m.hfu):.1f}% (6N + attention)"],
            ["memory per chip / capacity", f"{units.fmt_bytes(float(m.memory_bytes))} / "
                                           f"{units.fmt_bytes(float(m.capacity_bytes))}"],
            ["  weights / gradients / optimizer", " / ".join(units.fmt_bytes(float(x)) for x in
                                                             (m.weights_bytes, m.grads_bytes, m.optimizer_bytes))],
            ["  activations (pipeline stash)", units.fmt_bytes(float(m.activation_bytes))],
            ["fits", str(bool(m.fits))],
            ["pipeline bubble", f"{100 * float(m.bubble_fraction):.1f}% of the micro-batches' time, (pp - 1)/(vp·m)"],
            ["power per chip (mean)", f"{float(m.power_w):.0f} W" + (
                f", power-limited: clock {100 * float(m.clock):.0f}% of rated" if float(m.clock) < 0.995 else "")]]
    if args.tokens > 0:
        rows += [[f"to train {args.tokens:.3g} tokens", f"{float(m.train_time_s) / 86400:.4g} days"],
                 ["  energy (IT)", f"{float(m.train_energy_j) / 3.6e9:.4g} MWh"],
                 ["  cost (capex + energy)", f"${float(m.train_cost_usd):,.0f}"]]
    print(table(["metric", "value"], rows, "lr"))
    for r in reasons:
        print(f"  infeasible: {r}")
    print("\nStep time by phase (seconds per step; collectives: the part not hidden by overlap)")
    prow = [[label, units.fmt_time(float(getattr(m, k))), f"{100 * float(getattr(m, k)) / step:.1f}%"]
            for k, label in PHASES]
    comm = np.asarray(m.comm)
    for i, c in enumerate(COMM_NAMES):
        for j, name in enumerate(levels):
            if comm[i, j] > 0:
                prow.append([f"{c} collectives on {name}", units.fmt_time(float(comm[i, j])),
                             f"{100 * float(comm[i, j]) / step:.1f}%"])
    print(table(["phase", "time", "share"], prow, "lrr"))
