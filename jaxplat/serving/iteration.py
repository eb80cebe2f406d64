"""One engine iteration and the capacity of a deployment.

Every time here comes from the operator table (`operators.build_table`) and
its roofline (`inference.row_components`): an engine iteration that decodes
`n_dec` sequences and prefills some prompt chunks is one *merged* table
(`merge_tables`): the decode step's rows and the chunk's prefill rows, with
weights read once (fused GEMMs over all tokens of the iteration, as vLLM,
TensorRT-LLM and SGLang run them) and attention costed per sequence.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jaxplat.cost import OpTable, build_table, energy, evaluate, iteration_overhead, memory, row_components, safe_div
from jaxplat.cost.dtypes import computed_workload
from jaxplat.cost.efficiency import host_time, row_cores, with_host
from jaxplat.cost.inference import pipeline_round
from jaxplat.cost.operators import NUMERIC, OpKind, kind_mask
from jaxplat.cost.stages import microbatching, stage_paths
from jaxplat.model import Hardware, Model, Options, Parallel, Workload, replace
from jaxplat.serving.footprint import activation_reserve
from jaxplat.serving.settings import Serving


def capacity(model: Model, hw: Hardware, par: Parallel, wl: Workload, srv: Serving,
             opts: Options = Options(), token_budget=None):
    """Largest batch whose weights, activations and KV cache fit per chip.

    KV pool = mem_fraction x (device memory - weights - activations), activations
    of one iteration at `token_budget` tokens (default srv.budget;
    TensorRT-LLM reserves them before sizing its KV pool). Each sequence
    holds prompt + output tokens of KV (beams share the prompt) with fixed
    lengths, its time-average length with spread ones, in whole blocks of
    srv.kv_block tokens (paged attention; Kwon et al., SOSP 2023).
    With attention data parallel over par.ep ranks (Parallel.ep) each rank
    holds the KV of its own sequences only, so the replica holds ep times
    what one chip's pool does. Capped by srv.max_batch when that is > 0.
    Returns (max_batch, kv_bytes_per_sequence on the chip that holds it,
    kv_pool_bytes per chip), floats.
    """
    budget = srv.budget if token_budget is None else token_budget
    one = evaluate(model, hw, par, replace(wl, batch=1.0), opts)
    act = activation_reserve(model, hw, par, wl, budget, opts)
    # Engines keep the KV cache in device memory (HBM): a host level behind it
    # (GH200's LPDDR over NVLink-C2C) holds it only where the weights
    # themselves spill there (SambaNova's DDR), not by default.
    w = one.weights_bytes
    room = jnp.where(w + act <= hw.memory.size[0], hw.memory.size[0], one.capacity_bytes)
    pool = jnp.maximum(srv.mem_fraction * (room - w - act), 0.0)
    # Paged KV grows with each sequence. Clients in step (fixed lengths)
    # reach prompt + output together, so each needs all of it; with spread
    # lengths the running sequences are at every stage and hold, on average
    # over time, prompt + E[O^2] / (2 E[O]) (length-biased, as queueing's
    # context).
    full = wl.prompt + wl.beams * wl.output
    spread = (srv.prompt_cv > 0) | (srv.output_cv > 0)
    tokens = jnp.where(spread, wl.prompt + wl.beams * wl.output * (1.0 + srv.output_cv ** 2) / 2.0, full)
    blk = jnp.maximum(srv.kv_block, 1.0)
    paged = jnp.where(srv.kv_block > 0, jnp.ceil(tokens / blk) * blk, tokens) / full
    kv_seq = one.kv_bytes * paged
    # `one` holds ceil(1 / ep) = 1 sequence on its rank: the pool's sequences
    # are one rank's, and each of the ep ranks has such a pool.
    b = jnp.floor(safe_div(pool, kv_seq))
    if opts.smooth:  # straight-through floor: exact forward, gradient of the ratio
        raw = safe_div(pool, kv_seq)
        b = raw + jax.lax.stop_gradient(b - raw)
    b = b * par.ep
    b = jnp.where(srv.max_batch > 0, jnp.minimum(b, srv.max_batch), b)
    return b, kv_seq, pool


# Columns that describe a row rather than its work: kept by `merge_tables`.
_KEPT = ("count", "stage", "on_a", "on_w", "on_o", "comm_n", "comm_s", "k", "n", "problems")


def merge_tables(dec: OpTable, pre: OpTable) -> OpTable:
    """One engine iteration: the decode table's rows fused with the prefill's.

    Rows with the same name (GEMMs, norms, collectives...) run once over
    all tokens: FLOPs, activation bytes, GEMM m and collective payloads add,
    weight bytes are read once (max). Structural columns that say how often
    and where a row runs (count, stage, on-chip flags, the collective's group
    size comm_n and rank stride comm_s, GEMM k and n) are the same in both
    tables and are kept (max), never added. Rows only in one table are kept.
    Names are static, so the row matching happens at trace time.
    """
    index = {n: i for i, n in enumerate(dec.names)}
    extra = [i for i, n in enumerate(pre.names) if n not in index]
    where = np.full(len(dec.names), -1)
    for i, n in enumerate(pre.names):
        if n in index:
            where[index[n]] = i
    has = jnp.asarray(where >= 0, jnp.float32)
    take = np.maximum(where, 0)
    cols = {}
    for key in NUMERIC:
        d, p = getattr(dec, key), getattr(pre, key)
        pm = p[take] * has
        if key in ("w0", "w1", "stored"):
            merged = jnp.maximum(d, pm)
        elif key in _KEPT:
            merged = jnp.where(has > 0, jnp.maximum(d, pm), d)
        else:
            merged = d + pm
        cols[key] = jnp.concatenate([merged, p[np.array(extra, int)]]) if extra else merged
    names = tuple(dec.names) + tuple(pre.names[i] for i in extra)
    groups = tuple(dec.groups) + tuple(pre.groups[i] for i in extra)
    op_kinds = tuple(dec.kinds) + tuple(pre.kinds[i] for i in extra)
    kinds = tuple(dec.comm_kinds) + tuple(pre.comm_kinds[i] for i in extra)
    comm_groups = tuple(dec.comm_groups) + tuple(pre.comm_groups[i] for i in extra)  # same labels: same groups
    return OpTable(**cols, names=names, groups=groups, kinds=op_kinds, comm_kinds=kinds, comm_groups=comm_groups)


def _prefill_attention(model, par, wl, opts, chunk, ctx0, copies):
    """KV-row columns of prompt chunks: [chunks] tokens after ctx0 cached ones.

    FLOPs and activation bytes of causal attention over a chunk are the
    difference of the whole-prefix totals (pairs(c0 + C) - pairs(c0)); the
    chunk reads the KV of all c0 + C tokens once (FlashAttention streams it
    per query block). `copies` [chunks]: identical sequences per entry.
    Returns a dict of [rows] columns summed over chunks.
    """
    def cols(p):
        t = build_table(model, par, replace(wl, batch=1.0, prompt=p, beams=1.0), "prefill", opts)
        return {k: getattr(t, k) for k in ("f0", "a0", "w0", "o0", "queries")}
    both = jax.vmap(cols)(jnp.concatenate([ctx0 + chunk, ctx0]))
    k = chunk.shape[0]
    hi = {key: v[:k] for key, v in both.items()}
    lo = {key: v[k:] for key, v in both.items()}
    busy = (chunk > 0)[:, None]
    n = copies[:, None]
    out = {k: jnp.sum(jnp.where(busy, n * (hi[k] - lo[k]), 0.0), axis=0) for k in ("f0", "a0", "o0", "queries")}
    out["w0"] = jnp.sum(jnp.where(busy, n * hi["w0"], 0.0), axis=0)
    return out


def iteration_table(model, par, wl, opts, n_dec, ctx_dec, chunk, ctx0, copies=None, logits=1.0) -> OpTable:
    """Merged table of one iteration (see `iteration_time`)."""
    copies = jnp.ones_like(chunk) if copies is None else copies
    dec = build_table(model, par, replace(wl, batch=n_dec, prompt=ctx_dec, beams=1.0), "decode", opts)
    tokens = jnp.sum(copies * chunk)
    prompts = jnp.sum(copies * (chunk > 0))
    # Attention data parallel over par.ep ranks (Parallel.ep): each rank
    # prefills its own prompts, so up to ep ranks share the iteration's
    # prompt tokens (mean field: `spread` ranks, tokens / spread each; the
    # experts then see all of them, tokens / ep per rank: operators._moe's
    # tok_mean, ranks without a prompt routing nothing). One prompt
    # stays on one rank, as `evaluate`'s TTFT at batch 1; ep = 1: spread 1.
    spread = jnp.clip(prompts, 1.0, par.ep)
    seqs = prompts * logits / spread
    pre = build_table(model, par, replace(wl, batch=spread, prompt=tokens / spread, beams=1.0), "prefill", opts)
    attn = {k: v / spread for k, v in _prefill_attention(model, par, wl, opts, chunk, ctx0, copies).items()}
    kv = jnp.asarray(kind_mask(pre, OpKind.ATTENTION + (OpKind.SCAN,)))
    # LM head: one logit row per finished prompt, not per token (the table at
    # batch 1 has one); scale it, and the all-gather of its logits, by the prompts in the iteration.
    head = jnp.asarray(kind_mask(pre, (OpKind.WIDE_GEMM, OpKind.COLLECTIVE))
                       * np.array([g == "lm_head" for g in pre.groups], np.float32))
    scale = 1.0 + head * (seqs - 1.0)
    changes = {k: jnp.where(kv > 0, attn[k], getattr(pre, k) * (1.0 if k == "w0" else scale))
               for k in ("f0", "a0", "w0", "o0")}
    changes["m"] = pre.m * scale
    changes["queries"] = jnp.where(kv > 0, attn["queries"], pre.queries)  # the chunks' queries: their own tiles
    # attention rows: one (sequence, head) problem per prefilling sequence and head
    changes["problems"] = jnp.where(kv > 0, pre.problems * prompts / spread, pre.problems)
    changes["comm_b"] = pre.comm_b * scale
    pre = replace(pre, **changes)
    return merge_tables(dec, pre)


# Nested jit: a caller's trace (serving models price a table or an iteration several
# times, at the same shapes) traces it once and lowers one function; XLA inlines the calls.
@functools.partial(jax.jit, static_argnames=("opts",))
def iteration_time(model: Model, hw: Hardware, par: Parallel, wl: Workload, opts: Options,
                   n_dec, ctx_dec, chunk, ctx0, copies=None, logits=1.0):
    """Seconds of one engine iteration on one replica.

    Args:
      n_dec: sequences decoding one token (float scalar).
      ctx_dec: their mean KV length including the new token (attention is
        linear in it, so the mean gives the sum of their reads).
      chunk: [k] prompt tokens prefilled this iteration per sequence (0 =
        none). ctx0: [k] tokens of those prompts already in the KV cache.
      copies: [k] identical sequences per entry (default 1).
      logits: LM-head rows per prefilling sequence (1; k + 1 to verify
        speculative drafts).
    Returns:
      float scalar seconds (exact or smooth roofline per row, as `evaluate`),
      held to the chips' TDP as `evaluate`'s phases are (energy.clock_share),
      the chip's per-iteration overhead included (efficiency.iteration_overhead),
      and the host's per-sequence work (efficiency.host_time) as the software
      stack runs it beside the device (efficiency.with_host).
    With n_dec = 0 and one chunk (P, 0) this is `evaluate`'s TTFT at batch 1;
    with no chunk it is its decode step at context ctx_dec, pipeline included.

    Pipeline parallelism: the engine keeps par.microbatches micro-batches in
    flight (vLLM's pp virtual engines), each with 1/nmb of the decodes and
    of the prompt work, and every sequence advances once per round of all
    of them: max(one pass, nmb x the busiest stage), `evaluate`'s decode rule.
    """
    wl = computed_workload(hw, wl, opts)  # the dtype the chip's GEMMs run in
    nmb, _ = microbatching(par, replace(wl, batch=jnp.maximum(n_dec, 1.0)), opts)
    copies = jnp.ones_like(chunk) if copies is None else copies
    table = iteration_table(model, par, wl, opts, n_dec, ctx_dec, chunk, ctx0, copies / nmb, logits)
    wl0 = replace(wl, output=0.0)
    prices = memory.byte_prices(table, hw, wl0, wl0.output, opts.hierarchy)
    c0, _, m0, _, comm = row_components(table, hw, wl0, opts, prices=prices)
    p = None if not opts.smooth else 20.0
    t = row_cores(table, hw, opts, c0, m0, p) + comm
    kernels = pipeline_round(jnp.sum(table.count * t), nmb * jnp.sum(table.stage * t), p)
    if opts.conv.power_limit:
        # Held to the chips' TDP, as `evaluate`'s phases are (energy.clock_share): the replica's
        # tp·ep·cp paths and nmb micro-batches of the table's work, on tp·ep·cp·pp chips.
        paths = stage_paths(par)
        joules = paths * nmb * energy.dynamic_energy(table, hw, wl0, opts, 1.0, 0.0, prices)
        kernels = safe_div(kernels, energy.clock_share(joules, kernels, hw, paths * par.pp))
    gpu = kernels + iteration_overhead(hw, opts, par.tp)
    # The host's per-sequence work for the next iteration runs while the GPU
    # runs this one (TensorRT-LLM's overlap scheduler, SGLang's): the longer
    # of the two paces the engine. Each attention-data-parallel rank has its
    # own scheduler process and sequences (Parallel.ep).
    sequences = (n_dec + jnp.sum(copies * (chunk > 0))) / par.ep
    return with_host(gpu, host_time(hw, opts, sequences), hw, p)


def decode_time(model, hw, par, wl, opts, n_dec, ctx):
    """One decode-only iteration of n_dec sequences at mean context ctx, s."""
    z = jnp.zeros((1,), jnp.float32)
    return iteration_time(model, hw, par, wl, opts, n_dec, ctx, z, z)
