"""One training step on a cluster, from the same operator table as inference.

The forward pass of one micro-batch through the busiest pipeline rank is the
prefill table (`operators.build_table`, phase "prefill", the sequences of one
micro-batch at the training sequence length), priced row by row by the
inference roofline (`inference.row_components`). A training step adds, per
row (times scale the priced forward rows; shapes as in the forward):
  backward   data and weight gradients, 2x a weight GEMM's forward (two
             GEMMs of its size: Narayanan et al. SC'21 Sec. 3.5); attention
             2.5x its forward (FlashAttention-2's backward runs 5 matmuls
             to the forward's 2: Dao 2023, arXiv 2307.08691, Sec. 3.1),
             its exponentials 1x (P recomputed once, Algorithm 2);
             element-wise passes 2x (read the output gradient and the saved
             input, write the input gradient); the embedding 1x (scatter-add).
  recompute  none; selective: the attention core (scores, softmax, values)
             again; full: every layer's forward again (Korthikanti et al.
             2022, arXiv 2205.05198, Sec. 5), with its TP and EP collectives;
             besides either of the first two, Megatron-Core's
             recompute_modules (layernorm, mla_up_proj, moe_act, mlp):
             their rows' forward again (`training_memory.MODULE_ROWS`).
  low precision  FP8/MXFP8/NVFP4/int8 GEMMs run at the chip's peak for that
             dtype through the existing dtype efficiency
             (efficiency.gemm_peak via row_components); the scaling costs a
             memory-bound cast pass per GEMM operand (`SCALING_READS`);
             the routed experts' quantized grouped GEMMs at the training
             kernels' measured rate (`TrainWorkload.eff_moe`).
  optimizer  Adam over this chip's shard, memory-bound (`ADAM_BYTES`).
The table is built for the training step with its LM head over every token
(not the last prompt token) and, with Megatron's sequence parallelism (on
whenever tp > 1), its norms and residual adds split over the tp ranks.

Schedule: m = global batch / (micro-batch x dp) micro-batches per step. A
rank's time per micro-batch t_mb is its forward, backward, recompute and the
exposed collectives; 1F1B and interleaved 1F1B take (m + (p - 1)/v)·t_mb
(bubble (p - 1)/(v·m) of the ideal: Narayanan et al. SC'21 Sec. 2.2), GPipe
(m + p - 1)·t_mb; then the data-parallel gradient sync's exposed part and the
optimizer.

Collectives (all through collectives.collective_time on the chip's network
levels; ranks ordered tp innermost, then cp, then dp (ep inside it), pp
outermost, as Megatron-Core orders its groups, so a group's stride is the
product of the degrees inside it):
  tp  sequence parallel: all-gather + reduce-scatter of the layer's hidden
      states before and after attention and the MLP (Korthikanti Sec. 4.2.2),
      the conjugates in backward and each gathered input gathered again
      there for its weight gradient (`TrainOptions.sp_regather`: Megatron-Core,
      Transformer Engine), again in full recomputation; without it
      all-reduces. The LM head all-gathers its input and all-reduces the
      vocabulary-parallel cross-entropy's 3 fp32 statistics per token in
      the forward (Megatron's vocab_parallel_cross_entropy). Full
      recomputation repeats the layers' collectives, not the embedding's or
      the head's.
  cp  ring attention passes K/V around the cp ranks (the table's K/V
      all-gather bytes) in forward and K/V plus their gradients in backward
      (2x); overlapped with the attention core's compute (Transformer
      Engine's ring attention overlaps each step's send/recv with the
      previous block), so only the excess is exposed.
  ep  all-to-all dispatch and combine of each MoE layer (the table's rows:
      one copy per destination rank), again in backward (and recompute);
      exposed unless `TrainWorkload.ep_overlap` says otherwise (a dispatch
      feeds its own layer's experts); 16-bit hidden states, with the
      permutation passes of `TrainOptions.moe_dispatcher` (`training_moe.moe_dispatch`);
      a fused dispatcher crosses the scale-out network once per remote
      node (`training_comm.fused_ep_comm`).
  pp  a send of the micro-batch's hidden states per virtual stage, forward
      and backward, the sequence-parallel shard (1/tp of it) with SP.
      A share `Parallel.overlap` of them overlaps (overlap 0, the default:
      all exposed). TP (Megatron-Core's tp_comm_overlap, TorchTitan's async
      TP): each layer collective beside the GEMMs it is fused with
      (training_comm.TP_OVERLAP_GEMMS), decomposed into tp chunks of which one runs
      alone, so max(c - g·(tp - 1)/tp, 0) of it shows beside g s of GEMMs;
      the embedding's collective and the cross-entropy statistics have no
      GEMM beside them. PP (overlapped P2P): hidden up to the pass's
      compute time.
  dp  ZeRO 0: all-reduce of the gradients; ZeRO 1/2: reduce-scatter of the
      gradients and all-gather of the updated 16-bit weights (Megatron's
      distributed optimizer); both in buckets, the gradients' overlapped
      with the last micro-batch's backward and the weights' with the first
      micro-batch's forward (Megatron-Core overlap_grad_reduce /
      overlap_param_gather), a share `TrainWorkload.dp_overlap` of the
      shorter of the two hidden. ZeRO 3 (FSDP): every micro-batch gathers
      the weights before its forward and its backward and reduce-scatters
      its gradients, prefetched behind that micro-batch's forward and
      backward. Dense weights over dp·cp (stride tp: context-parallel ranks
      hold the same weights), expert weights over dp·cp / ep (stride tp·ep):
      `training_memory.shard_groups`. Reduce-scatters and all-gathers run as
      NCCL's rings over the whole group (`training_comm.ring_collective`: a
      latency linear in the group, the bytes as the hierarchical form's), one
      call per FSDP unit (a layer) for ZeRO 3 and per Megatron-Core bucket
      (max(4e7, 1e6·dp) parameters) for ZeRO 1/2.
"""

