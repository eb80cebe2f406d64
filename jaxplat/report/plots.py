"""Figures (matplotlib, Agg backend: no display needed)."""

from pathlib import Path

_COLORS = ("tab:blue", "tab:red", "tab:green", "tab:orange", "tab:purple", "tab:brown", "tab:pink", "tab:cyan",
           "tab:olive", "tab:gray")


def _shown(col: str, unit: str, values):
    """(axis label, factor from SI) for a column: readable name, seconds as
    ms below 1 s, bytes as GB."""
    from jaxplat.report.html_common import COLUMNS

    name = COLUMNS[col][0] if col in COLUMNS else col.replace("_", " ")
    top = max((abs(float(v)) for v in values), default=0.0)
    if unit == "s" and top < 1.0:
        unit, factor = "ms", 1e3
    elif unit == "B":
        unit, factor = "GB", 1e-9
    else:
        factor = 1.0
    return (f"{name} [{unit}]" if unit else name), factor


def _ticks(axis, log: bool):
    """Few, plainly written tick labels (no overlapping minor labels)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter

    if log:
        axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        axis.set_minor_formatter(NullFormatter())
    else:
        axis.set_major_locator(MaxNLocator(nbins=6))


def pareto_plot(front, top, x: str, y: str, xunit: str, yunit: str, path, title: str = "",
                group: str | None = None, groups=None) -> Path:
    """Scatter of the top-k and the Pareto front of two metrics, saved as PNG.

    Args:
      front, top: pandas DataFrames with columns `x` and `y` (SI units).
      x, y: column names; xunit, yunit: their SI units (seconds are shown in
        ms below 1 s, bytes in GB).
      path: output file (.png).
      group: a column the points are coloured by (with a legend), e.g. the
        study's group_by axis; groups: its values in the order that gives
        their colours (default: as they appear).
    Returns:
      The path written.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    frames = [df for df in (front, top) if len(df)]
    xlabel, xf = _shown(x, xunit, [v for df in frames for v in df[x]])
    ylabel, yf = _shown(y, yunit, [v for df in frames for v in df[y]])
    present = list(dict.fromkeys(str(g) for df in frames if group in df for g in df[group])) if group else []
    order = [str(g) for g in groups] if groups is not None else present
    color = {g: _COLORS[i % len(_COLORS)] for i, g in enumerate(order)}
    groups = [g for g in order if g in present] + [g for g in present if g not in color]
    color.update({g: _COLORS[(len(order) + i) % len(_COLORS)] for i, g in enumerate(groups) if g not in color})

    fig, ax = plt.subplots(figsize=(7.6 if groups else 6.4, 4.4), dpi=120)
    if len(front):
        f = front.sort_values(x)
        ax.step(f[x] * xf, f[y] * yf, where="post", color="0.6" if groups else "tab:blue", lw=1.2, zorder=1,
                label="Pareto front" if groups else None)
    if groups:
        for g in groups:
            if len(top):
                t = top[top[group].astype(str) == g]
                ax.scatter(t[x] * xf, t[y] * yf, s=26, marker="D", facecolors="none", edgecolors=color[g], lw=1.0,
                           zorder=2)
            if len(front):
                f = front[front[group].astype(str) == g]
                ax.scatter(f[x] * xf, f[y] * yf, s=30, c=color[g], zorder=3, edgecolors="white", lw=0.5)
            ax.scatter([], [], s=30, c=color[g], label=g)
        if len(top):
            ax.scatter([], [], s=26, marker="D", facecolors="none", edgecolors="0.3", label="top-k by objective")
    else:
        if len(top):
            ax.scatter(top[x] * xf, top[y] * yf, s=14, c="tab:gray", alpha=0.6, label="top-k by objective")
        if len(front):
            ax.scatter(front[x] * xf, front[y] * yf, s=18, c="tab:blue", label="Pareto front")
    for axis, col, factor in ((ax.xaxis, x, xf), (ax.yaxis, y, yf)):
        vals = [v * factor for df in frames for v in df[col]]
        log = bool(vals and min(vals) > 0 and max(vals) / min(vals) > 20)
        if log:
            (ax.set_xscale if axis is ax.xaxis else ax.set_yscale)("log")
        _ticks(axis, log)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.3, which="both")
    if groups:
        from jaxplat.report.html_common import column_info

        ax.legend(fontsize=8, title=column_info(group)[0], title_fontsize=8, loc="upper left",
                  bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    elif len(top) or len(front):
        ax.legend(fontsize=8)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path)
    plt.close(fig)
    return path


__all__ = ["pareto_plot"]
