"""Figures (matplotlib, Agg backend: no display needed)."""

from pathlib import Path


def pareto_plot(front, top, x: str, y: str, xunit: str, yunit: str, path, title: str = "") -> Path:
    """Scatter of the top-k and the Pareto front of two metrics, saved as PNG.

    Args:
      front, top: pandas DataFrames with columns `x` and `y` (SI units).
      x, y: column names; xunit, yunit: their units for the axis labels.
      path: output file (.png).
    Returns:
      The path written.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.4), dpi=120)
    if len(top):
        ax.scatter(top[x], top[y], s=14, c="tab:gray", alpha=0.6, label="top-k by objective")
    if len(front):
        f = front.sort_values(x)
        ax.step(f[x], f[y], where="post", color="tab:blue", lw=1.2)
        ax.scatter(f[x], f[y], s=18, c="tab:blue", label="Pareto front")
    for axis, col in ((ax.set_xscale, x), (ax.set_yscale, y)):
        vals = [v for df in (front, top) if len(df) for v in df[col]]
        if vals and min(vals) > 0 and max(vals) / min(vals) > 20:
            axis("log")
    ax.set_xlabel(f"{x} [{xunit}]" if xunit else x)
    ax.set_ylabel(f"{y} [{yunit}]" if yunit else y)
    ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.3, which="both")
    if len(top) or len(front):
        ax.legend(fontsize=8)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path)
    plt.close(fig)
    return path


__all__ = ["pareto_plot"]