import dataclasses
import functools
import numbers

import jax
import jax.numpy as jnp
import numpy as np

from jaxplat.cost import efficiency, energy, money
from jaxplat.cost import training_memory as tm
from jaxplat.cost.attention_kernels import BACKWARD_ATTENTION, BACKWARD_EXP
from jaxplat.cost.compute import exp_times
from jaxplat.cost.dtypes import computed_workload
from jaxplat.cost.inference import DEFAULT_SHARPNESS, row_components
from jaxplat.cost.memory import capacity_bytes
from jaxplat.cost.operators import OpTable, build_table
from jaxplat.cost.opkind import OpKind, kind_mask, names_mask
from jaxplat.cost.roofline import safe_div
from jaxplat.cost.training_comm import call_costs, dp_comm, micro_batch_comm, step_calls
from jaxplat.cost.training_moe import (
    MOE_EXPERT_HOST_S,
    MOE_LAYER_HOST_S,
    fold_experts,
    folded_experts,
    moe_dispatch,
    moe_host_time,
)
from jaxplat.model import Hardware, Model, Options, Parallel, Workload, pytree_dataclass, replace
from jaxplat.specs.units import DTYPES

RECOMPUTE = ("none", "selective", "full")
SCHEDULES = ("1f1b", "gpipe")
MOE_DISPATCHERS = ("alltoall", "fused")  # TrainOptions.moe_dispatcher
# How tensor parallelism runs (`jaxplat train --sp`): TrainOptions (sequence_parallel, sp_regather) of each
# software: Megatron-Core / Transformer Engine sequence parallelism, gathering each input again in the
# backward; PyTorch DTensor's, keeping the gathered inputs; no sequence parallelism (all-reduce TP).
SP_MODES = {"regather": (True, True), "saved": (True, False), "off": (False, True)}
COMM_NAMES = ("tp", "cp", "ep", "pp", "dp")
BACKWARD_GEMM = 2.0       # data + weight gradient GEMMs (Narayanan et al. SC'21 Sec. 3.5)
BACKWARD_ELEMENTWISE = 2.0
BACKWARD_LOOKUP = 1.0
ADAM_BYTES = 26.0         # per parameter: read fp32 master, m, v (12), write them (12), write the 16-bit weight (2)
# The loss over the logits runs in fp32, memory-bound, per logit (token x vocabulary entry on this chip): PyTorch
# autocast runs log_softmax / nll_loss / cross_entropy in float32 (torch.amp "CUDA ops that autocast to float32"),
# Megatron calls vocab_parallel_cross_entropy(output.float(), ...). Forward: read the 16-bit logits (2), write the
# fp32 copy (4), log-softmax reads it (4) and writes its output (4). Backward: the NLL gradient written (4), the
# log-softmax backward reads it and its output (8) and writes the input gradient (4), the cast back reads it (4)
# and writes the 16-bit gradient the head's GEMMs read (2).
LOSS_FWD_BYTES = 14.0
LOSS_BWD_BYTES = 22.0
# Low-precision scaling: each GEMM operand cast from 16 bits reads 2 bytes and writes its own width
# (+ a block scale per 32 elements for MX formats, OCP MX spec v1.0); per-tensor (current) scaling reads
# the tensor once more for its amax (Transformer Engine's FP8 recipes; Micikevicius et al. 2022,
# arXiv 2209.05433). Operands cast per GEMM and micro-batch: the input (forward), the output gradient
# and the input's transpose (backward): 2·m·k + m·n elements.
SCALING_READS = 2.0
SP_ROWS = ("attn_norm", "attn_residual", "ffn_norm", "ffn_residual", "mamba_norm", "mamba_residual", "final_norm")


def _f32(v):
    return dataclasses.field(default_factory=lambda: jnp.float32(v))


