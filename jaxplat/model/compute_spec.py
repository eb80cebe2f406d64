"""The `compute:` block of a hardware spec -> `Hardware` compute fields.

    compute:
      array: [256, 256]     # processing elements per systolic array: rows, cols
      cores: 4              # identical arrays (default 1)
      dataflow: ws          # ws | os | is (default ws)
      clock_hz: 1.0e+9      # array clock
      vector_flops: 4.0e+12 # element-wise unit (softmax, norms, activations); default: the chip's flops
      host: {flops: 8.0e+12, bandwidth: 1.28e+11, latency: 1.0e-6}  # offload target and its link
      offload: [logit, softmax, attend]   # operators (names or groups) run on the host

A tensor-core chip (GPU) gives instead its SMs or CUs and a GEMM kernel's
tile, for tile and wave quantization (jaxplat.cost.efficiency):

    compute:
      units: 132             # SMs
      tile: [128, 128, 64]   # output tile m x n, k-step
      exp_rate: 4.18e+12     # exponentials/s: SMs x 16 SFU lanes x SM clock

Without `exp_rate`, a chip that lists an fp32 peak gets fp32 / 16 (an SM
from Volta to Blackwell issues 16 exponentials a clock beside 128 FP32
FMAs, 256 FLOPs; an A100's SM has 64 FP32 lanes, so its spec gives the rate);
one that lists none, none (its exponentials cost no time).

Every number becomes a traced `Hardware` leaf (swept, differentiated); the
dataflow and the offload list are static (they choose the code path). The
cost of all this is jaxplat.cost.compute. A chip without the block is
unchanged: every operator at its `flops`.
"""

from jaxplat.specs import SpecError, check_keys, choice, number

DATAFLOWS = ("ws", "os", "is")  # as jaxplat.cost.microarch.DATAFLOWS (the cost layer is above this one)
COMPUTE_KEYS = ("array", "cores", "dataflow", "clock_hz", "vector_flops", "exp_rate", "host", "offload", "units",
                "tile")
HOST_KEYS = ("flops", "bandwidth", "latency")

# What `offload:` may name: operator groups and operator names of the
# operator table (jaxplat.cost.operators). A name also matches its decode
# halves (logit -> logit_prefix, logit_suffix). tests/test_compute.py checks
# that every row of every table is named here.
OFFLOAD_GROUPS = ("embedding", "attention", "mamba", "ffn", "moe", "lm_head")
OFFLOAD_NAMES = (
    "embedding", "attn_norm", "qkv", "rope", "kv_write", "logit", "softmax", "attend", "out_proj",
    "q_a", "q_norm", "q_b", "kv_a", "kv_norm", "kv_b", "q_absorb", "v_up", "attn_residual", "ffn_norm",
    "up_gate", "act", "down", "router", "experts_up_gate", "experts_act", "experts_down", "moe_permute",
    "moe_finalize", "shared_up_gate",
    "shared_act", "shared_down", "idle_experts", "ffn_residual", "final_norm", "lm_head",
    # Mamba blocks (jaxplat.cost.ssm), GenZ's einsum accounting of the scan included
    "mamba_norm", "mamba_residual", "ssm_in_proj", "ssm_conv", "ssm_x_proj", "ssm_dt_proj", "ssm_scan",
    "ssm_state_write", "ssm_out_proj", "ssm_delta_a", "ssm_delta_b", "ssm_delta_bu", "ssm_state_update",
    "ssm_output", "ssm_skip", "ssm_gate", "genz_stub_down")


