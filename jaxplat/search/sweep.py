"""The host side of a sweep: the running `Result` (merged per step, saved
atomically, resumed), and the run loop.
"""

import dataclasses
import json
import os
import time
from pathlib import Path

import jax
import numpy as np

from jaxplat.search.engine import COUNTERS, Engine
from jaxplat.specs import SpecError

STATE_FILE = "state.npz"  # a sweep's host state in its output folder


class Result:
    """The host-side running result of a sweep (flat indices as Python ints).

    Attributes:
      counts: [len(COUNTERS)] int64, in `search.COUNTERS` order. top: dict of
        arrays sorted best first.
      front: dict of arrays sorted by the first Pareto metric. Their `vals`
        ([n, metrics], every reported metric) are filled by `fill_values`,
        which `run` calls at its end.
      ax_feas, ax_ok: [groups, sum of axis lengths] int64 (groups: values of
        the study's group_by axis, else 1); ax_best: [same] float32 score.
      hist: [bins + 2] int64. next_block: first block not yet merged.
    """

    def __init__(self, engine: Engine):
        self.e = engine
        m = len(engine.metrics)
        na, ng = sum(engine.axis_sizes), engine.study.n_groups
        self.counts = np.zeros(len(COUNTERS), np.int64)
        self.top = dict(score=np.zeros(0, np.float32), index=np.zeros(0, np.int64), vals=np.zeros((0, m), np.float32))
        self.front = dict(a=np.zeros(0, np.float32), b=np.zeros(0, np.float32), index=np.zeros(0, np.int64),
                          vals=np.zeros((0, m), np.float32))
        self._valued = True  # vals of top and front are up to date (`fill_values`)
        self.front_overflow = 0
        self.ax_feas = np.zeros((ng, na), np.int64)
        self.ax_ok = np.zeros((ng, na), np.int64)
        self.ax_best = np.full((ng, na), -np.inf, np.float32)
        self.hist = np.zeros(engine.bins + 2, np.int64)
        self.next_block = 0
        self.elapsed = 0.0

    def merge(self, s: dict):
        """Fold per-device summaries (numpy, leading axis = device) into the result."""
        n_inner = self.e.grid.n_inner
        self.counts += s["counts"].astype(np.int64).sum(0)
        self.ax_feas += s["ax_feas"].astype(np.int64).sum(0)
        self.ax_ok += s["ax_ok"].astype(np.int64).sum(0)
        self.ax_best = np.maximum(self.ax_best, s["ax_best"].max(0))
        self.hist += s["hist"].astype(np.int64).sum(0)
        self.front_overflow += int(s["front_overflow"].sum())

        score, o, i, okf = (x.reshape((-1,) + x.shape[2:]) for x in s["top"])
        idx = o.astype(np.int64) * n_inner + i.astype(np.int64)
        score = np.concatenate([self.top["score"], score[okf]])
        idx = np.concatenate([self.top["index"], idx[okf]])
        order = np.lexsort((idx, -score.astype(np.float64)))
        grp = self.e.group_of(idx[order] // n_inner)  # the best top_k of each group-by value
        rank = np.zeros(len(order), np.int64)
        for g in np.unique(grp):
            rank[grp == g] = np.arange(int(np.sum(grp == g)))
        order = order[rank < self.e.top_k // self.e.study.n_groups]
        self.top = dict(score=score[order], index=idx[order])

        a, b, o, i, okf = (x.reshape((-1,) + x.shape[2:]) for x in s["front"])
        idx = o.astype(np.int64) * n_inner + i.astype(np.int64)
        a = np.concatenate([self.front["a"], a[okf]])
        b = np.concatenate([self.front["b"], b[okf]])
        idx = np.concatenate([self.front["index"], idx[okf]])
        order = np.lexsort((idx, b, a))
        a, b, idx = a[order], b[order], idx[order]
        prev = np.concatenate([[np.inf], np.minimum.accumulate(b)[:-1]]) if len(b) else b
        on = b < prev
        self.front = dict(a=a[on], b=b[on], index=idx[on])
        self._valued = False

    def fill_values(self):
        """Every reported metric of the top-k and front configurations
        (`vals` [n, metrics] in each), from `Engine.values`: the sweep step
        computes only the metrics it ranks by."""
        if self._valued:
            return
        idx = np.concatenate([self.top["index"], self.front["index"]])
        vals = self.e.values(idx) if idx.size else np.zeros((0, len(self.e.metrics)), np.float32)
        self.top["vals"], self.front["vals"] = vals[:len(self.top["index"])], vals[len(self.top["index"]):]
        self._valued = True

    # ---- persistence

    def save(self, path: Path):
        """Write the state atomically (a crash leaves the old or the new file)."""
        path = Path(path)
        tmp = path.with_name(path.name + f".tmp{os.getpid()}")
        try:
            self._write(tmp)
            os.replace(tmp, path)
        except BaseException:  # interrupted (Ctrl-C) or a full disk: leave no partial file behind
            tmp.unlink(missing_ok=True)
            raise

    def _write(self, tmp: Path):
        none = np.zeros((0, len(self.e.metrics)), np.float32)  # vals not filled yet (`fill_values`)
        top_vals, front_vals = (self.top["vals"], self.front["vals"]) if self._valued else (none, none)
        with open(tmp, "wb") as f:
            np.savez(f, counts=self.counts, top_score=self.top["score"], top_index=self.top["index"],
                     top_vals=top_vals, front_a=self.front["a"], front_b=self.front["b"],
                     front_index=self.front["index"], front_vals=front_vals, ax_feas=self.ax_feas,
                     ax_ok=self.ax_ok, ax_best=self.ax_best, hist=self.hist,
                     meta=np.array(json.dumps(dict(next_block=self.next_block, elapsed=self.elapsed,
                                                   front_overflow=self.front_overflow,
                                                   fingerprint=self.e.study.fingerprint,
                                                   grid=dataclasses.asdict(self.e.grid),
                                                   metrics=list(self.e.metrics), top_k=self.e.top_k,
                                                   fast_compile=bool(self.e.fast_compile)))))
            f.flush()
            os.fsync(f.fileno())

    def load(self, path: Path) -> bool:
        """Resume from a state file; False if absent. SpecError if from another study."""
        path = Path(path)
        if not path.is_file():
            return False
        with np.load(path) as z:
            meta = json.loads(str(z["meta"]))
            # fast_compile: the two code generators may differ in a value's last bit
            mine = dict(fingerprint=self.e.study.fingerprint, grid=dataclasses.asdict(self.e.grid),
                        metrics=list(self.e.metrics), top_k=self.e.top_k, fast_compile=bool(self.e.fast_compile))
            meta.setdefault("fast_compile", False)  # states written before the option
            for key, v in mine.items():
                if meta.get(key) != v:
                    raise SpecError(f"{path}: state from a different study or engine ({key} differs); "
                                    "use another --out or --restart")
            self.counts = z["counts"]
            self.top = dict(score=z["top_score"], index=z["top_index"], vals=z["top_vals"])
            self.front = dict(a=z["front_a"], b=z["front_b"], index=z["front_index"], vals=z["front_vals"])
            self._valued = len(self.top["vals"]) == len(self.top["index"]) and \
                len(self.front["vals"]) == len(self.front["index"])
            self.ax_feas, self.ax_ok, self.ax_best, self.hist = z["ax_feas"], z["ax_ok"], z["ax_best"], z["hist"]
        self.next_block = meta["next_block"]
        self.elapsed = meta["elapsed"]
        self.front_overflow = meta["front_overflow"]
        return True

    @property
    def done(self) -> bool:
        return self.next_block >= self.e.grid.n_blocks


def fetch(tree):
    """Per-device summaries to host numpy, on one process or many."""
    if jax.process_count() == 1:
        return jax.device_get(tree)
    from jax.experimental import multihost_utils
    return multihost_utils.process_allgather(tree, tiled=True)


def remove_stale_temporaries(state_path) -> list[Path]:
    """Delete the temporary state files (`state.npz.tmpPID`) that a killed
    run left next to `state_path`; returns those removed."""
    path = Path(state_path)
    stale = sorted(path.parent.glob(path.name + ".tmp*")) if path.parent.is_dir() else []
    for p in stale:
        p.unlink(missing_ok=True)
    return stale


def run(engine: Engine, state_path=None, *, progress=True, max_steps=None, on_step=None, say=None) -> Result:
    """Sweep the whole study (or resume it) and return the `Result`.

    Args:
      engine: the compiled study.
      state_path: file to resume from and write after every step (process 0
        writes; every process reads), or None for no persistence.
      progress: show a tqdm bar (configurations/s and ETA) on process 0.
      max_steps: stop after this many steps (to test interruption).
      on_step: optional callback(result) after each merged step.
      say: optional callable(str) for one-line notes on process 0 (a resume:
        "resumed from block K of N").
    On an interruption the progress bar is closed (its line ended) before
    the exception goes on; the state on disk is the last finished step's.
    """
    res = Result(engine)
    lead = jax.process_index() == 0
    if state_path is not None:
        if lead:
            remove_stale_temporaries(state_path)
        if res.load(state_path) and lead and say is not None:
            say(f"resumed from block {res.next_block:,} of {engine.grid.n_blocks:,} "
                f"({int(res.counts[0]):,} of {engine.study.size:,} configurations done, {state_path})")
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils
        res.next_block = int(multihost_utils.broadcast_one_to_all(np.int32(res.next_block)))
    bar = None
    if progress and lead:
        from tqdm import tqdm
        bar = tqdm(total=engine.study.size, initial=int(res.counts[0]), unit="cfg", unit_scale=True,
                   desc=engine.study.name, smoothing=0.1)
    try:
        _loop(engine, res, state_path, bar, max_steps, on_step, lead)
    finally:
        if bar is not None:
            bar.close()  # ends the bar's line, also when interrupted
    res.fill_values()
    return res


def _loop(engine, res, state_path, bar, max_steps, on_step, lead):
    gr = engine.grid
    t0 = time.perf_counter()
    elapsed0 = res.elapsed
    base = res.next_block
    pending = engine.step(base) if base < gr.n_blocks else None
    steps = 0
    while pending is not None:
        nxt = base + engine.blocks_per_call
        # Dispatch the next step before fetching this one, so the device never waits for the host.
        stop = max_steps is not None and steps + 1 >= max_steps
        ahead = engine.step(nxt) if (nxt < gr.n_blocks and not stop) else None
        s = fetch(pending)
        before = int(res.counts[0])
        res.merge(s)
        res.next_block = min(nxt, gr.n_blocks)
        res.elapsed = elapsed0 + time.perf_counter() - t0
        if state_path is not None and lead:
            res.save(state_path)
        if bar is not None:
            bar.update(int(res.counts[0]) - before)
        if on_step is not None:
            on_step(res)
        steps += 1
        base, pending = nxt, ahead


