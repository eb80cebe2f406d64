"""Operator kinds: what kernel each row of an operator table is (`OpTable.kinds`).

Static strings, set where a row is built (jaxplat.cost.operators, ssm), so
that no consumer decides a row's treatment from its name.
"""

import numpy as np


class OpKind:
    """What kernel a row is (static strings, one per row in `OpTable.kinds`).

    Consumers read these, never a row's name: efficiency (which derate a row
    takes), memory (which operand is the KV cache), the serving iteration
    (which rows scale with prompts) and the systolic-array path.
    """

    GEMM = "gemm"                # a weight GEMM in the activations' dtype (projections, FFN, shared experts)
    WIDE_GEMM = "wide_gemm"      # a weight GEMM quantized checkpoints keep in 16 bits (LM head, router,
    #                              GenZ's one-hot embedding; Conventions.wide_head)
    EXPERT_GEMM = "expert_gemm"  # the routed experts' grouped GEMMs (and their resident, idle experts)
    SCORES = "attn_scores"       # attention kernel: Q·K^T over the KV cache (W: the K cache)
    SOFTMAX = "attn_softmax"     # attention kernel: the softmax of the scores
    ATTEND = "attn_values"       # attention kernel: scores·V (W: the V cache, or MLA's latent)
    ELEMENTWISE = "elementwise"  # norms, RoPE, activations, residual adds, MoE permute / weighted sum
    CACHE_WRITE = "cache_write"  # writes this step's K/V or a Mamba layer's state to the cache
    SCAN = "ssm_scan"            # a Mamba selective scan (W: the layer's recurrent state, a cache)
    SSM = "ssm"                  # other state-space kernels: the causal conv, GenZ's scan einsums
    LOOKUP = "lookup"            # the embedding gather (reads one 16-bit table row per token)
    COLLECTIVE = "collective"    # a collective (its kind in `comm_kinds`)

    ATTENTION = (SCORES, SOFTMAX, ATTEND)   # the attention kernel's rows
    KV_READ = (SCORES, ATTEND, SCAN)       # rows whose W operand is a cache (KV or SSM state)
    MATMUL = (GEMM, WIDE_GEMM, EXPERT_GEMM, SCORES, ATTEND)  # rows that carry GEMM dims m, k, n
    ALL = (GEMM, WIDE_GEMM, EXPERT_GEMM, SCORES, SOFTMAX, ATTEND, ELEMENTWISE, CACHE_WRITE, SCAN, SSM,
           LOOKUP, COLLECTIVE)


def kind_mask(table, kinds) -> np.ndarray:
    """[rows] 1.0 where the row's kind is one of `kinds` (static, from `OpTable.kinds`)."""
    kinds = (kinds,) if isinstance(kinds, str) else tuple(kinds)
    return np.array([float(k in kinds) for k in table.kinds], np.float32)


def names_mask(table, names) -> np.ndarray:
    """[rows] 1.0 where the row's name is one of `names` (static, from `OpTable.names`)."""
    return np.array([float(n in names) for n in table.names], np.float32)


__all__ = ["OpKind", "kind_mask", "names_mask"]