@pytree_dataclass
class TrainWorkload:
    """What one training step does (float32 leaves: sweepable, vmappable).

    global_batch: sequences per step (all data-parallel replicas).
    micro_batch: sequences per micro-batch per data-parallel rank.
    seq: tokens per sequence. tokens: tokens to train on (for the time,
      energy and cost to train; 0: none).
    recompute: 0 none, 1 selective, 2 full (RECOMPUTE).
    recompute_layernorm, recompute_mla_up_proj, recompute_moe_act,
      recompute_mlp: 1 where that module is recomputed in the backward
      besides (Megatron-Core's recompute_modules, `training_memory.MODULE_ROWS`): its
      activations are not kept (`training_memory.module_savings`) and its
      rows' forward runs again; no effect under full recomputation.
    zero: ZeRO stage 0..3 (1 = Megatron's distributed optimizer, 3 = FSDP).
    bytes_act, compute_dtype: GEMM operand bytes and their dtype (an index
      into units.DTYPES): 2 / bf16, 1 / fp8, 0.5 + 1/16 / fp4 (NVFP4).
    scale_block: elements per scale of the low-precision recipe (0:
      per-tensor current scaling, Hopper's FP8; 32: MXFP8; 16: NVFP4).
    bytes_param, bytes_grad, bytes_optim: bytes per parameter of weights,
      gradients and optimizer states (ZeRO paper: 2, 2, 12).
    bytes_grad_comm: bytes per gradient element in the data-parallel
      reduction (4: fp32, Megatron-LM's accumulate_allreduce_grads_in_fp32
      with bf16; 2: bf16).
    dp_shard: data-parallel ranks (times cp) each ZeRO shard group spans
      (hybrid sharding: PyTorch HSDP, TorchTitan's dp_shard): states sharded
      over them and replicated over the dp / dp_shard groups, which all-reduce
      their gradient shards once per step; 0 (default): the whole group.
    dp_overlap: share of the data-parallel collectives hidden behind the
      backward/forward they overlap with, 0..1 (1: Megatron-Core's
      overlap_grad_reduce and overlap_param_gather, FSDP prefetching).
    eff_network: share of each network level's bandwidth the training
      collectives reach (NCCL with large buckets: a ring all-reduce's bus
      bandwidth on 8 H100s is 365-370 of 450 GB/s, NVIDIA/nccl issue 1455,
      0.82); it replaces the chip's calibrated `eff_network`, fitted on
      inference's small all-reduces. 0: the chip's own.
    eff_moe: the training stack's grouped-GEMM rate over a dense GEMM's
      for the routed experts that a low-precision recipe quantizes, in
      (0, 1]; it replaces the chip's calibrated `efficiency.moe`, which a
      calibration may fit on inference engines' rows (the 2026-12-04 fit put
      it at its lower bound, 0.050; the shipped file pins it at 1). Training
      runs grouped GEMMs in the contiguous layout (thousands of tokens per
      expert), which DeepGEMM's kernel measurements put at the dense rate
      (experiments/kernel_check.py: measured/predicted 20.6 at 0.050, so
      1.03; bounded at 1). 0: the chip's own.
    ep_overlap: share of the expert-parallel all-to-alls hidden behind
      compute, 0..1. 0 (default): exposed. A dispatch feeds the experts
      after it and a combine waits for them, so within one micro-batch
      neither runs beside its own layer's compute (`Parallel.overlap` hides
      TP and PP collectives behind the pass's GEMMs); Megatron-Core hides
      them only by interleaving two micro-batches' layers (its EP
      all-to-all overlap), which none of the measured rows' published
      settings names.
    dropout: 1 when the model trains with dropout (its masks are kept for
      the backward: GPT in Megatron), 0 without (Llama and most since).
    backward_efficiency: the backward kernels' achieved rate over the
      forward's, in (0, 1] (data- and weight-gradient GEMMs with transposed
      operands, FlashAttention's backward: 63% of the A100's peak at most
      against 73% forward, Dao 2023 Sec. 4.1); the backward's time is
      divided by it. The default 0.825 is fitted on measured runs (with
      the MoE host time, `training_moe`): the dev rows of
      data/measured/training_2026-12.csv (experiments/training/
      fit_backward.py; grid of 0.025 over its bounds [0.5, 1]; refitted
      after the fp32 loss, the training attention kernel and the dtype
      fallback were modelled: 0.75 before; refitted again after the
      calibration's compute / tile_latency pin of 2026-12-05: unchanged;
      after Megatron's backward re-gather and SC'21's all-reduce TP: 0.775
      to 0.80; after the 16-bit activations outside low-precision GEMMs'
      inputs, `forward_table`: 0.825; after the softmax's exponentials got
      their own time and attention's matmuls theirs, 2026-12-06: 0.80).
    attention_kernel_speed: the training stack's attention kernel's
      matmul rate over the chip's own (calibrated: the kernel written for
      it, as inference engines run), in (0, 1]; it scales the chip's
      attention_compute (the softmax's exponentials stay the chip's). 1:
      the same (Transformer Engine's cuDNN fused attention on Hopper and
      Blackwell). An older kernel generation: FlashAttention-2 on Hopper
      (its Ampere mma.sync instructions cannot use Hopper's wgmma:
      `FA2_ON_HOPPER`), Triton FlashAttention on Ampere
      (`FA_TRITON_ON_AMPERE`).
    attention_backward_speed: that kernel's backward matmul rate over its
      forward's, in (0, 1], beyond `backward_efficiency`: the backward's
      2.5x of the forward's matmul time is divided by it (the exponentials
      are not). 1: as every other backward row (cuDNN's). Fitted for the
      two older kernels on LLM Foundry's dev rows (`FA2_BACKWARD_ON_HOPPER`,
      `FA_TRITON_BACKWARD_ON_AMPERE`; no measured backward of either).
    moe_layer_host_s, moe_expert_host_s: the host time a MoE layer's
      forward and backward leave exposed per micro-batch, seconds per MoE
      layer plus seconds per expert the chip holds (fitted on dev rows:
      training_moe.MOE_LAYER_HOST_S); 0 and 0: none (a stack that captures
      its MoE layers in graphs).
    power_cap_w: the board power limit the run sets below the chip's
      `tdp` (nvidia-smi -pl; 0: none). Where the step would draw more than
      its limit (this cap, else the TDP), the chip's clock drops to
      `energy.clock_share` of its rated one and every row's compute time
      grows by its inverse (memory and network times do not: HBM and links
      keep their own clocks).
    """

    global_batch: jax.Array
    micro_batch: jax.Array
    seq: jax.Array
    tokens: jax.Array = _f32(0.0)
    recompute: jax.Array = _f32(0.0)
    recompute_layernorm: jax.Array = _f32(0.0)
    recompute_mla_up_proj: jax.Array = _f32(0.0)
    recompute_moe_act: jax.Array = _f32(0.0)
    recompute_mlp: jax.Array = _f32(0.0)
    zero: jax.Array = _f32(0.0)
    bytes_act: jax.Array = _f32(2.0)
    compute_dtype: jax.Array = _f32(float(DTYPES.index("bf16")))
    scale_block: jax.Array = _f32(0.0)
    bytes_param: jax.Array = _f32(2.0)
    bytes_grad: jax.Array = _f32(2.0)
    bytes_optim: jax.Array = _f32(12.0)
    bytes_grad_comm: jax.Array = _f32(4.0)
    dp_shard: jax.Array = _f32(0.0)
    dp_overlap: jax.Array = _f32(1.0)
    eff_network: jax.Array = _f32(0.82)
    eff_moe: jax.Array = _f32(1.0)
    ep_overlap: jax.Array = _f32(0.0)
    dropout: jax.Array = _f32(0.0)
    backward_efficiency: jax.Array = _f32(0.80)  # fitted on dev rows: experiments/training/fit_backward.py
    moe_layer_host_s: jax.Array = _f32(MOE_LAYER_HOST_S)
    moe_expert_host_s: jax.Array = _f32(MOE_EXPERT_HOST_S)
    attention_kernel_speed: jax.Array = _f32(1.0)
    attention_backward_speed: jax.Array = _f32(1.0)
    power_cap_w: jax.Array = _f32(0.0)

    def __post_init__(self):
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if isinstance(v, numbers.Number):
                object.__setattr__(self, f.name, jnp.float32(v))


