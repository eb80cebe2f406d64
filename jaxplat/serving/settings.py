"""A serving setup (`Serving`: arrival rate, length spread, batch cap, chunk),
its results (`ServingMetrics`), and request-length distributions.

Units: SI (seconds, bytes, requests/s, tokens/s).
"""

import jax
import jax.numpy as jnp

from jaxplat.model import pytree_dataclass

DEFAULT_MEM_FRACTION = 0.9   # vLLM's gpu_memory_utilization default
DEFAULT_TOKEN_BUDGET = 8192.0  # TensorRT-LLM's default max_num_tokens per iteration
SATURATED = 1e4  # s: latency reported for an unstable (overloaded) configuration


@pytree_dataclass
class Serving:
    """How requests arrive and how the engine schedules them (float leaves).

    Attributes:
      rate: Poisson arrival rate, requests/s per replica (0: offline, max load).
      prompt_cv, output_cv: coefficient of variation of the prompt and output
        lengths (log-normal around the workload's prompt/output means; 0 =
        fixed lengths).
      max_batch: cap on running sequences (0: memory capacity decides).
      chunk: token budget per iteration for chunked prefill (Sarathi-Serve,
        Agrawal et al. OSDI 2024; vLLM max_num_batched_tokens), decodes
        included; 0: whole prompts join an iteration (in-flight batching).
      mem_fraction: usable fraction of the memory left after weights and
        activations for the KV cache (TensorRT-LLM
        kv_cache_free_gpu_mem_fraction; vLLM's gpu_memory_utilization).
      slo_quantile: fraction of requests that must meet the SLOs for
        goodput (DistServe, Zhong et al. OSDI 2024, uses 0.9).
      max_num_tokens: tokens one iteration may hold, decodes and prompts
        together, when prompts join whole (TensorRT-LLM max_num_tokens; with
        chunked prefill `chunk` is the budget). The engine reserves the
        activations of an iteration this large before sizing its KV pool.
      kv_block: tokens per KV-cache block (paged attention: vLLM 16,
        TensorRT-LLM 32, SGLang 1); a sequence holds whole blocks. 0: no
        rounding.
      prefill_first: 1 where an iteration with waiting prompts runs only
        prefills and the decodes wait (vLLM V0's default scheduler without
        chunked prefill: "by default, vLLM scheduler prioritizes prefills",
        vLLM docs, performance/optimization, quoted in vllm-project/vllm
        PR #7874; SGLang runs prefill and decode batches apart unless
        --enable-mixed-chunk, off by default, server_args); 0 where prompts
        share iterations with the decodes (TensorRT-LLM in-flight batching,
        vLLM chunked prefill, Sarathi-Serve).
    """

    rate: jax.Array
    prompt_cv: jax.Array
    output_cv: jax.Array
    max_batch: jax.Array
    chunk: jax.Array
    mem_fraction: jax.Array
    slo_quantile: jax.Array
    max_num_tokens: jax.Array
    kv_block: jax.Array
    prefill_first: jax.Array

    @property
    def budget(self):
        """Tokens per iteration: the chunked-prefill budget, else max_num_tokens."""
        return jnp.where(self.chunk > 0, self.chunk, self.max_num_tokens)


def replica_budget(srv: Serving, par):
    """Prompt and decode tokens one replica's iteration holds: srv.budget per
    scheduler, and with attention data parallel (Parallel.ep) one scheduler
    per rank, each batching its own requests (TensorRT-LLM attention DP's
    max_num_tokens and SGLang DP attention's chunked_prefill_size are per
    rank). One prompt stays on its rank: at most srv.budget of it per
    iteration."""
    return srv.budget * par.ep


def serving(rate=0.0, prompt_cv=0.0, output_cv=0.0, max_batch=0.0, chunk=0.0,
            mem_fraction=DEFAULT_MEM_FRACTION, slo_quantile=0.9, max_num_tokens=DEFAULT_TOKEN_BUDGET,
            kv_block=0.0, prefill_first=0.0) -> Serving:
    """Build `Serving` with float32 leaves (one compiled program for all values)."""
    f = lambda x: jnp.asarray(x, jnp.float32)  # noqa: E731
    return Serving(f(rate), f(prompt_cv), f(output_cv), f(max_batch), f(chunk), f(mem_fraction), f(slo_quantile),
                   f(max_num_tokens), f(kv_block), f(prefill_first))


@pytree_dataclass
class ServingMetrics:
    """Latency statistics under load, seconds (mean, p50, p90, p99).

    batch: mean running decodes. utilization: fraction of time a request
    is in the system. stable: the engine keeps up with the arrivals.
    """

    ttft_mean: jax.Array
    ttft_p50: jax.Array
    ttft_p90: jax.Array
    ttft_p99: jax.Array
    tpot_mean: jax.Array
    tpot_p50: jax.Array
    tpot_p90: jax.Array
    tpot_p99: jax.Array
    e2e_mean: jax.Array
    e2e_p50: jax.Array
    e2e_p90: jax.Array
    e2e_p99: jax.Array
    batch: jax.Array
    utilization: jax.Array
    stable: jax.Array


# ------------------------------------------------------------------ lengths

def lognormal_params(mean, cv):
    """(mu, sigma) of a log-normal with this mean and coefficient of variation."""
    s2 = jnp.log1p(cv * cv)
    return jnp.log(mean) - s2 / 2.0, jnp.sqrt(s2)


def lognormal_quantile(mean, cv, z):
    """Quantile at standard-normal score z (cv = 0 gives `mean`)."""
    mu, sigma = lognormal_params(mean, cv)
    return jnp.exp(mu + sigma * z)


def normal_score(q):
    """Standard-normal quantile of a traced probability q in (0, 1)."""
    return jnp.sqrt(2.0) * jax.scipy.special.erfinv(2.0 * q - 1.0)
