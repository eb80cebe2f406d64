"""Configurations that differ only in axes that change no metric.

A study often has axes that do not matter at some of its best points: the
HBM size once the model fits, the scale-up domain at tp 1, micro-batches at
batch 1. Their top-k then lists one configuration several times, and its
Pareto front shows one arbitrary value of such an axis. Here, for a few
configurations (the reported ones), each axis is varied on its own over all
its values, with every other axis kept, and the values whose metrics and
constraint checks equal the configuration's are found: the axis can be
shown as "any" (every value), a subset, or the value itself. Reports then
collapse the configurations a representative covers into one row.

Runs on the host after a sweep: the neighbours go through
`Engine.evaluate_flat`, the program that also reports the top-k's values
(the engine's own configuration function, the one cost model; compiled
once, beside the sweep step).
"""

import math

import numpy as np

from jaxplat.search import gridmap
from jaxplat.search.engine import Engine

RTOL = 1e-6   # metrics equal to this relative tolerance (float32 noise of an axis that enters only in rounding)
# Metrics that measure headroom against an axis rather than a cost of the
# configuration (memory_fraction = memory / capacity changes with the HBM
# size even when nothing else does): not compared.
IGNORED = ("memory_fraction",)


def _strides(study) -> list[int]:
    sizes = [len(a) for a in study.axes]
    return [math.prod(sizes[i + 1:]) for i in range(len(sizes))]


def equivalent_values(engine: Engine, flat) -> list[list[np.ndarray]]:
    """For each flat index and each axis of the study: a boolean mask over
    the axis's values, True where changing only that axis to the value
    leaves every metric (but `IGNORED`) and the constraint checks as they
    are. The configuration's own value is always True."""
    st = engine.study
    flat = np.asarray(flat, np.int64)
    strides = _strides(st)
    sizes = [len(a) for a in st.axes]
    keep = np.array([m not in IGNORED for m in engine.metrics])
    digits = gridmap.digits(flat, sizes)
    # Neighbours: row-major over (configuration, axis, value).
    nb = np.concatenate([(flat - d * s)[:, None] + s * np.arange(n)[None, :]
                         for d, s, n in zip(digits, strides, sizes)], axis=1) if sizes else np.zeros((len(flat), 0))
    vals, ok, feas = engine.evaluate_flat(nb.reshape(-1))
    per = sum(sizes)
    vals = vals.reshape(len(flat), per, -1)[:, :, keep]
    ok, feas = ok.reshape(len(flat), per), feas.reshape(len(flat), per)
    out = []
    for r in range(len(flat)):
        row, off = [], 0
        for d, n in zip(digits, sizes):
            own = off + int(d[r])
            v = vals[r, off:off + n]
            same = np.all(np.isclose(v, vals[r, own], rtol=RTOL, atol=0.0) | (np.isnan(v) & np.isnan(vals[r, own])),
                          axis=1)
            mask = same & (ok[r, off:off + n] == ok[r, own]) & (feas[r, off:off + n] == feas[r, own])
            mask[int(d[r])] = True
            row.append(mask)
            off += n
        out.append(row)
    return out


def collapse(engine: Engine, flat, vals):
    """Group a ranked list of configurations (flat indices, their metric
    values [n, metrics]) into rows that differ only in axes that change no
    metric. Returns (reps: positions of the representatives, in order;
    covered_by: [n] position of each entry's representative; masks: per
    entry, per axis, the mask of `equivalent_values`). An entry is covered
    by an earlier representative when its metrics equal the
    representative's and each of its axis values is one the representative
    may take."""
    flat = np.asarray(flat, np.int64)
    vals = np.asarray(vals, np.float64)
    st = engine.study
    sizes = [len(a) for a in st.axes]
    masks = equivalent_values(engine, flat)
    keep = np.array([m not in IGNORED for m in engine.metrics])
    covered = np.full(len(flat), -1, np.int64)
    reps = []
    all_digits = gridmap.digits(flat, sizes)
    for r in range(len(flat)):
        d = [int(x[r]) for x in all_digits]
        for rep in reps:
            if (np.allclose(vals[r, keep], vals[rep, keep], rtol=RTOL, atol=0.0)
                    and all(masks[rep][a][d[a]] for a in range(len(sizes)))):
                covered[r] = rep
                break
        if covered[r] < 0:
            reps.append(r)
            covered[r] = r
    return reps, covered, masks


__all__ = ["collapse", "equivalent_values"]
