"""`Options`: the few static choices of the one cost model.

Each field changes how the operator table is built or which formula is used,
so each new value compiles a new program. Everything numeric is traced.
"""

import dataclasses

PROFILES = ("default", "genz")


@dataclasses.dataclass(frozen=True)
class Options:
    """Static, hashable options.

    Attributes:
      profile: "default" (our model) or "genz" (GenZ's accounting conventions,
        `shared/data/genz/CONVENTIONS.md`, to reproduce a GenZ user's numbers).
      smooth: use the smooth twins of max/ceil (p-norm max, straight-through
        ceil) so that gradients reach every input. Exact mode reports.
      fused_attention: FlashAttention-style fusion (Dao et al. 2022): scores
        stay on chip. Off: scores go to main memory and back (a naive kernel).
      memory_hierarchy: default profile only: place weights, KV cache and
        activations over the memory levels (fastest first, spilling down) and
        charge GEMM operands their tiling re-reads for the on-chip buffer
        (memory.hierarchy_memory_fn). Off: the plain roofline (every
        off-chip byte once at main-memory bandwidth). The genz profile
        ignores it.
    """

    profile: str = "default"
    smooth: bool = False
    fused_attention: bool = True
    memory_hierarchy: bool = True

    def __post_init__(self):
        if self.profile not in PROFILES:
            raise ValueError(f"unknown profile {self.profile!r}; allowed: {', '.join(PROFILES)}")

    @property
    def genz(self) -> bool:
        return self.profile == "genz"
