"""Serving options of `jaxplat estimate` (--rate, --concurrency, --max-batch,
--chunk, --max-num-tokens, --kv-block, --prefill-first, --disagg, --draft) and the JSON
fields they add.

estimate.py calls `add_arguments(parser)` when it builds its parser. A call
has three parts, so that the serving model runs in the compiled call that
evaluates (cli.compiled): `plan` reads and checks the flags on the host (what
to compute, static, and the numbers it needs, traced), `serving_arrays`
computes (traceable), `serving_result` makes the JSON fields. `serving_json`
runs the three.
"""

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxplat import serving
from jaxplat.model import Options, Parallel, load_model, replace
from jaxplat.report import table
from jaxplat.specs import SpecError, units


def add_arguments(p) -> None:
    """Add the serving flags to an argparse parser."""
    g = p.add_argument_group("serving (continuous batching under load)")
    g.add_argument("--rate", type=float, default=None,
                   help="Poisson arrival rate, requests/s per replica; 0 = offline max load "
                        "(adds max_batch and throughput_tok_s at that batch). With a rate > 0: TTFT/TPOT "
                        "percentiles and goodput_req_s, the highest arrival rate per replica at which 90%% of "
                        "requests meet both the TTFT and the TPOT SLO of the workload (DistServe's goodput)")
    g.add_argument("--concurrency", type=int, default=None,
                   help="closed loop: N clients over the deployment, each sending its next request when its "
                        "last ends (vllm bench serve --max-concurrency); reports ttft_s, tpot_s, throughput_tok_s")
    g.add_argument("--max-batch", type=int, default=0,
                   help="cap on running sequences (default: as many as the KV cache holds)")
    g.add_argument("--max-num-tokens", type=int, default=int(serving.DEFAULT_TOKEN_BUDGET),
                   help="tokens per iteration with whole prompts, decodes included (TensorRT-LLM max_num_tokens; "
                        f"default {int(serving.DEFAULT_TOKEN_BUDGET)})")
    g.add_argument("--kv-block", type=int, default=0,
                   help="KV-cache block in tokens (paged attention: vLLM 16, TensorRT-LLM 32; default 0: none)")
    g.add_argument("--chunk", type=int, default=0,
                   help="chunked prefill: token budget per iteration, decodes included (default: whole prompts)")
    g.add_argument("--prefill-first", action="store_true",
                   help="iterations with waiting prompts run only prefills and decodes wait (vLLM V0 without "
                        "chunked prefill, SGLang without --enable-mixed-chunk); with --concurrency and fixed "
                        "lengths the clients then move in one wave (default: prompts join the decodes' iterations)")
    g.add_argument("--mem-fraction", type=float, default=serving.DEFAULT_MEM_FRACTION,
                   help=f"usable fraction of free memory for the KV cache (default {serving.DEFAULT_MEM_FRACTION})")
    g.add_argument("--disagg", metavar="NP:ND[:TP_P:TP_D]", default=None,
                   help="disaggregated prefill/decode pools: NP prefill and ND decode replicas, "
                        "optional TP degrees of each pool (default: --tp)")
    g.add_argument("--draft", metavar="MODEL|ngram|mtp", default=None,
                   help="speculative decoding: a draft model spec, 'ngram' (free drafts) or 'mtp' (one-layer heads)")
    g.add_argument("--draft-k", type=int, default=4, help="draft tokens per step (default 4)")
    g.add_argument("--acceptance", type=float, default=0.7, help="per-token acceptance rate (default 0.7)")


def _disagg(spec: str, tp: int):
    parts = spec.split(":")
    try:
        nums = [int(x) for x in parts]
    except ValueError:
        raise SpecError(f"--disagg expects NP:ND[:TP_P:TP_D] integers, got {spec!r}") from None
    if len(nums) not in (2, 4) or min(nums) <= 0:
        raise SpecError(f"--disagg expects 2 or 4 positive integers NP:ND[:TP_P:TP_D], got {spec!r}")
    return nums if len(nums) == 4 else nums + [tp, tp]


# JSON key of `serving_json` -> the label `serving_table` prints (the value gets its unit there).
LABELS = {
    "max_batch": "largest batch the KV cache holds (sequences)",
    "throughput_tok_s": "throughput at that batch (offline, max load)",
    "ttft_mean_s": "TTFT mean", "ttft_p50_s": "TTFT p50", "ttft_p99_s": "TTFT p99",
    "tpot_mean_s": "TPOT mean", "tpot_p50_s": "TPOT p50", "tpot_p99_s": "TPOT p99",
    "e2e_p99_s": "end-to-end latency p99", "stable": "keeps up with the arrivals",
    "goodput_req_s": "goodput: highest rate with 90% of requests within both SLOs",
    "goodput_note": "why the goodput is 0",
    "spec_tpot_s": "TPOT with speculative decoding", "spec_speedup": "speculative decoding speed-up",
    "spec_batch": "batch of the speculative estimate (sequences)",
    "energy_per_token_j": "energy per output token at that load", "power_w": "average power at that load",
    "cost_per_mtok_usd": "cost per million output tokens at that load",
    "cost_basis": "load the energy and cost are priced at",
}


