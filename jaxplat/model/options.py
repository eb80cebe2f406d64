"""`Options`: the few static choices of the one cost model, and the
accounting `Conventions` a profile stands for.

Each field changes how the operator table is built or which formula is used,
so each new value compiles a new program. Everything numeric is traced.
A profile is data: a named `Conventions` value (`CONVENTIONS`), read by the
cost model field by field, never an `if profile == ...` inside it.
"""

import dataclasses

from jaxplat.model.efficiency_spec import RATIO_MAX
from jaxplat.specs import SpecError


@dataclasses.dataclass(frozen=True)
class Conventions:
    """What the cost model counts and how: the choices on which GenZ's
    accounting (tests/data/genz/CONVENTIONS.md) differs from ours.

    Attributes:
      elementwise: cost element-wise operators (norms, RoPE, softmax,
        activations, residual adds, the KV write). GenZ: no.
      causal_pairs: prefill attention over T(T+1)/2 query-key pairs (causal
        mask). False: the full T² (GenZ).
      heads_over_ep: attention heads (and the vocabulary) split over tp·ep;
        False: over tp, with the ep ranks running attention data parallel.
      scores_on_chip: attention scores stay on chip whatever
        `Options.fused_attention` says (GenZ).
      fused_scores_in_registers: with `Options.fused_attention`, the scores
        stay in the kernel's registers / shared memory and cost no memory
        traffic (FlashAttention); False: charged at the SRAM level (GenZ).
      decode_io_on_chip: decode GEMM inputs/outputs and the query stay on chip (GenZ).
      prefix_once_per_sequence: decode attention over the prompt's KV is
        computed once per sequence, not per beam (a GenZ quirk).
      embedding_gemm: the embedding is a one-hot GEMM in prefill and absent in
        decode (GenZ); False: a table lookup in both.
      lm_head_all_tokens: logits for every prompt token (GenZ); False: the last only.
      tied_head_stored: a tied LM head's weights are stored once (False: twice, GenZ).
      moe_accounting: "routed" (tokens routed over all experts, touched
        experts read, load imbalance) or "genz" (GenZ's per-phase formulas).
      mamba_accounting: "scan" (a fused selective scan: the state stays on
        chip, only inputs, outputs and the per-sequence state cross memory;
        Gu & Dao 2023, Sec. 3.3.2) or "genz" (GenZ's Mamba block: the scan as
        seven einsums with their intermediates, hidden size split over tp
        inside the block too, the conv weights counted as the conv state, and
        its empty FFN's width-1 down projection after every Mamba layer).
      microbatching: "asked" (Parallel.microbatches) or "batch_over_pp"
        (GenZ: ub = max(batch // pp, 1)).
      collectives: "hierarchical" (levels, algorithms) or "genz" (flat formulas).
      memory_hierarchy: placement over memory levels and tiling re-reads may
        apply (when `Options.memory_hierarchy`). GenZ: never.
      peak: "per_dtype" (the chip's peak in the compute dtype) or
        "bf16_scaled" (GenZ: the bf16 peak × 2 bytes / bytes per element).
      decode: "exact_sum" (TPOT = the mean step, summed in closed form) or
        "final_step" (GenZ: one step with the KV at prompt + output).
      ttft: "last_microbatch" (pipeline fill included) or "one_microbatch" (GenZ).
      footprint: "busiest_stage" (per chip, KV of every micro-batch in
        flight) or "summed_stages" (GenZ: weights and one micro-batch's KV
        summed over stages, held against pp chips' off-chip memory).
      mla: multi-head latent attention is modelled (GenZ does not).
      local_attention: sliding-window / chunked local layers
        (Model.local_layers) attend over their window and hold its KV only.
        GenZ: every layer attends to the whole context.
      power_limit: a phase whose average power would exceed the chips' TDP
        runs at the lower clock that holds it there (cost.energy.clock_share).
        GenZ: no.
      wide_collectives: the hidden states that cross the network (TP
        all-reduce, pipeline send, MoE combine) are 16-bit when the
        activation dtype is narrower: FP8/FP4 GEMMs write 16-bit outputs and
        engines all-reduce them so. Memory traffic stays at the activation
        dtype (engines fuse the element-wise ops that would move the 16-bit
        tensors: residual + norm + quantize, gated activations). GenZ: every
        activation at the activation dtype.
      wide_head: the LM head, the embedding table and the MoE router keep
        16-bit weights and run 16-bit GEMMs when the workload's weights or
        activations are narrower: quantized checkpoints leave them out
        (NVIDIA ModelOpt's FP8/NVFP4 exports list lm_head and the MoE gate in
        `exclude_modules`; llm-compressor recipes `ignore` lm_head; DeepSeek-V3
        report, Sec. 3.3.1, keeps the embedding, output head and gating in
        BF16/FP32; gpt-oss's `modules_to_not_convert`). GenZ: every weight at
        the workload's dtype.
      efficiency: "shape" (each operator's efficiency from its shape, dtype
        and kernel kind, plus kernel and per-iteration latencies:
        jaxplat.cost.efficiency) or "flat" (GenZ: one compute and one memory
        fraction for every operator).
    """

    elementwise: bool = True
    causal_pairs: bool = True
    heads_over_ep: bool = False
    scores_on_chip: bool = False
    fused_scores_in_registers: bool = True
    decode_io_on_chip: bool = False
    prefix_once_per_sequence: bool = False
    embedding_gemm: bool = False
    lm_head_all_tokens: bool = False
    tied_head_stored: bool = True
    moe_accounting: str = "routed"
    mamba_accounting: str = "scan"
    microbatching: str = "asked"
    collectives: str = "hierarchical"
    memory_hierarchy: bool = True
    peak: str = "per_dtype"
    decode: str = "exact_sum"
    ttft: str = "last_microbatch"
    footprint: str = "busiest_stage"
    mla: bool = True
    local_attention: bool = True
    power_limit: bool = True
    wide_collectives: bool = True
    wide_head: bool = True
    efficiency: str = "shape"


