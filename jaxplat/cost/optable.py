"""The operator table's arrays (`OpTable`: one row per operator, its columns
described in jaxplat.cost.operators, which builds them) and the host-side
accumulator its rows are added to while a table is traced (`_Rows`)."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from jaxplat.cost.opkind import OpKind
from jaxplat.model import pytree_dataclass, static

NUMERIC = ("count", "stage", "f0", "f1", "a0", "a1", "w0", "w1", "o0", "o1",
           "on_a", "on_w", "on_o", "stored", "comm_n", "comm_b", "comm_s", "m", "k", "n", "problems",
           "queries")


@pytree_dataclass
class OpTable:
    """Struct of arrays, each [rows] float; names and groups are static."""

    count: jax.Array
    stage: jax.Array
    f0: jax.Array
    f1: jax.Array
    a0: jax.Array
    a1: jax.Array
    w0: jax.Array
    w1: jax.Array
    o0: jax.Array
    o1: jax.Array
    on_a: jax.Array
    on_w: jax.Array
    on_o: jax.Array
    stored: jax.Array
    comm_n: jax.Array
    comm_b: jax.Array
    comm_s: jax.Array
    m: jax.Array
    k: jax.Array
    n: jax.Array
    problems: jax.Array
    queries: jax.Array
    names: tuple = static(())
    groups: tuple = static(())
    kinds: tuple = static(())  # OpKind of each row
    comm_kinds: tuple = static(())  # "" for rows without a collective
    # Label of each row's collective group ("" for none): equal labels, equal group size and
    # stride in one configuration's tables ("tp|1.0"), so collectives.py costs them once.
    comm_groups: tuple = static(())


def comm_group_labels(table: OpTable, i: int) -> tuple:
    """Table i's collective group labels (`OpTable.comm_groups`) among
    several tables of one configuration: row-unique ones ("row<j>", or every
    row of a table built without labels) made unique across the tables too."""
    own = table.comm_groups if len(table.comm_groups) == len(table.comm_kinds) else \
        tuple(f"row{j}" for j in range(len(table.comm_kinds)))
    return tuple(f"t{i}.{g}" if g.startswith("row") else g for g in own)


def joined_tables(tables) -> OpTable:
    """The rows of several tables of one configuration as one table, in
    order, for a computation row by row (each row's cost reads its own row
    and the deployment, never another row): one traced copy of it for all
    the tables, a smaller program than one copy per table."""
    return OpTable(**{k: jnp.concatenate([getattr(t, k) for t in tables]) for k in NUMERIC},
                   **{k: sum((tuple(getattr(t, k)) for t in tables), ()) for k in ("names", "groups", "kinds",
                                                                                  "comm_kinds")},
                   comm_groups=sum((comm_group_labels(t, i) for i, t in enumerate(tables)), ()))


@dataclasses.dataclass
class _Rows:
    """Host-side accumulator of rows while a table is built (inside jit).

    A row's `count` is a tag ("layer", "attn", "global", "local", "mamba", "ffn", "no_ffn",
    "dense", "moe", "once", "send"), and
    `counts` maps each tag to (times per pass, times in the busiest stage).
    """

    counts: dict
    rows: list = dataclasses.field(default_factory=list)
    labels: dict = dataclasses.field(default_factory=dict)  # id(value) -> name, for comm_groups

    def add(self, name, group, count, kind, f=(0.0, 0.0), a=(0.0, 0.0), w=(0.0, 0.0), o=(0.0, 0.0),
            on=(0.0, 0.0, 0.0), stored=0.0, comm=("", 1.0, 0.0, 1.0), mkn=(0.0, 0.0, 0.0), problems=1.0,
            queries=0.0):
        if kind not in OpKind.ALL:
            raise ValueError(f"row {name!r}: unknown kind {kind!r}")
        per_pass, per_stage = self.counts[count]
        self.rows.append(dict(
            names=name, groups=group, kinds=kind, comm_kinds=comm[0], count=per_pass, stage=per_stage,
            f0=f[0], f1=f[1], a0=a[0], a1=a[1], w0=w[0], w1=w[1], o0=o[0], o1=o[1],
            on_a=on[0], on_w=on[1], on_o=on[2], stored=stored, comm_n=comm[1], comm_b=comm[2],
            comm_s=comm[3], m=mkn[0], k=mkn[1], n=mkn[2], problems=problems,
            queries=queries))

    def gemm(self, name, group, count, m, k, n, ctx, on=(0.0, 0.0, 0.0), stored=None, traffic=True,
             kind=OpKind.GEMM):
        """A weight GEMM: [m, k] activations times a [k, n] weight."""
        wbytes = k * n * ctx.bw
        self.add(name, group, count, kind, f=(2.0 * m * k * n, 0.0), a=(m * k * ctx.ba, 0.0),
                 w=(wbytes if traffic else 0.0, 0.0), o=(m * n * ctx.ba, 0.0), on=on,
                 stored=wbytes if stored is None else stored, mkn=(m, k, n))

    def eltwise(self, name, group, count, elems_in, elems_out, flops_per, ctx, on=0.0):
        """An element-wise op: memory traffic of its input and output."""
        self.add(name, group, count, OpKind.ELEMENTWISE, f=(flops_per * elems_out, 0.0),
                 a=(elems_in * ctx.ba, 0.0),
                 o=(elems_out * ctx.ba, 0.0), on=(on, 0.0, on))

    def collective(self, name, group, count, kind, n, nbytes, stride=1.0):
        """A collective over n chips `stride` ranks apart (tp innermost)."""
        self.add(name, group, count, OpKind.COLLECTIVE, comm=(kind, n, nbytes, stride))

    def table(self, dtype) -> OpTable:
        # Per column a constant, or a stack of its cells (a concatenation XLA fuses into its users;
        # a scatter into a constant grid runs as a serial loop on XLA:CPU when batched).
        cols = {}
        for key in NUMERIC:
            cells = [r[key] for r in self.rows]
            if all(isinstance(v, (int, float, np.number)) for v in cells):
                cols[key] = jnp.asarray(np.array(cells, np.float32), dtype)
            else:
                cols[key] = jnp.stack([jnp.asarray(v, dtype) for v in cells])
        return OpTable(**cols, **self.static_fields())

    def static_fields(self) -> dict:
        """The table's static fields (names, groups, kinds, comm_kinds, comm_groups), each a tuple over rows."""
        out = {key: tuple(r[key] for r in self.rows) for key in ("names", "groups", "kinds", "comm_kinds")}
        out["comm_groups"] = tuple(self._group(j, r) for j, r in enumerate(self.rows))
        return out

    def _group(self, j, r) -> str:
        """Row j's collective group label: size|stride by name (`_Ctx.labels`) or value, else row-unique."""
        name = lambda v: repr(float(v)) if isinstance(v, (int, float, np.number)) else self.labels.get(  # noqa: E731
            id(v), f"row{j}")
        return f"{name(r['comm_n'])}|{name(r['comm_s'])}" if r["comm_kinds"] else ""
