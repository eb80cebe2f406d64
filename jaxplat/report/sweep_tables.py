"""Tables of a sweep's result that a reader can act on: top-k and Pareto
rows with the axes that change no metric shown as "any" (`search.alike`),
and per hardware axis the requirement in its direction (the smallest FLOP/s
that works, the largest latency that works)."""

import numpy as np

from jaxplat.specs.units import fmt_bytes, fmt_time


def fmt_value(v: float, unit: str) -> str:
    """An axis value with its unit, SI-prefixed (e.g. 5e13 FLOP/s -> '50 TFLOP/s')."""
    v = float(v)
    if unit == "FLOP/s":
        for prefix, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9)):
            if abs(v) >= scale:
                return f"{v / scale:.4g} {prefix}FLOP/s"
        return f"{v:.4g} FLOP/s"
    if unit == "B/s":
        return fmt_bytes(v) + "/s"
    if unit == "B":
        return fmt_bytes(v)
    if unit == "s":
        return fmt_time(v)
    if unit == "USD":
        return f"${v:,.0f}"
    return f"{v:.4g} {unit}".strip()


def axis_label(axis, j: int) -> str:
    """Value j of an axis as printed (a label, or the number with its unit)."""
    return str(axis.labels[j]) if axis.labels else fmt_value(axis.values[j], axis.kind.unit)


def axis_cell(axis, mask, own: int) -> str:
    """How a row shows an axis: its value; 'any' when every value gives the
    same result; else the values that do ('>=X' or '<=X' for a run that
    reaches an end of a sorted axis, 'X..Y' for an inner run)."""
    mask = np.asarray(mask, bool)
    n = len(axis)
    if n > 1 and mask.all():
        return "any"
    idx = np.flatnonzero(mask)
    if len(idx) <= 1:
        return axis_label(axis, own)
    contiguous = np.all(np.diff(idx) == 1)
    ascending = not axis.labels and np.all(np.diff(axis.values) > 0)
    lo, hi = int(idx[0]), int(idx[-1])
    if contiguous and ascending:
        if hi == n - 1:
            return ">=" + axis_label(axis, lo)
        if lo == 0:
            return "<=" + axis_label(axis, hi)
        return f"{axis_label(axis, lo)}..{axis_label(axis, hi)}"
    if len(idx) <= 3:
        return "|".join(axis_label(axis, int(j)) for j in idx)
    return f"{len(idx)} of {n} values"


def collapsed_frame(study, frame, masks, reps):
    """The rows `reps` of a top-k or Pareto DataFrame (columns: the study's
    axes by name, then metrics), each axis column a string from `axis_cell`,
    plus `covers`: how many rows of `frame` the row stands for."""
    import pandas as pd

    covers = np.bincount(np.asarray(reps["covered_by"]), minlength=len(frame)) if len(frame) else np.zeros(0, int)
    rows = []
    strides = [int(np.prod([len(b) for b in study.axes[i + 1:]])) for i in range(len(study.axes))]
    for r in reps["positions"]:
        rec = frame.iloc[r].to_dict()
        flat = int(rec["index"])
        for a, s, mk in zip(study.axes, strides, masks[r]):
            rec[a.name] = axis_cell(a, mk, (flat // s) % len(a))
        rec["covers"] = int(covers[r])
        rows.append(rec)
    return pd.DataFrame(rows, columns=list(frame.columns) + ["covers"])


def requirements(study, ax_ok) -> list[dict]:
    """Per group and hardware axis: what the grid says the axis must be for
    some configuration to meet every constraint, in the axis's direction.

    ax_ok: [groups, sum of axis lengths] configurations meeting every
    constraint per axis value (search.Result.ax_ok). Returns dicts with
    group, axis, better ('more' / 'less'), bound ('at least' / 'at most'),
    value (SI float or None), unit, binding (False when the grid's own
    extreme already works, so the grid does not show the limit), text.
    """
    group = study.outer[study.group_by] if study.group_by >= 0 else None
    n_out = sum(len(a) for a in study.outer)
    out = []
    for g in range(study.n_groups):
        off = n_out
        for a in study.inner:
            ok = np.asarray(ax_ok[g, off:off + len(a)]) > 0
            off += len(a)
            better = a.kind.better or "more"
            gname = str(group.label(g)) if group else "all"
            order = np.argsort(a.values)
            vals = np.asarray(a.values)[order]
            works = ok[order]
            rec = dict(group=gname, axis=a.name, better=better, unit=a.kind.unit)
            if not works.any():
                out.append(dict(rec, bound="none", value=None, binding=True, text="no value in the grid works"))
                continue
            if better == "more":
                j = int(np.argmax(works))  # smallest value that works
                edge = j == 0
                bound, what = "at least", "the smallest value that works"
            else:
                j = len(works) - 1 - int(np.argmax(works[::-1]))  # largest value that works
                edge = j == len(works) - 1
                bound, what = "at most", "the largest value that works"
            v = float(vals[j])
            if edge:
                text = (f"not binding: {fmt_value(v, a.kind.unit)}, the grid's "
                        f"{'smallest' if better == 'more' else 'largest'}, already works")
            else:
                text = f"{bound} {fmt_value(v, a.kind.unit)} ({what})"
            out.append(dict(rec, bound=bound, value=v, binding=not edge, text=text))
    return out


__all__ = ["axis_cell", "axis_label", "collapsed_frame", "fmt_value", "requirements"]
