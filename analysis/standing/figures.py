"""Figures of the standing report (matplotlib, drawn off-screen with the Agg canvas).

:func:`strict_heatmap` draws strict accuracy per cell: one panel per model and policy, one row
per intervention, one column per cell, the value printed in each square (grey: no runs, or
every run excluded). The figure object is created directly (no pyplot), so drawing changes no
global matplotlib state and needs no display.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from commitbench.analysis.standing.metrics import MetricValue
from commitbench.analysis.standing.tables import cell_sort_key


def strict_heatmap(values: Sequence[MetricValue], path: Path | str, title: str = "Strict accuracy by cell") -> Path:
    """Write the heatmap of :func:`commitbench.analysis.standing.tables.cell_table` values as a PNG."""
    path = Path(path)
    panels: dict[tuple[str, str], dict[tuple[str, str], float | None]] = {}
    for v in values:
        key = (v.group["agent"], v.group["policy"])
        panels.setdefault(key, {})[(v.group["interventions"], v.group["cell"])] = v.estimate
    if not panels:
        raise ValueError("no strict-accuracy values to draw")
    cells = sorted({c for panel in panels.values() for _, c in panel}, key=cell_sort_key)
    arms = sorted({a for panel in panels.values() for a, _ in panel}, key=lambda a: (a != "none", a))
    n = len(panels)
    ncols = 1 if n == 1 else 2
    nrows = (n + ncols - 1) // ncols
    width = max(6.0, 0.55 * len(cells) + 2.5)
    height = max(2.0, 0.45 * len(arms) + 2.2)  # room for the rotated cell names under each panel
    # matplotlib is loaded by the drawing, not by every command that imports this module.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.colors import ListedColormap
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width * ncols, height * nrows), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    cmap = ListedColormap(
        ["#d73027", "#f46d43", "#fdae61", "#fee08b", "#d9ef8b", "#a6d96a", "#66bd63", "#1a9850"]
    ).with_extremes(bad="#d0d0d0")
    image = None
    for i, ((agent, policy), panel) in enumerate(sorted(panels.items())):
        ax = fig.add_subplot(nrows, ncols, i + 1)
        grid = np.full((len(arms), len(cells)), np.nan)
        for (arm, cell), value in panel.items():
            if value is not None:
                grid[arms.index(arm), cells.index(cell)] = value
        image = ax.imshow(np.ma.masked_invalid(grid), cmap=cmap, vmin=0.0, vmax=1.0, aspect="auto")
        ax.set_xticks(range(len(cells)), labels=cells, rotation=60, ha="right", fontsize=7)
        ax.set_yticks(range(len(arms)), labels=arms, fontsize=7)
        ax.set_title(f"{agent} | policy {policy}", fontsize=9)
        for r in range(len(arms)):
            for c in range(len(cells)):
                if np.isfinite(grid[r, c]):
                    ax.text(c, r, f"{100 * grid[r, c]:.0f}", ha="center", va="center", fontsize=6)
    if image is not None:
        fig.colorbar(image, ax=fig.axes, shrink=0.8, label="strict accuracy")
    fig.suptitle(title, fontsize=10)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", bbox_inches="tight")
    return path