# GenZ 0.0.16's accounting (tests/data/genz/CONVENTIONS.md; GenZ-LLM-Analyzer).
GENZ = Conventions(elementwise=False, causal_pairs=False, heads_over_ep=True, scores_on_chip=True,
                   fused_scores_in_registers=False,
                   decode_io_on_chip=True, prefix_once_per_sequence=True, embedding_gemm=True,
                   lm_head_all_tokens=True, tied_head_stored=False, moe_accounting="genz",
                   mamba_accounting="genz", microbatching="batch_over_pp", collectives="genz", memory_hierarchy=False,
                   peak="bf16_scaled", decode="final_step", ttft="one_microbatch", footprint="summed_stages",
                   mla=False, local_attention=False, power_limit=False, wide_collectives=False,
                   wide_head=False, efficiency="flat")
CONVENTIONS = {"default": Conventions(), "genz": GENZ}
PROFILES = tuple(CONVENTIONS)


@dataclasses.dataclass(frozen=True)
class Options:
    """Static, hashable options.

    Attributes:
      profile: "default" (our model) or "genz" (GenZ's accounting conventions,
        to reproduce a GenZ user's numbers); names a `Conventions` value.
      smooth: use the smooth twins of max/ceil (p-norm max, straight-through
        ceil) so that gradients reach every input. Exact mode reports.
      fused_attention: FlashAttention-style fusion (Dao et al. 2022): scores
        stay on chip, in the kernel's registers / shared memory
        (Conventions.fused_scores_in_registers; GenZ: at the SRAM level).
        Off: scores go to main memory and back (a naive kernel).
      memory_hierarchy: place weights, KV cache and activations over the
        memory levels (fastest first, spilling down) and charge GEMM operands
        their tiling re-reads for the on-chip buffer
        (memory.byte_prices). Off: the plain roofline (every off-chip
        byte once at main-memory bandwidth). Profiles whose conventions have
        no memory hierarchy (genz) ignore it.
      gemm_overlap: p of the p-norm that joins a weight GEMM's compute and
        memory times (efficiency.overlap_cores): 0, their max (the roofline;
        shipped), or p >= 1, 2^(1/p) x the max at the GEMM's ridge point. A
        modelling variant, static so that the default pays nothing for it
        (experiments/gemm_overlap_variants.py judges it); profiles with flat
        efficiencies (genz) ignore it.
    """

    profile: str = "default"
    smooth: bool = False
    fused_attention: bool = True
    memory_hierarchy: bool = True
    gemm_overlap: float = 0.0

    def __post_init__(self):
        if self.profile not in CONVENTIONS:
            raise SpecError(f"unknown profile {self.profile!r}; allowed: {', '.join(PROFILES)}")
        top = RATIO_MAX["exponent"]  # the bound attention_overlap's exponent has (efficiency_spec)
        if not (self.gemm_overlap == 0.0 or 1.0 <= self.gemm_overlap <= top):
            raise SpecError(f"gemm_overlap is 0 (the max) or an exponent in [1, {top:g}], got {self.gemm_overlap!r}")

    @property
    def conv(self) -> Conventions:
        """The accounting conventions of this profile."""
        return CONVENTIONS[self.profile]

    @property
    def hierarchy(self) -> bool:
        """Whether memory placement and tiling re-reads apply."""
        return self.memory_hierarchy and self.conv.memory_hierarchy