@dataclasses.dataclass(frozen=True)
class TrainOptions:
    """Static choices: the inference `Options` the table is built and priced
    with, the pipeline schedule (SCHEDULES; interleaving is `Parallel.vp`),
    Megatron's sequence parallelism (on: tp > 1 runs it, as Megatron-Core
    and NeMo do; off: Megatron-LM before 2022, the all-reduce after each
    sublayer), whether sequence-parallel GEMMs gather their input again for
    the weight gradients (`sp_regather`, software: Megatron-Core's
    LinearWithGradAccumulationAndAsyncCommunication and Transformer
    Engine's Linear save the input's shard and all-gather it again in the
    backward beside the data-gradient GEMM; False: autograd saves the
    gathered input, as PyTorch DTensor's SequenceParallel does in
    TorchTitan, which holds it in memory instead) and the MoE token
    dispatcher (MOE_DISPATCHERS, software:
    "alltoall", Megatron-Core's all-to-all dispatcher, recommended with
    expert parallelism in its MoE README; "fused", its flex dispatcher on
    DeepEP or HybridEP, whose kernels permute as they send and cross the
    scale-out network once per remote node: `training_moe.moe_dispatch`,
    `training_comm.fused_ep_comm`)."""

    options: Options = Options()
    schedule: str = "1f1b"
    sequence_parallel: bool = True
    sp_regather: bool = True
    moe_dispatcher: str = "alltoall"

    def __post_init__(self):
        if self.schedule not in SCHEDULES:
            raise ValueError(f"unknown schedule {self.schedule!r}; allowed: {', '.join(SCHEDULES)}")
        if self.moe_dispatcher not in MOE_DISPATCHERS:
            raise ValueError(f"unknown MoE dispatcher {self.moe_dispatcher!r}; allowed: {', '.join(MOE_DISPATCHERS)}")


