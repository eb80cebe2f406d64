"""Block tiling of a study's flat index space (host integers, all static)."""

import dataclasses

from jaxplat.search.devices import CPU_MAX_BLOCK
from jaxplat.search.gridmap import split_grid
from jaxplat.search.study import Study
from jaxplat.specs import SpecError

# A vmap of evaluate over more than 2^15 points returned decode times copied
# from other points on XLA:CPU with jax 0.10.2 (found by the codesign grid;
# experiments/xla_cpu_vmap_repro.py rebuilds it with jax alone). CPU blocks
# stay below it; other devices have no cap (search.devices).
MAX_BLOCK = CPU_MAX_BLOCK
# A block's candidates for the running Pareto front are merged with it this
# many at a time, pairwise; they are first thinned by a staircase of this many
# bins over the block's first Pareto metric (Engine._surely_dominated).
FRONT_FEW = 64
FRONT_BINS = 256


@dataclasses.dataclass(frozen=True)
class Grid:
    """Block tiling of a study's index space (host ints, all static).

    A block's inner points are themselves a grid: the last `len(inner) -
    split` hardware axes whole (`p` points) times `cl` consecutive points of
    the leading ones, so that each intermediate of the cost model is computed
    only over the axes it depends on (batching.grid_map), and the block is
    still one contiguous flat range.
    """

    n_outer: int
    n_inner: int
    co: int        # outer points per block
    ci: int        # inner points per block (= cl * p)
    per_row: int   # blocks per outer row-group (J)
    n_blocks: int
    split: int = 0  # inner axes [:split] are flattened into the lead axis of a block
    cl: int = 1     # lead points per block
    p: int = 1      # points of the whole trailing axes [split:]
    n_seg: int = 1  # equal segments of the outer index that no block crosses (one per model
                    # when models mix architecture kinds: a block then has one kind)

    @property
    def seg_len(self) -> int:
        """Outer points per segment."""
        return self.n_outer // self.n_seg

    @property
    def seg_blocks(self) -> int:
        """Blocks per segment."""
        return -(-self.seg_len // self.co) * self.per_row

    def locate(self, k):
        """Block k (host int or traced int32) -> (segment, first outer index,
        row-group position j)."""
        seg, kk = k // self.seg_blocks, k % self.seg_blocks
        ob, j = kk // self.per_row, kk % self.per_row
        return seg, seg * self.seg_len + ob * self.co, j

    @staticmethod
    def of(study: Study, block: int | None = None, max_block: int | None = MAX_BLOCK, multiple: int = 1,
           segments: int = 1) -> "Grid":
        """The tiling of `study` in blocks of `block` configurations (default:
        the study's engine.block, else MAX_BLOCK), refused above `max_block`
        (the device's cap, search.devices; None: no cap). `multiple`: in a
        study without hardware axes, the outer points per block are a
        multiple of it (the last ones padding when the study is smaller).
        `segments`: blocks never cross a boundary between this many equal
        segments of the outer index (it must divide the outer points)."""
        b = block or study.block or MAX_BLOCK
        if max_block is not None and b > max_block:
            raise SpecError(f"study {study.name}: block {b} exceeds {max_block} configurations; vmaps of evaluate "
                            f"wider than 2^15 return wrong decode times on XLA:CPU (jax 0.10.2), so blocks are capped")
        no, ni = study.n_outer, study.n_inner
        if no % segments:
            raise ValueError(f"{segments} segments do not divide {no} outer points")
        split, cl, p = split_grid([len(a) for a in study.inner], b)
        n_lead = ni // p
        # every hardware point fits: whole rows, several outer points
        co = min(max(1, b // ni), no // segments) if split == 0 else 1
        if ni == 1 and multiple > 1:
            co = -(-co // multiple) * multiple
        ci = cl * p
        per_row = -(-n_lead // cl)
        n_blocks = segments * -(-(no // segments) // co) * per_row
        if n_blocks >= 2**31:
            raise SpecError(f"study {study.name}: {n_blocks} blocks; raise engine.block")
        return Grid(no, ni, co, ci, per_row, n_blocks, split, cl, p, segments)

    def block_range(self, k: int) -> tuple[int, int]:
        """[first, last] flat index a block covers (host ints)."""
        seg, o0, j = self.locate(k)
        o1 = min(o0 + self.co, (seg + 1) * self.seg_len) - 1
        i0 = j * self.ci
        i1 = min(i0 + self.ci, self.n_inner) - 1
        return o0 * self.n_inner + i0, o1 * self.n_inner + i1
