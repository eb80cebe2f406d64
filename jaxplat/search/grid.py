"""Block tiling of a study's flat index space (host integers, all static)."""

import dataclasses

from jaxplat.search.gridmap import split_grid
from jaxplat.search.study import Study
from jaxplat.specs import SpecError

# A vmap of evaluate over more than 2^15 points returned decode times copied
# from other points on XLA:CPU with jax 0.10.2 (found by the codesign grid; the
# same arithmetic outside one jitted evaluate is right). Blocks stay below it.
MAX_BLOCK = 2**15
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

    @staticmethod
    def of(study: Study, block: int | None = None) -> "Grid":
        b = block or study.block
        if b > MAX_BLOCK:
            raise SpecError(f"study {study.name}: block {b} exceeds {MAX_BLOCK} configurations; vmaps of evaluate "
                            f"wider than 2^15 return wrong decode times on XLA:CPU (jax 0.10.2), so blocks are capped")
        no, ni = study.n_outer, study.n_inner
        split, cl, p = split_grid([len(a) for a in study.inner], b)
        n_lead = ni // p
        # every hardware point fits: whole rows, several outer points
        co = min(max(1, b // ni), no) if split == 0 else 1
        ci = cl * p
        per_row = -(-n_lead // cl)
        n_blocks = -(-no // co) * per_row
        if n_blocks >= 2**31:
            raise SpecError(f"study {study.name}: {n_blocks} blocks; raise engine.block")
        return Grid(no, ni, co, ci, per_row, n_blocks, split, cl, p)

    def block_range(self, k: int) -> tuple[int, int]:
        """[first, last] flat index a block covers (host ints)."""
        ob, j = divmod(k, self.per_row)
        o0 = ob * self.co
        o1 = min(o0 + self.co, self.n_outer) - 1
        i0 = j * self.ci
        i1 = min(i0 + self.ci, self.n_inner) - 1
        return o0 * self.n_inner + i0, o1 * self.n_inner + i1