def sp_options(mode: str) -> dict:
    """The TrainOptions fields (sequence_parallel, sp_regather) of an SP_MODES name."""
    seq_par, regather = SP_MODES[mode]
    return {"sequence_parallel": seq_par, "sp_regather": regather}


def sp_mode(options: TrainOptions) -> str:
    """The SP_MODES name of `options` (without sequence parallelism there is nothing to gather again)."""
    return "off" if not options.sequence_parallel else "regather" if options.sp_regather else "saved"


@pytree_dataclass
class TrainMetrics:
    """Results of `train_step`, SI units, per chip unless said.

    step_time_s: one optimizer step. tokens_per_s_per_chip: global batch x
    seq / step time / chips. mfu, hfu: model and hardware FLOPs per second
    over the chips' peak in the training dtype (training_memory
    .model_flops_per_token; hfu adds recomputation). memory_bytes =
    weights + grads + optimizer + activations; capacity_bytes; fits;
    feasible (fits and every `training_memory.checks`). microbatches: m per
    step. bubble_fraction: (p - 1)/(v·m) (GPipe (p - 1)/m).
    Phase seconds per step (they sum to step_time_s): forward, backward,
    recompute, scaling (low-precision casts), host (MoE layers' exposed
    host time: `TrainWorkload.moe_layer_host_s`), optimizer, bubble, and
    comm [len(COMM_NAMES), MAX_NET_LEVELS] exposed collective seconds per
    network level; comm_total [len(COMM_NAMES)] before overlap.
    train_time_s, train_energy_j, train_cost_usd: to train `tokens`
    (whole cluster; energy at the IT level, cost with PUE and capex).
    power_w: average power of one chip.
    clock: share of its rated clock the chip's power limit leaves it
      (energy.clock_share; 1 when it draws under the limit).
    """

    step_time_s: jax.Array
    tokens_per_s_per_chip: jax.Array
    mfu: jax.Array
    hfu: jax.Array
    memory_bytes: jax.Array
    capacity_bytes: jax.Array
    fits: jax.Array
    feasible: jax.Array
    weights_bytes: jax.Array
    grads_bytes: jax.Array
    optimizer_bytes: jax.Array
    activation_bytes: jax.Array
    chips: jax.Array
    microbatches: jax.Array
    bubble_fraction: jax.Array
    forward: jax.Array
    backward: jax.Array
    recompute: jax.Array
    scaling: jax.Array
    host: jax.Array
    optimizer: jax.Array
    bubble: jax.Array
    comm: jax.Array
    comm_total: jax.Array
    model_flops_per_token: jax.Array
    power_w: jax.Array
    train_time_s: jax.Array
    train_energy_j: jax.Array
    train_cost_usd: jax.Array
    clock: jax.Array = dataclasses.field(default_factory=lambda: jnp.float32(1.0))


def train_chips(par: Parallel) -> jax.Array:
    """Chips of a training job: tp·pp·cp·dp (ep is carved out of dp)."""
    return par.tp * par.pp * par.cp * par.dp


def _table_inputs(par: Parallel, twl: TrainWorkload):
    """(Parallel, Workload) the forward table is built with: pp·vp stages
    (a virtual stage's layers), the micro-batch's sequences on each of the
    ep ranks (the table's ep ranks split their batch: ep x micro-batch
    gives each its own micro-batch), 16-bit weights and attention; with a
    low-precision recipe the routed experts' weights cast to its width
    once per step (Transformer Engine caches a weight's FP8 copy across
    micro-batches), so their grouped GEMMs are the quantized ones the
    efficiency model derates (efficiency.quantized_experts)."""
    tpar = Parallel(tp=par.tp, pp=par.pp * par.vp, ep=par.ep, cp=par.cp, imbalance=par.imbalance,
                    moe_ep=par.moe_ep, moe_gather=par.moe_gather)
    inf = jnp.float32(1e30)
    wl = Workload(batch=twl.micro_batch * par.ep, prompt=twl.seq, output=jnp.float32(1.0), beams=jnp.float32(1.0),
                  bytes_weight=twl.bytes_param, bytes_act=twl.bytes_act, bytes_kv=jnp.maximum(twl.bytes_act, 2.0),
                  compute_dtype=twl.compute_dtype, ttft_slo=inf, tpot_slo=inf,
                  bytes_expert_weight=jnp.where(twl.bytes_act < 2.0, twl.bytes_act, 0.0))
    return tpar, wl


