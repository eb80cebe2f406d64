"""The sweep step's running summaries: the empty summary, and a later
block's summary merged into it (counts, per-axis summaries, histogram, the
running top-k and Pareto front), all on the device. `Engine` inherits them.
"""

import math

import jax
import jax.numpy as jnp
from jax import lax

from jaxplat.search.grid import FRONT_BINS, FRONT_FEW
from jaxplat.search.gridmap import vary_over, varying_axes
from jaxplat.search.reduce import dominated, front_b_at, variadic_reduce

COUNTERS = ("evaluated", "feasible", "ok", "over_chips", "wrong_chips", "over_ttft", "over_tpot", "over_memory")
# Rejection counters taken over every configuration (a memory or chip-count
# check is what makes many of them infeasible); the latency ones over the
# feasible configurations only (a latency of one that cannot run says little).
AMONG_ALL = ("over_chips", "wrong_chips", "over_memory")


class Merging:
    """Running summaries of a sweep step (device side). Needs the engine's
    top_k (configurations kept in all: the study's top_k per group-by value),
    n_pareto, bins, axis_sizes, study and st (its layout)."""

    def empty(self):
        """A summary of nothing, on the device."""
        na, ng = sum(self.axis_sizes), self.study.n_groups
        z = lambda *s, dt=jnp.float32, v=0: jnp.full(s, v, dt)  # noqa: E731
        return dict(
            counts=z(len(COUNTERS), dt=jnp.int32),
            top=(z(self.top_k, v=-jnp.inf), z(self.top_k, dt=jnp.int32), z(self.top_k, dt=jnp.int32),
                 z(self.top_k, dt=jnp.bool_)),
            front=(z(self.n_pareto, v=jnp.inf), z(self.n_pareto, v=jnp.inf), z(self.n_pareto, dt=jnp.int32),
                   z(self.n_pareto, dt=jnp.int32), z(self.n_pareto, dt=jnp.bool_)),
            front_overflow=z(dt=jnp.int32),
            ax_feas=z(ng, na, dt=jnp.int32), ax_ok=z(ng, na, dt=jnp.int32), ax_best=z(ng, na, v=-jnp.inf),
            hist=z(self.bins + 2, dt=jnp.int32))

    def _merge(self, run, blk):
        """Running summary + a later block's summary -> running summary.

        The top-k and front merges run only when the block can change them
        (lax.cond): a score above the running k-th; a point that no running
        front point weakly dominates, checked first on the block's ideal
        corner (min a, min b). Either way the result is what merging every
        configuration gives (while the front has at most `pp` points; past
        that, front_overflow counts the points cut).
        """
        out = dict(counts=run["counts"] + blk["counts"], ax_feas=run["ax_feas"] + blk["ax_feas"],
                   ax_ok=run["ax_ok"] + blk["ax_ok"], ax_best=jnp.maximum(run["ax_best"], blk["ax_best"]),
                   hist=run["hist"] + blk["hist"])
        score, a, b, o, i, ok = blk["cand"]
        best, a_min, b_min = variadic_reduce([("max", score), ("min", a), ("min", b)])
        out["top"] = lax.cond(best > jnp.min(run["top"][0]), self._merge_top,
                              lambda top, *_: top, run["top"], score, o, i, ok)
        corner = dominated(run["front"], a_min, b_min)
        out["front"], out["front_overflow"] = lax.cond(
            corner, lambda front, over, *_: (front, over), self._merge_front,
            run["front"], run["front_overflow"], a, b, o, i, ok)
        return out

    def group_of(self, o):
        """The group-by value (index) of outer flat indices `o` (numpy or
        jax ints; 0 without group_by): the study's outer axes are row-major."""
        g = self.study.group_by
        if g < 0:
            return o * 0
        return (o // math.prod(len(a) for a in self.st.outer[g + 1:])) % len(self.st.outer[g])

    def _merge_top(self, top, score, o, i, ok):
        """Running top-k + the block's own top-k -> top-k, for each group-by
        value (`top` holds ng runs of k = top_k / ng, group-major), so a
        study's `group_by` keeps the best of every group, not the best
        overall. lax.top_k keeps the lower position on ties, and the running
        entries (earlier flat indices) come first, so ties go to the lower
        index."""
        ng = self.study.n_groups
        k, grp = self.top_k // ng, self.group_of(o)

        def one(g, run):
            s = jnp.where(grp == g, score, -jnp.inf)
            _, pos = lax.top_k(s, min(k, s.shape[0]))
            new = (s[pos], o[pos], i[pos], ok[pos] & (s[pos] > -jnp.inf))
            cat = [jnp.concatenate([x, y]) for x, y in zip(run, new)]
            _, pos = lax.top_k(cat[0], k)
            return tuple(x[pos] for x in cat)
        out = jax.vmap(one)(jnp.arange(ng), tuple(x.reshape(ng, k) for x in top))
        return tuple(x.reshape(-1) for x in out)

    def _merge_front(self, front, over, a, b, o, i, ok):
        """Running front + the block's points that may be on the merged front.

        A point that the running front or another block point weakly
        dominates is off the merged front and dominates nothing on it, so
        only the others are merged: the prefilter leaves a handful of the
        block's thousands of points, merged pairwise against the front (no
        sort) FRONT_FEW at a time by position (a cumulative count, no
        top_k: XLA:CPU sorts for it), usually in one round. Each traced
        operation here is kernels to compile (`experiments/bench_sweep.py`
        prints the step's count).
        """
        n = a.shape[0]
        few = min(FRONT_FEW, n)
        position = jnp.arange(n, dtype=jnp.int32)

        def more(carry):
            return carry[3]

        def merge_few(carry):
            front, over, cand, _ = carry
            # Dominated stays dominated as the front improves (transitivity).
            cand = cand & ~self._surely_dominated(front, a, b, ok)
            rank = jnp.cumsum(cand, dtype=jnp.int32) - 1  # among the candidates
            pos = jnp.zeros(few, jnp.int32).at[jnp.where(cand, rank, few)].set(position, mode="drop")
            got = jnp.arange(few) <= rank[-1]
            front, over = self._front_pairwise(front, over, (a[pos], b[pos], o[pos], i[pos], got),
                                               pos)
            # More left iff more than `few` were candidates (no reduction over the block).
            return front, over, cand & (rank >= few), rank[-1] >= few
        first = vary_over(jnp.bool_(True), varying_axes(ok))  # the carry varies like the block
        front, over, _, _ = lax.while_loop(more, merge_few, (front, over, ok, first))
        return front, over

    def _surely_dominated(self, front, a, b, ok):
        """[n] True where a point is weakly dominated by the running front or
        by a block point with a smaller a (a sufficient test, no sort).

        The ok points are binned by a (FRONT_BINS bins over the block's range;
        the bin is monotone in a). A point in bin k is dominated when its b is
        at least the least b of the points in lower bins, or the front's b at
        the least a of bin k (the front's b does not increase with a)."""
        nb = FRONT_BINS
        big = jnp.finfo(a.dtype).max
        a_lo, a_hi = variadic_reduce([("min", jnp.where(ok, a, big)), ("max", jnp.where(ok, a, -big))])
        width = jnp.where(a_hi > a_lo, a_hi - a_lo, 1.0)
        k = jnp.clip(jnp.floor((jnp.where(ok, a, a_lo) - a_lo) / width * nb), 0, nb - 1).astype(jnp.int32)
        mins = jax.ops.segment_min(jnp.where(ok[:, None], jnp.stack([a, b], 1), jnp.inf), k, nb)  # [nb, (a, b)]
        lower = jnp.concatenate([jnp.full((1,), jnp.inf, b.dtype), lax.cummin(mins[:, 1])[:-1]])
        return b >= jnp.minimum(lower, front_b_at(front, mins[:, 0]))[k]

    def _front_pairwise(self, front, over, pts, pos):
        """Pareto front (both keys minimized) of the running front and a few
        block points (at block positions `pos`), the first `pp` of it in
        order of (a, b, flat index). A point is on it iff no valid point
        before it in that order has b' <= b; its slot is the number of points
        on it before it: O((pp + few)^2) comparisons and no sort (sorting a
        block dominated the sweep's time in feasible regions on XLA:CPU).

        The running front holds points of earlier blocks only (`_local_step`
        merges blocks in increasing order), so on ties of (a, b) front points
        come first, and block points by position, which increases with the
        flat index: one integer key instead of comparing (o, i)."""
        union = tuple(jnp.concatenate([f, p]) for f, p in zip(front, pts))
        ua, ub, uok = union[0], union[1], union[4]
        key = jnp.concatenate([jnp.full((self.n_pareto,), -1, jnp.int32), pos.astype(jnp.int32)])
        ja, jb, jk = ua[:, None], ub[:, None], key[:, None]  # [j, k]: does j precede k?
        before = (ja < ua) | ((ja == ua) & ((jb < ub) | ((jb == ub) & (jk < key))))
        on = uok & ~jnp.any(before & (jb <= ub) & uok[:, None], axis=0)
        slot = jnp.where(on, jnp.sum(before & on[:, None], axis=0), self.n_pareto)
        fills = (jnp.inf, jnp.inf, 0, 0, False)
        merged = tuple(jnp.full_like(f, v).at[slot].set(u, mode="drop") for f, u, v in zip(front, union, fills))
        return merged, over + jnp.maximum(jnp.sum(on, dtype=jnp.int32) - self.n_pareto, 0)

