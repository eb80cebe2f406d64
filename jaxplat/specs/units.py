"""Units and dtypes: the one place that converts between SI and human units.

Inside jaxplat every quantity is SI: bytes, seconds, FLOP/s (a multiply-add is
2 FLOPs), bytes/s. Human units only appear when loading specs and printing.
"""

KB, MB, GB, TB = 1e3, 1e6, 1e9, 1e12
KiB, MiB, GiB = 2.0**10, 2.0**20, 2.0**30
US, MS = 1e-6, 1e-3
TFLOPS = 1e12
SECONDS_PER_YEAR = 365.25 * 86400.0
J_PER_KWH = 3.6e6

# Dtypes that a workload may use, narrowest last. The order is the index used
# by `Hardware.flops` and `Workload.compute_dtype`.
DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4", "int4")
BYTES_PER_ELEMENT = {
    "fp32": 4.0, "tf32": 4.0, "bf16": 2.0, "fp16": 2.0,
    "fp8": 1.0, "int8": 1.0, "fp4": 0.5, "int4": 0.5,
}
# Stored weight bytes per element: the element plus its share of a block
# scale where the format has one in its definition. NVFP4, the FP4 that
# Blackwell's tensor cores read and every FP4 checkpoint here uses, keeps one
# FP8 (E4M3) scale per 16 values: 4.5 bits a weight (NVIDIA, "Introducing
# NVFP4", 2025; its per-tensor FP32 scale is negligible). MXFP4, a weights
# format only here (gpt-oss ships its experts in it), keeps one 8-bit (E8M0)
# scale per 32 values: 4.25 bits (OCP Microscaling Formats spec v1.0, 2023).
# int4 carries no scale of its own (a quantizer's group size is its choice;
# GenZ counts 0.5 bytes). Activations and KV are charged their bare width:
# their scales are per token or per tensor, and the compute width is read from
# them (cost.efficiency).
WEIGHT_BYTES_PER_ELEMENT = {**BYTES_PER_ELEMENT, "fp4": 0.5 + 1.0 / 16.0, "mxfp4": 0.5 + 1.0 / 32.0}
# Weight storage formats that are not compute dtypes (GEMMs run in the
# activations' dtype), and every name a weights dtype may take.
WEIGHT_FORMATS = ("mxfp4",)
WEIGHT_DTYPES = DTYPES + WEIGHT_FORMATS
# Where a chip lists no peak for a dtype, the units it runs that dtype on, in
# order: the first one the chip lists sets its rate (model.hardware_spec).
# Never a narrower or faster unit than the values need: each dtype's values
# are exact on these (E2M1 FP4 in E4M3 FP8, FP8 and INT8 in BF16/FP16, a
# 16-bit value in FP32), so FP4 weights on an H100 run at its FP8 rate, FP8
# on an A100 or a TPU at its BF16 rate, and INT8 never on an FP8 unit (E4M3
# holds 4 significant bits, not 8). BF16 and FP16 stand in for each other:
# engines cast a BF16 checkpoint to FP16 on chips without BF16 (vLLM on
# V100/T4; Groq's LPU) and TPUs run FP16 as BF16.
DTYPE_FALLBACK = {
    "fp32": (), "tf32": ("fp32",), "bf16": ("fp16", "fp32"), "fp16": ("bf16", "fp32"),
    "fp8": ("bf16", "fp16", "fp32"), "int8": ("bf16", "fp16", "fp32"),
    "fp4": ("fp8", "bf16", "fp16", "fp32"), "int4": ("int8", "bf16", "fp16", "fp32"),
}
# A wider dtype than any the chip lists runs as several 16-bit passes on its
# 16-bit unit (BF16, else FP16): FP32 as six (bf16_6x, XLA's
# Precision.HIGHEST on TPU), TF32 as three (bf16_3x, Precision.HIGH; Henry,
# Tang & Heinecke, "Leveraging the bfloat16 AI datatype for higher-precision
# computations", ARITH 2019): 1/6 and 1/3 of the 16-bit rate, never faster.
EMULATION_PASSES = {"fp32": 6.0, "tf32": 3.0}


def fmt_bytes(x: float) -> str:
    """Human-readable decimal bytes, e.g. '13.5 GB'."""
    for unit, scale in (("TB", TB), ("GB", GB), ("MB", MB), ("kB", KB)):
        if abs(x) >= scale:
            return f"{x / scale:.3g} {unit}"
    return f"{x:.3g} B"


def fmt_time(x: float) -> str:
    """Human-readable seconds, e.g. '12.3 ms'."""
    if abs(x) >= 1.0:
        return f"{x:.4g} s"
    if abs(x) >= MS:
        return f"{x / MS:.4g} ms"
    return f"{x / US:.4g} µs"
