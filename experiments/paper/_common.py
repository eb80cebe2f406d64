"""Shared helpers of the paper's case studies (experiments/paper/*.py).

* `evaluate_many`: the one cost model over a list of configurations, as one
  jitted vmap per tree structure (transformers share one compiled program,
  Mamba models get their own), so a script compiles once or twice;
* `workload`, `npu`: the paper's use cases and baseline NPU as pytrees;
* `table`, `figure`, `save`: printing with units and one plot style.
"""

import argparse
import functools
import os

import jax
import numpy as np

import jaxplat as jp
from jaxplat.model import dtype_fields, hardware_from_dict
from jaxplat.report import table  # noqa: F401  (re-exported for the scripts)
from jaxplat.search import enable_compilation_cache

HERE = os.path.dirname(os.path.abspath(__file__))
FIGURES = os.path.join(HERE, "figures")
PAPER = "GenZ (Bambhaniya et al., arXiv 2406.01698)"
GB, TB = 1e9, 1e12


def parser(doc: str, name: str) -> argparse.ArgumentParser:
    """Command line of a case study: --out (PNG path) and --quick (reduced grid)."""
    ap = argparse.ArgumentParser(description=doc.strip().splitlines()[0])
    ap.add_argument("--out", default=os.path.join(FIGURES, f"{name}.png"), help="figure path (PNG)")
    ap.add_argument("--quick", action="store_true", help="a reduced grid (smoke test)")
    return ap


def setup():
    """Keep compiled programs on disk between runs (JAX's persistent cache)."""
    enable_compilation_cache()


def stack(trees):
    """One pytree whose leaves are the given trees' leaves stacked on axis 0."""
    return jax.tree.map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *trees)


@functools.cache
def _vmapped(options: jp.Options):
    return jax.jit(jax.vmap(lambda m, h, p, w: jp.evaluate(m, h, p, w, options)))


def evaluate_many(configs, options: jp.Options | None = None) -> dict:
    """`jp.evaluate` of every (model, hardware, parallel, workload) in
    `configs`, grouped by tree structure (one vmapped program per group).
    Returns {Metrics field: [len(configs)] numpy array}."""
    options = options or jp.Options()
    groups = {}
    for i, c in enumerate(configs):
        groups.setdefault(jax.tree.structure(c), []).append(i)
    out = {}
    for idx in groups.values():
        m = jax.device_get(_vmapped(options)(*stack([configs[i] for i in idx])))
        for k, v in vars(m).items():
            out.setdefault(k, np.zeros(len(configs), np.asarray(v).dtype))[idx] = v
    return out


def with_dtype(wl: jp.Workload, dtype: str) -> jp.Workload:
    """`wl` with weights, activations and KV cache all in `dtype`."""
    return jp.replace(wl, **dtype_fields({k: dtype for k in ("weights", "activations", "kv")}))


def workload(name="chatbot", dtype=None, **changes) -> jp.Workload:
    """A built-in use case (GenZ's use-case table), optionally in one dtype and with fields changed."""
    wl = jp.load_workload(name)
    if dtype:
        wl = with_dtype(wl, dtype)
    return jp.replace(wl, **{k: float(v) for k, v in changes.items()})


def npu(flops=800e12, mem=40e9, bw=4e12, icn=300e9, latency=2e-6, domain=4096, levels=None) -> jp.Hardware:
    """The paper's baseline NPU (GenZ, arXiv 2406.01698, Sec. 6 "Scaling HW
    characteristics": 800 TFLOP/s, 40 GB at 4 TB/s, 300 GB/s links with
    2 µs latency; the GenZ repository's "Paper charts/Sec 6.A TFLOPS
    scaling.ipynb" system). FP8 at twice the bf16 rate (a common ratio;
    assumed). Efficiencies 1 as GenZ's default System. The paper models no
    power cap, so the board power is one that never binds (1e5 W). `levels`:
    network levels instead of one flat one."""
    net = levels or [{"name": "icn", "domain": domain, "bandwidth": icn, "latency": latency}]
    return hardware_from_dict({"flops": {"bf16": flops, "fp8": 2 * flops},
                               "memory": [{"name": "hbm", "size": mem, "bandwidth": bw}],
                               "network": net, "tdp_w": 1e5}, src="baseline NPU")


def figure(nrows=1, ncols=1, size=(11, 4.2)):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.rcParams.update({"font.size": 10, "axes.grid": True, "grid.alpha": 0.3, "legend.fontsize": 8})
    return plt.subplots(nrows, ncols, figsize=size, squeeze=False)


def log2_axes(axes, xs, xlabels, xlabel, ylabels):
    """Log-log panels over a power-of-two x grid: ticks at xs named xlabels, one y label per axis."""
    for ax, ylabel in zip(axes, ylabels, strict=True):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(xs, xlabels)
        ax.minorticks_off()
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)


# ticks within one decade: 1-9 alone leave 10-20 bare (a curve at 15 gets no label)
NARROW_SUBS = (1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0)


def _readable_log_ticks(fig):
    """Log axes left to matplotlib's locator get ticks at 1, 2, 5 x 10^n in
    plain numbers (not 4x10^0), so a narrow range still shows labels."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            if isinstance(axis.get_major_locator(), LogLocator) and getattr(axis.get_transform(), "base", 0) == 10:
                lo, hi = sorted(axis.get_view_interval())
                decades = np.log10(hi / lo) if lo > 0 else 9.0
                subs = ((1.0, 2.0, 5.0) if decades > 2.5 else (1.0, 1.5, 2.0, 3.0, 5.0, 7.0) if decades > 1.0
                        else NARROW_SUBS)
                axis.set_major_locator(LogLocator(base=10, subs=subs))
                axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
                axis.set_minor_formatter(NullFormatter())


def save(fig, path, title=None, legend_ax=None, ncol=5):
    """Write the figure; `legend_ax`: one legend of that axis's lines below the panels."""
    _readable_log_ticks(fig)
    rect = [0, 0, 1, 1]
    if legend_ax is not None:
        handles, labels = legend_ax.get_legend_handles_labels()
        fig.legend(handles, labels, loc="lower center", ncol=ncol, frameon=False)
        rect[1] = 0.06 + 0.045 * ((len(labels) - 1) // ncol)
    if title:
        fig.suptitle(title, fontsize=11)
    fig.tight_layout(rect=rect)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=110)
    print(f"\nfigure: {os.path.relpath(path)}")


def tokens(x):
    """A token count as 8k / 2M (binary k and M, as context lengths are quoted)."""
    return f"{x // 1048576}M" if x >= 1048576 else f"{x // 1024}k"


def ms(x):
    """Seconds as ms below 1 s, else s (3 significant digits)."""
    return f"{1e3 * x:.3g} ms" if x < 1.0 else f"{x:.3g} s"
