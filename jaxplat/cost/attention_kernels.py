"""The training stacks' attention kernels: what a backward pass computes
beside its forward, and how older kernel generations run on a chip whose
calibrated attention kernel is a newer one (`TrainWorkload.
attention_kernel_speed` and `attention_backward_speed`, cost.training).
Rates are ratios (dimensionless) over the chip's calibrated kernel."""

BACKWARD_ATTENTION = 2.5  # FlashAttention-2 backward / forward FLOPs (Dao 2023, Sec. 3.1)
BACKWARD_EXP = 1.0        # the backward recomputes P = exp(S - L) once per score (Dao 2023, Algorithm 2)
# attention_kernel_speed of FlashAttention-2 on an H100: its matmuls' rate over FlashAttention-3's, at which the
# FA3 paper's FA2 BF16 forward rows at S=16k (fit rows of data/measured/inference_2026-12.csv; Shah et al. 2024,
# arXiv 2407.08608, Fig. 5) come out right in the median, the exponentials at the chip's rate in both
# (experiments/kernel_check.py, implied line). FA2 runs ~325 TFLOP/s at every head dimension: 0.33 of the peak.
FA2_ON_HOPPER = 0.384
# attention_kernel_speed of Triton FlashAttention on an A100: 1.8x slower than FlashAttention-2 as a whole kernel
# (Dao 2023 Sec. 4.1: 1.3-2.5x, the geometric middle). At head dimension 128 FA2's 512 matmul FLOPs per score take
# 1.76 ps on the model's A100 (312 TFLOP/s x 0.75 x 1.244) beside one exponential, 0.41 ps: 1.8 x 2.17 ps leaves
# Triton's matmuls 3.50 ps, 1.76 / 3.50 of FA2's rate.
FA_TRITON_ON_AMPERE = 1.76 / 3.50
# attention_backward_speed of those two kernels: their backward matmuls' rate over their forward's, beyond the
# `backward_efficiency` every backward shares. No backward of either is measured in the data; LLM Foundry's dev rows
# fix them through their growth with the sequence length (attention from a few percent of the step at 512 tokens to
# three quarters at 65,536), fitted on its small models and judged on its large ones
# (experiments/training/fit_attention_backward.py; the split declared in data/measured/training_split.yaml first).
FA2_BACKWARD_ON_HOPPER = 0.55
FA_TRITON_BACKWARD_ON_AMPERE = 0.70
# (attention_kernel_speed, attention_backward_speed) of each training attention kernel (`jaxplat train
# --attention-kernel`): the chip's own (Transformer Engine's cuDNN attention, FlashAttention-3 on Hopper); an
# older FlashAttention-2 as measured on Hopper (PyTorch's scaled_dot_product_attention, flash-attn 2.x); Triton's
# FlashAttention as measured on Ampere.
ATTENTION_KERNELS = {"native": (1.0, 1.0), "fa2": (FA2_ON_HOPPER, FA2_BACKWARD_ON_HOPPER),
                     "triton": (FA_TRITON_ON_AMPERE, FA_TRITON_BACKWARD_ON_AMPERE)}


def kernel_fields(name: str) -> dict:
    """{TrainWorkload field: value} of an ATTENTION_KERNELS name: its two speeds."""
    return dict(zip(("attention_kernel_speed", "attention_backward_speed"), ATTENTION_KERNELS[name]))