def forward_table(model: Model, par: Parallel, twl: TrainWorkload, topts: TrainOptions):
    """(table, workload) of one micro-batch's forward on the busiest rank's
    chip: the prefill table with the LM head over every token and, with
    sequence parallelism, the norms and residual adds over 1/tp tokens;
    activations 16-bit but for the GEMMs' inputs under a low-precision
    recipe."""
    tpar, wl = _table_inputs(par, twl)
    # Low precision in training quantizes the GEMMs' inputs only (Transformer Engine's FP8 recipes, torchao's
    # float8 training; Micikevicius et al. 2022, arXiv 2209.05433, Sec. 4): the GEMMs write 16-bit outputs and
    # every other activation (norms, residual adds, activation functions, attention, the SSM scan, the MoE
    # permutes) stays 16-bit. So the table's activation bytes are 16-bit but for the GEMMs' inputs, which read
    # the quantized copies (`_scaling_time` writes them); its rates stay at the recipe's dtype (`wl`).
    wide = jnp.maximum(twl.bytes_act, 2.0)
    t = build_table(model, tpar, replace(wl, bytes_act=wide), "prefill", topts.options)
    gemm_in = jnp.asarray(kind_mask(t, (OpKind.GEMM, OpKind.EXPERT_GEMM)))
    t = dataclasses.replace(t, a0=t.a0 * jnp.where(gemm_in > 0, twl.bytes_act / wide, 1.0))
    tokens = jnp.ceil(twl.seq / par.cp)  # per sequence on this chip
    # The head's row holds the last token only, unless the profile already counts every token (GenZ).
    head = jnp.asarray(names_mask(t, () if topts.options.conv.lm_head_all_tokens else ("lm_head",)))
    sc = 1.0 + head * (tokens - 1.0)
    if topts.sequence_parallel:
        sc = sc / (1.0 + jnp.asarray(names_mask(t, SP_ROWS)) * (par.tp - 1.0))
    t = dataclasses.replace(t, f0=t.f0 * sc, a0=t.a0 * sc, o0=t.o0 * sc, m=t.m * (1.0 + head * (tokens - 1.0)))
    if "dispatch" in t.names:  # an MoE: its experts' layout, then the dispatcher's token movement
        t = moe_dispatch(folded_experts(t, par), model, par, topts.moe_dispatcher)
    return t, wl


def rank_weights(t: OpTable, par: Parallel) -> jax.Array:
    """[rows] executions per micro-batch on the busiest rank: its vp virtual
    stages' layers (`stage` of a pp·vp-stage table, x vp) and sends; the LM
    head (the last stage, charged as the busiest); the embedding only
    without pipelining (it sits on the first stage, with fewer layers'
    work than the last's head: Megatron-Bridge's uneven splits)."""
    emb = jnp.asarray(names_mask(t, [n for n, g in zip(t.names, t.groups) if g == "embedding"]))
    head = jnp.asarray(names_mask(t, [n for n, g in zip(t.names, t.groups) if g == "lm_head"]))
    layer = 1.0 - emb - head
    return t.stage * (layer * par.vp + head + emb * jnp.where(par.pp > 1.0, 0.0, 1.0))


def _params(t: OpTable, par: Parallel, twl: TrainWorkload):
    """(dense, expert) parameters per chip of the busiest rank (weights
    stored by its rows; embedding and head on different stages when pp > 1)."""
    w = rank_weights(t, par)
    expert = jnp.asarray(names_mask(t, ("experts_up_gate", "experts_down")))
    _, wl = _table_inputs(par, twl)
    return jnp.sum(w * t.stored * (1.0 - expert)) / twl.bytes_param, jnp.sum(w * t.stored * expert) / wl.bytes_experts


def _scaling_time(t: OpTable, hw: Hardware, twl: TrainWorkload, w):
    """Seconds of the low-precision casts of one micro-batch's GEMM operands
    on the rank (0 at 16 bits and wider; SCALING_READS)."""
    gemm = jnp.asarray(names_mask(t, ("qkv", "out_proj", "up_gate", "down", "experts_up_gate", "experts_down",
                                 "shared_up_gate", "shared_down", "q_a", "q_b", "kv_a", "kv_b")))
    elems = jnp.sum(w * gemm * (2.0 * t.m * t.k + t.m * t.n))
    per = SCALING_READS + twl.bytes_act + safe_div(1.0, twl.scale_block) + jnp.where(twl.scale_block > 0, 0.0, 2.0)
    narrow = twl.bytes_act < 2.0
    return jnp.where(narrow, safe_div(elems * per, hw.memory.bandwidth[0] * hw.efficiency.memory), 0.0)


def _loss_times(t: OpTable, hw: Hardware, w):
    """(forward, backward) seconds of the fp32 loss over one micro-batch's
    logits on the rank (the LM head row's tokens x its vocabulary share),
    memory-bound: LOSS_FWD_BYTES and LOSS_BWD_BYTES per logit."""
    head = np.array([t.names.index("lm_head")])
    logits = jnp.sum(w[head] * t.m[head] * t.n[head])
    bw = hw.memory.bandwidth[0] * hw.efficiency.memory
    return logits * LOSS_FWD_BYTES / bw, logits * LOSS_BWD_BYTES / bw