def compute_fields(d: dict | None, src="hardware") -> dict:
    """`Hardware` fields of a `compute:` block (empty dict when there is none).

    Also returns "array_flops": 2 x rows x cols x cores x clock, the array's
    dense peak (one multiply-add per PE per cycle), for specs that leave
    `flops:` out; the caller pops it.
    """
    if d is None:
        return {}
    if not isinstance(d, dict) or not d:
        raise SpecError(f"{src}: compute must be a mapping with keys {', '.join(COMPUTE_KEYS)}")
    check_keys(src, "compute.", d, COMPUTE_KEYS)
    out = {}
    if "array" in d:
        arr = d["array"]
        if not isinstance(arr, (list, tuple)) or len(arr) != 2:
            raise SpecError(f"{src}: compute.array must be [rows, cols] (processing elements), got {arr!r}")
        rows, cols = (number(src, f"compute.array[{i}]", v) for i, v in enumerate(arr))
        if "clock_hz" not in d:
            raise SpecError(f"{src}: compute.array needs compute.clock_hz (the array's clock)")
        dataflow = choice(f"{src}: compute.dataflow", d.get("dataflow", "ws"), DATAFLOWS)
        cores = number(src, "compute.cores", d.get("cores", 1))
        clock = number(src, "compute.clock_hz", d["clock_hz"])
        for v, key in ((rows, "compute.array[0]"), (cols, "compute.array[1]"), (cores, "compute.cores")):
            if v < 1 or v != round(v):
                raise SpecError(f"{src}: {key} must be a whole number >= 1, got {v:g}")
        out.update(dataflow=dataflow, array_rows=rows, array_cols=cols, cores=cores, clock_hz=clock,
                   array_flops=2.0 * rows * cols * cores * clock)
    else:
        for key in ("cores", "dataflow", "clock_hz"):
            if key in d:
                raise SpecError(f"{src}: compute.{key} describes a systolic array; give compute.array too")
    if ("units" in d) != ("tile" in d):
        raise SpecError(f"{src}: compute.units and compute.tile go together (SMs and a GEMM kernel's tile)")
    if "tile" in d:
        if "array" in d:
            raise SpecError(f"{src}: compute.tile describes tensor cores, compute.array systolic arrays: give one")
        tile = d["tile"]
        if not isinstance(tile, (list, tuple)) or len(tile) != 3:
            raise SpecError(f"{src}: compute.tile must be [m, n, k] (a GEMM kernel's output tile and k-step), "
                            f"got {tile!r}")
        out["units"] = number(src, "compute.units", d["units"])
        for axis, v in zip("mnk", tile):
            out[f"tile_{axis}"] = number(src, f"compute.tile.{axis}", v)
    if "vector_flops" in d:
        out["vector_flops"] = number(src, "compute.vector_flops", d["vector_flops"])
    if "exp_rate" in d:
        out["exp_rate"] = number(src, "compute.exp_rate", d["exp_rate"])
    host = d.get("host")
    if host is not None:
        if not isinstance(host, dict):
            raise SpecError(f"{src}: compute.host must be a mapping with keys {', '.join(HOST_KEYS)}")
        check_keys(src, "compute.host.", host, HOST_KEYS, required=HOST_KEYS[:2])
        out.update(host_flops=number(src, "compute.host.flops", host["flops"]),
                   host_bw=number(src, "compute.host.bandwidth", host["bandwidth"]),
                   host_latency=number(src, "compute.host.latency", host.get("latency", 0.0), allow_zero=True))
    offload = d.get("offload", [])
    if not isinstance(offload, list) or not all(isinstance(x, str) for x in offload):
        raise SpecError(f"{src}: compute.offload must be a list of operator names or groups, got {offload!r}")
    for x in offload:
        if x not in OFFLOAD_NAMES and x not in OFFLOAD_GROUPS:
            raise SpecError(f"{src}: compute.offload names unknown operator {x!r}; allowed: groups "
                            f"{', '.join(OFFLOAD_GROUPS)} or operators {', '.join(OFFLOAD_NAMES)}")
    if offload and host is None:
        raise SpecError(f"{src}: compute.offload needs compute.host (the target's FLOP/s and link bandwidth)")
    if offload:
        out["offload"] = tuple(offload)
    return out
