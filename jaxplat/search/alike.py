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

Runs on the host after a sweep: one jitted, vmapped evaluation of the
engine's own configuration function (`Engine.point_any_kind`, the one cost model)
over the neighbours, in fixed-size chunks (one compile).
"""

import math

import jax
import jax.numpy as jnp
import numpy as np

from jaxplat.search.engine import Engine

CHUNK = 1024  # configurations per call (padded: one compile)
RTOL = 1e-6   # metrics equal to this relative tolerance (float32 noise of an axis that enters only in rounding)
# Metrics that measure headroom against an axis rather than a cost of the
# configuration (memory_fraction = memory / capacity changes with the HBM
# size even when nothing else does): not compared.
IGNORED = ("memory_fraction",)


def _strides(study) -> list[int]:
    sizes = [len(a) for a in study.axes]
    return [math.prod(sizes[i + 1:]) for i in range(len(sizes))]


def _evaluator(engine: Engine):
    st = engine.study
    n_out = len(st.outer)

    def one(values):
        r = engine.point_any_kind([values[i] for i in range(n_out)], [values[i] for i in range(n_out, len(st.axes))],
                                  names=engine.metrics)
        return r["keys"], r["ok"], r["feasible"]
    return jax.jit(jax.vmap(one))


def evaluate_flat(engine: Engine, flat, fn=None):
    """(vals [n, metrics], ok [n], feasible [n]) of flat indices, by the
    engine's configuration function (host numpy out)."""
    st = engine.study
    flat = np.asarray(flat, np.int64)
    strides = _strides(st)
    cols = [np.asarray(a.values, np.float32)[(flat // s) % len(a)] for a, s in zip(st.axes, strides)]
    values = np.stack(cols, axis=1) if cols else np.zeros((len(flat), 0), np.float32)
    fn = fn or _evaluator(engine)
    out = []
    for lo in range(0, len(flat), CHUNK):
        part = values[lo:lo + CHUNK]
        pad = np.concatenate([part, np.repeat(part[:1], CHUNK - len(part), axis=0)]) if len(part) < CHUNK else part
        res = jax.device_get(fn(jnp.asarray(pad)))
        out.append(tuple(np.asarray(x)[:len(part)] for x in res))
    if not out:
        m = len(engine.metrics)
        return np.zeros((0, m), np.float32), np.zeros(0, bool), np.zeros(0, bool)
    return tuple(np.concatenate(x) for x in zip(*out))


def equivalent_values(engine: Engine, flat, fn=None) -> list[list[np.ndarray]]:
    """For each flat index and each axis of the study: a boolean mask over
    the axis's values, True where changing only that axis to the value
    leaves every metric (but `IGNORED`) and the constraint checks as they
    are. The configuration's own value is always True."""
    st = engine.study
    flat = np.asarray(flat, np.int64)
    strides = _strides(st)
    sizes = [len(a) for a in st.axes]
    keep = np.array([m not in IGNORED for m in engine.metrics])
    digits = [(flat // s) % n for s, n in zip(strides, sizes)]
    # Neighbours: row-major over (configuration, axis, value).
    nb = np.concatenate([(flat - d * s)[:, None] + s * np.arange(n)[None, :]
                         for d, s, n in zip(digits, strides, sizes)], axis=1) if sizes else np.zeros((len(flat), 0))
    vals, ok, feas = evaluate_flat(engine, nb.reshape(-1), fn)
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


def collapse(engine: Engine, flat, vals, fn=None):
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
    strides, sizes = _strides(st), [len(a) for a in st.axes]
    masks = equivalent_values(engine, flat, fn)
    keep = np.array([m not in IGNORED for m in engine.metrics])
    covered = np.full(len(flat), -1, np.int64)
    reps = []
    for r in range(len(flat)):
        d = [int((flat[r] // s) % n) for s, n in zip(strides, sizes)]
        for rep in reps:
            if (np.allclose(vals[r, keep], vals[rep, keep], rtol=RTOL, atol=0.0)
                    and all(masks[rep][a][d[a]] for a in range(len(sizes)))):
                covered[r] = rep
                break
        if covered[r] < 0:
            reps.append(r)
            covered[r] = r
    return reps, covered, masks


def evaluator(engine: Engine):
    """The jitted, vmapped configuration function `evaluate_flat` uses (build
    once, pass to several calls)."""
    return _evaluator(engine)


__all__ = ["collapse", "equivalent_values", "evaluate_flat", "evaluator"]