def serving_table(served: dict) -> str:
    """The serving fields as a table: human labels, values with units."""
    unstable = served.get("stable") is False
    rows = []
    for k, v in served.items():
        if unstable and k.endswith("_s") and not k.endswith("req_s"):
            text = "unbounded (arrivals exceed capacity)"
        else:
            text = _human(k, v)
        rows.append([LABELS.get(k, k), text])
    return table(["metric", "value"], rows, "lr")


def _human(key: str, value) -> str:
    """A serving JSON value with its unit (key suffixes carry SI units)."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str):
        return value
    if key.endswith("_tok_s"):
        return f"{value:.4g} tokens/s"
    if key.endswith("_req_s"):
        return f"{value:.4g} requests/s"
    if key.endswith("_s"):
        return units.fmt_time(value)
    if key == "energy_per_token_j":
        return f"{value:.4g} J"
    if key == "power_w":
        return f"{value:.4g} W"
    if key == "cost_per_mtok_usd":
        return f"${value:.4g}"
    if key == "spec_speedup":
        return f"{value:.3g}x"
    return f"{value:.4g}"


def goodput_note(model, hw, par, wl, srv, opts, mb) -> str:
    """Why the goodput is 0: which SLO the p90 latency misses even at a
    negligible load (1e-4 requests/s, goodput's lowest rate)."""
    return _note_text(jax.device_get(serving.queueing_jit(model, hw, par, wl, _unloaded(srv), opts, mb)), wl)


def _unloaded(srv):
    """`srv` at goodput's lowest rate, 1e-4 requests/s (goodput_note): the
    case goodput's own check at that rate runs (its budget, blocks, lengths)."""
    return replace(srv, rate=jnp.full_like(srv.rate, 1e-4))


def _note_text(sm, wl) -> str:
    if not bool(sm.stable):
        return "even 1e-4 requests/s is more than this deployment keeps up with"
    missed = [f"p90 {name} {units.fmt_time(float(v))} > SLO {units.fmt_time(float(t))}"
              for name, v, t in (("TTFT", sm.ttft_p90, wl.ttft_slo), ("TPOT", sm.tpot_p90, wl.tpot_slo))
              if float(v) > float(t)]
    return ("no request meets the SLOs even unloaded (1e-4 requests/s): " + "; ".join(missed) if missed else
            "no rate in [1e-4, 1e4] requests/s meets the SLOs")


class Plan(NamedTuple):
    """What the serving flags ask to compute (static: part of the compiled
    program's key). rate: an arrival rate > 0 (queueing); goodput: with
    rate, without disagg; draft: "" (none), "ngram", "mtp" or "model"."""

    concurrency: bool
    rate: bool
    disagg: bool
    goodput: bool
    draft: str


def plan(args, model, par: Parallel, wl, warnings=None):
    """(Plan, inputs) of the serving flags, or (None, None) when none is
    given. inputs: the traced numbers `serving_arrays` reads (a dict of
    pytrees: the serving workload (one beam), `Serving`, clients, pools,
    draft). Raises SpecError for a bad flag; flags the model does not use as
    given add a line to `warnings` (a list)."""
    warnings = [] if warnings is None else warnings
    if args.rate is None and args.concurrency is None and not (args.max_batch or args.chunk or args.disagg
                                                                or args.draft):
        return None, None
    # Written as "not (ok)" so that NaN, which fails every comparison, is refused too.
    if args.rate is not None and not (0 <= args.rate < math.inf):
        raise SpecError(f"--rate must be a finite number of requests/s >= 0, got {args.rate}")
    if args.concurrency is not None and (not 1 <= args.concurrency < math.inf or args.rate is not None):
        raise SpecError("--concurrency must be a positive number of clients, without --rate")
    for flag in ("max_batch", "chunk", "kv_block"):
        if not getattr(args, flag) >= 0:
            raise SpecError(f"--{flag.replace('_', '-')} must be >= 0, got {getattr(args, flag)}")
    if not args.max_num_tokens >= 1:
        raise SpecError(f"--max-num-tokens must be positive, got {args.max_num_tokens}")
    if not 0 < args.mem_fraction <= 1:
        raise SpecError(f"--mem-fraction must be in (0, 1], got {args.mem_fraction}")
    opts = Options(profile=args.profile)
    if opts.profile != "default":
        raise SpecError("serving flags need --profile default (GenZ has no serving model)")
    if float(wl.beams) != 1.0:
        warnings.append(f"serving models one sequence per request: the workload's {float(wl.beams):g} beams "
                        "are not used under --rate/--max-batch/--chunk/--disagg/--draft")
    rate = float(args.rate or 0.0)
    f32 = np.float32
    inputs = {"wl": replace(wl, beams=1.0),
              "srv": serving.serving(rate=rate, max_batch=args.max_batch, chunk=args.chunk,
                                     mem_fraction=args.mem_fraction, max_num_tokens=args.max_num_tokens,
                                     kv_block=args.kv_block,
                                     prefill_first=float(getattr(args, "prefill_first", False)))}
    concurrency = args.concurrency is not None
    if concurrency:
        inputs["clients"] = f32(args.concurrency)
    disagg = bool(args.disagg) and not concurrency
    if disagg:
        inputs["pools"] = np.asarray(_disagg(args.disagg, int(par.tp)), np.float32)  # NP, ND, TP_P, TP_D
    draft = ""
    if args.draft and not concurrency:
        if not 0.0 <= args.acceptance <= 1.0:
            raise SpecError(f"--acceptance is a per-token probability in [0, 1], got {args.acceptance}")
        if args.draft_k < 1:
            raise SpecError(f"--draft-k must be a positive number of drafted tokens, got {args.draft_k}")
        draft = args.draft if args.draft in ("ngram", "mtp") else "model"
        if draft == "model":
            inputs["draft_model"] = load_model(args.draft)
        else:  # mtp: one decoder layer per head (DeepSeek-V3 MTP); ngram: free drafts
            inputs["draft_fraction"] = f32(1.0 / float(model.layers) if draft == "mtp" else 0.0)
        inputs["draft_k"], inputs["acceptance"] = f32(args.draft_k), f32(args.acceptance)
    return Plan(concurrency=concurrency, rate=rate > 0 and not concurrency, disagg=disagg,
                goodput=rate > 0 and not concurrency and not disagg, draft=draft), inputs


def serving_arrays(model, hw, par: Parallel, inputs: dict, opts: Options, plan: Plan) -> dict:
    """Every number the serving fields report (traceable; `plan`, `opts` static)."""
    wl, srv = inputs["wl"], inputs["srv"]
    if plan.concurrency:
        # Max load is the closed loop with every slot busy (serving.max_load): the clients asked
        # for and a full engine as one vmapped trace, which compiles in half the time of two.
        mb, _, _ = serving.capacity(model, hw, par, wl, srv, opts)
        clients = jnp.stack([jnp.maximum(mb, 1.0), inputs["clients"] / par.dp])
        both = jax.vmap(lambda n: serving.closed_loop(model, hw, par, wl, srv, n, opts, mb))(clients)
        full, closed = (jax.tree.map(lambda x, i=i: x[i], both) for i in (0, 1))
        # Energy and money at the closed loop's own batch and throughput (serving.operating_point).
        point = serving.operating_point(model, hw, par, wl, opts, closed.batch, closed.throughput)
        return {"max_batch": mb, "throughput": full.throughput, "closed": closed, "point": point}
    mb, _, _ = serving.capacity(model, hw, par, wl, srv, opts)
    out = {"max_batch": mb}
    if not plan.rate:
        # Offline max load: the closed loop with every slot busy (serving.max_load), kept whole
        # for the batch its energy and money are priced at. Under a rate nothing reports it, and
        # leaving it out of the trace saves its compile.
        full = serving.closed_loop(model, hw, par, wl, srv, jnp.maximum(mb, 1.0), opts, mb)
        out["throughput"] = full.throughput
        out["point"] = serving.operating_point(model, hw, par, wl, opts, full.batch, full.throughput)
    sm = None
    if plan.disagg:
        n_p, n_d, tp_p, tp_d = (inputs["pools"][i] for i in range(4))
        sm = serving.disaggregated(model, hw, replace(par, tp=tp_p), replace(par, tp=tp_d), wl, srv, n_p, n_d, opts)
    elif plan.goodput:
        # The load asked for and goodput's lowest one (for goodput_note) ride in goodput's own
        # vmapped trace of the queueing model: a second copy of it compiles as long again.
        out["goodput"], q = serving.goodput(model, hw, par, wl, srv, opts, mb,
                                            also=jnp.stack([srv.rate, _unloaded(srv).rate]))
        sm, out["unloaded"] = (jax.tree.map(lambda x, i=i: x[i], q) for i in (0, 1))
    elif plan.rate:
        sm = serving.queueing(model, hw, par, wl, srv, opts, mb)
    if sm is not None:
        out["queue"] = sm
    if plan.draft:
        batch = jnp.maximum(1.0, sm.batch if plan.rate else mb)
        kw = ({"draft_model": inputs["draft_model"]} if plan.draft == "model" else
              {"draft_fraction": inputs["draft_fraction"]})
        spec, plain = serving.speculative_tpot(model, hw, par, wl, opts, batch, inputs["draft_k"],
                                               inputs["acceptance"], **kw)
        out["spec"] = {"tpot": spec, "plain": plain, "batch": batch}
    return out


def serving_result(args, plan: Plan, arrays: dict, inputs: dict, par: Parallel, warnings=None) -> dict:
    """The JSON fields (see `serving_json`) from `serving_arrays`' host values."""
    warnings = [] if warnings is None else warnings
    out = {}
    mb = float(arrays["max_batch"])
    out["max_batch"] = mb
    if args.max_batch and mb < args.max_batch:
        warnings.append(f"--max-batch {args.max_batch} capped at {mb:g}: the KV cache holds no more sequences")
    if plan.concurrency:
        cl = arrays["closed"]
        out.update(concurrency=args.concurrency, ttft_s=float(cl.ttft), tpot_s=float(cl.tpot),
                   throughput_tok_s=float(cl.throughput), request_rate_req_s=float(cl.rate * par.dp),
                   running=float(cl.running))
        out.update(_point_fields(arrays["point"], "closed loop"))
        return out
    if not plan.rate:
        out["throughput_tok_s"] = float(arrays["throughput"])
        out.update(_point_fields(arrays["point"], "offline max load"))
    sm = arrays.get("queue")
    if sm is not None:
        out.update(ttft_p50_s=float(sm.ttft_p50), ttft_p99_s=float(sm.ttft_p99), tpot_p50_s=float(sm.tpot_p50),
                   tpot_p99_s=float(sm.tpot_p99), ttft_mean_s=float(sm.ttft_mean), tpot_mean_s=float(sm.tpot_mean),
                   e2e_p99_s=float(sm.e2e_p99), stable=bool(sm.stable))
    if plan.goodput:
        out["goodput_req_s"] = float(arrays["goodput"])
        if out["goodput_req_s"] == 0.0:
            out["goodput_note"] = _note_text(arrays["unloaded"], inputs["wl"])
    if plan.draft:
        spec = arrays["spec"]
        out.update(spec_tpot_s=float(spec["tpot"]), spec_speedup=float(spec["plain"] / spec["tpot"]),
                   spec_batch=float(spec["batch"]))
    return out


def _point_fields(point, basis: str) -> dict:
    """JSON fields of energy and money at the serving operating point whose
    throughput is reported (serving.operating_point): they replace the
    static batch's, so that cost per token and throughput share one basis."""
    return {"energy_per_token_j": float(point.energy_per_token_j), "power_w": float(point.power_w),
            "cost_per_mtok_usd": float(point.cost_per_mtok_usd), "cost_basis": basis}


def serving_json(args, model, hw, par: Parallel, wl, warnings=None) -> dict:
    """JSON fields of the serving flags (empty when none is given).

    Returns max_batch; with --concurrency the closed loop's ttft_s, tpot_s,
    throughput_tok_s, request_rate_req_s (they replace the static batch's);
    for --rate > 0 ttft_p50_s, ttft_p99_s,
    tpot_p50_s, tpot_p99_s, goodput_req_s (queueing approximation: the
    highest arrival rate per replica at which 90% of requests meet both the
    TTFT and the TPOT SLO; goodput_note says why when it is 0), for --rate 0
    throughput_tok_s at max batch; spec_tpot_s / spec_speedup with --draft;
    disaggregated pools with --disagg. Flags the model does not use as given
    add a line to `warnings` (a list). (`jaxplat estimate` runs `plan`,
    `serving_arrays` and `serving_result` itself, in its one compiled call.)
    """
    warnings = [] if warnings is None else warnings
    p, inputs = plan(args, model, par, wl, warnings)
    if p is None:
        return {}
    opts = Options(profile=args.profile)
    arrays = jax.device_get(jax.jit(serving_arrays, static_argnums=(4, 5))(model, hw, par, inputs, opts, p))
    return serving_result(args, p, arrays, inputs, par, warnings)