def train_step(model: Model, hardware: Hardware, parallel: Parallel, workload: TrainWorkload,
               options: TrainOptions = TrainOptions(), sharpness=DEFAULT_SHARPNESS) -> TrainMetrics:
    """Cost of one training step (see the module doc). Pure and jitted;
    vmap or grad over any float leaf. `parallel.dp` is the data-parallel
    degree (chips = tp·pp·cp·dp; ep is carved out of dp). `options` static."""
    return _train_step(model, hardware, parallel, workload, options, jnp.asarray(sharpness, jnp.float32))


@functools.partial(jax.jit, static_argnames=("options",))
def _train_step(model, hw, par, twl, options, sharpness) -> TrainMetrics:
    opts = options.options
    p = sharpness if opts.smooth else None
    twl = computed_workload(hw, twl, opts)  # the dtype the chip's GEMMs run in (FP8 on an A100: bf16)
    hw = replace(hw, eff_network=jnp.where(twl.eff_network > 0, twl.eff_network, hw.efficiency.network),
                 eff_moe=jnp.where(twl.eff_moe > 0, twl.eff_moe, hw.efficiency.moe),
                 moe_speed=1.0,  # an inference engine's MoE layers (software.moe_speed): eff_moe is training's
                 eff_attention_compute=(hw.efficiency.attention_compute
                                        * jnp.clip(twl.attention_kernel_speed, 0.05, 1.0)))
    t, wl = forward_table(model, par, twl, options)
    w = rank_weights(t, par)
    loss_fwd, loss_bwd = _loss_times(t, hw, w)
    c0, _, m0, _, _ = row_components(t, hw, wl, opts, p, comm=jnp.zeros_like(t.f0))
    # The clock the chip's power limit leaves it (energy.clock_share), from the forward's dynamic power at the
    # rated clock; the backward and recompute run the same rows. Memory and network keep their own clocks.
    e_fwd = energy.dynamic_energy(dataclasses.replace(t, count=w), hw, wl, opts, 1.0, 0.0)
    core = lambda c: efficiency.row_cores(t, hw, opts, c, m0, p)  # noqa: E731
    clock = energy.clock_share(e_fwd, jnp.sum(w * core(c0)), hw, 1.0, twl.power_cap_w)
    fwd = core(c0 / clock)  # [rows] s, one execution
    attn = jnp.asarray(efficiency.attention_mask(t))
    lookup = jnp.asarray(names_mask(t, ("embedding",)))
    bwd_factor = jnp.where(attn > 0, BACKWARD_ATTENTION, jnp.where(lookup > 0, BACKWARD_LOOKUP, BACKWARD_GEMM))
    # [rows] s, one backward before its efficiency: the rows' factor, except the score rows' exponentials (once)
    exps = exp_times(t, hw, opts)[0] / clock
    attn_speed = jnp.clip(twl.attention_backward_speed, 0.05, 1.0)
    bwd = bwd_factor * (fwd - exps) / jnp.where(attn > 0, attn_speed, 1.0) + BACKWARD_EXP * exps
    once = jnp.asarray(names_mask(t, [n for n, g in zip(t.names, t.groups) if g in ("embedding", "lm_head")]))
    r_full = jnp.where(twl.recompute >= 1.5, 1.0, 0.0)
    r_sel = jnp.where((twl.recompute >= 0.5) & (twl.recompute < 1.5), 1.0, 0.0)
    t_fwd = jnp.sum(w * fwd) + loss_fwd
    t_bwd = jnp.sum(w * bwd) / jnp.clip(twl.backward_efficiency, 0.1, 1.0) + loss_bwd
    attn_fwd = jnp.sum(w * attn * fwd)
    t_rec = (r_full * jnp.sum(w * (1.0 - once) * fwd) + r_sel * attn_fwd
             + (1.0 - r_full) * tm.module_rows(t, twl, w * fwd))
    t_scale = _scaling_time(t, hw, twl, w) * (1.0 + r_full * 0.5)  # full recompute casts the inputs again

    gemms = (fwd, bwd / jnp.clip(twl.backward_efficiency, 0.1, 1.0))  # [rows] s per execution
    attn_bwd = BACKWARD_ATTENTION * attn_fwd / attn_speed  # beside which the CP ring's backward sends run
    dense, expert = _params(t, par, twl)
    costs = call_costs(step_calls(t, hw, par, twl, options, dense, expert, model.top_k), hw, opts, p)  # all at once
    comm = micro_batch_comm(t, hw, par, w, r_full, options, p, (attn_fwd, attn_bwd),
                            (t_fwd, t_bwd, t_rec), gemms, twl.ep_overlap, costs)
    dp_tot, dp_exp, dp_lv, mb_dp_tot, mb_dp_exp, mb_dp_lv = dp_comm(hw, par, twl, dense, expert, t_fwd, t_bwd,
                                                                     opts, jnp.ceil(model.layers / par.pp), costs)
    mb_comm_lv = jnp.stack([comm[k][1] for k in ("tp", "cp", "ep", "pp")] + [mb_dp_lv])  # [5, levels]
    t_host = moe_host_time(t, model, par, twl, w)
    t_mb = t_fwd + t_bwd + t_rec + t_scale + t_host + jnp.sum(mb_comm_lv)

    m = safe_div(twl.global_batch, twl.micro_batch * par.dp)
    pp1 = par.pp - 1.0
    fill = pp1 if options.schedule == "gpipe" else safe_div(pp1, par.vp)
    bubble = fill * t_mb
    g_dense, g_expert = tm.state_groups(par, twl.dp_shard)
    params_local = safe_div(dense, jnp.where(twl.zero >= 0.5, g_dense, 1.0)) + safe_div(
        expert, jnp.where(twl.zero >= 0.5, g_expert, 1.0))
    t_opt = safe_div(params_local * (ADAM_BYTES + twl.bytes_grad), hw.memory.bandwidth[0] * hw.efficiency.memory)
    step = m * t_mb + bubble + dp_exp + t_opt
    comm_lv = m * mb_comm_lv + jnp.stack([jnp.zeros_like(dp_lv)] * 4 + [dp_lv])
    comm_total = jnp.stack([comm[k][0] for k in ("tp", "cp", "ep", "pp")] + [mb_dp_tot]) * m + jnp.stack(
        [0.0, 0.0, 0.0, 0.0, dp_tot])

    chips = train_chips(par)
    tokens_s = safe_div(twl.global_batch * twl.seq, step)
    mf = tm.model_flops_per_token(model, twl.seq)
    peak = hw.chip.flops[twl.compute_dtype.astype(jnp.int32)]
    mfu = safe_div(tokens_s * mf, chips * peak)
    # HFU adds the recomputed FLOPs: full or selective per token (training_memory), the modules' rows per step
    f_mod = (1.0 - r_full) * m * tm.module_rows(t, twl, w * t.f0)  # FLOPs per step on the rank's chip
    hfu = (mfu * safe_div(mf + tm.recompute_flops_per_token(model, twl.seq, twl.recompute), mf)
           + safe_div(f_mod, step * peak))

    wb, gb, ob = tm.state_bytes(dense, expert, par, twl.zero, twl.bytes_param, twl.bytes_grad, twl.bytes_optim,
                                twl.dp_shard)
    layers_rank = par.vp * jnp.ceil(model.layers / (par.pp * par.vp))
    stash = tm.in_flight(par.pp, par.vp, m, options.schedule)
    act = (tm.activation_per_layer(model, par.tp, par.cp, twl.micro_batch, twl.seq, twl.recompute,
                                   opts.fused_attention, twl.dropout, tm.module_flags(twl), options.sequence_parallel,
                                   options.sp_regather) * layers_rank * stash
           + tm.LOGIT_BYTES * twl.micro_batch * jnp.ceil(twl.seq / par.cp) * model.vocab / par.tp)
    mem = wb + gb + ob + act
    cap = capacity_bytes(hw)
    fits = mem <= cap
    ok = functools.reduce(jnp.logical_and, tm.checks(model, par, twl).values())

    # Energy: the forward's dynamic joules (energy.dynamic_energy of the rank's rows) at the clock's voltage
    # (energy.energy_share), scaled by the work of the other passes (their time over the forward's),
    # plus static power; capped at the power limit.
    e_step = (m * e_fwd * energy.energy_share(clock) * safe_div(t_fwd + t_bwd + t_rec, t_fwd)
              + hw.power.static_power * step)
    power = safe_div(e_step, step)
    limit = energy.power_limit(hw, twl.power_cap_w)
    power = jnp.where(limit > 0, jnp.minimum(power, limit), power)
    train_time = safe_div(twl.tokens, twl.global_batch * twl.seq) * step
    train_energy = train_time * power * chips
    cost = train_time * (money.capex_per_s(hw, chips) + money.energy_cost_per_s(hw, power * chips))
    return TrainMetrics(
        step_time_s=step, tokens_per_s_per_chip=safe_div(tokens_s, chips), mfu=mfu, hfu=hfu, memory_bytes=mem,
        capacity_bytes=cap, fits=fits, feasible=fits & ok, weights_bytes=wb, grads_bytes=gb, optimizer_bytes=ob,
        activation_bytes=act, chips=chips, microbatches=m, bubble_fraction=safe_div(fill, m),
        forward=m * t_fwd, backward=m * t_bwd, recompute=m * t_rec, scaling=m * t_scale, host=m * t_host,
        optimizer=t_opt,
        bubble=bubble, comm=comm_lv, comm_total=comm_total, model_flops_per_token=mf, power_w=power,
        train_time_s=train_time, train_energy_j=train_energy, train_cost_usd=cost, clock=clock)


__all__ = ["COMM_NAMES", "MOE_DISPATCHERS", "MOE_EXPERT_HOST_S", "MOE_LAYER_HOST_S", "RECOMPUTE",
           "SCHEDULES", "SP_MODES", "TrainMetrics", "TrainOptions", "TrainWorkload",
           "fold_experts", "forward_table", "rank_weights", "sp_mode", "sp_options", "train_chips", "train_step"]
