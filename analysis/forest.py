"""A forest plot of model comparisons (matplotlib, drawn off-screen with the Agg canvas).

One row per comparison, metric and group: the difference a minus b as a dot with its 95% interval as a
line, zero marked, the row labelled with the pair, the metric and the group. A flagged comparison
(e.g. a thinking side that returned no reasoning) is drawn hollow and its label ends with '!'.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from commitbench.analysis.comparisons import Comparison

MAX_ROWS = 120  # beyond this a forest plot stops being readable; the CSV holds everything


def forest_plot(comparisons: Sequence[Comparison], path: Path | str, title: str) -> Path:
    """Write the comparisons with a defined difference as a PNG (at most :data:`MAX_ROWS` rows)."""
    path = Path(path)
    rows = [c for c in comparisons if c.estimate is not None][:MAX_ROWS]
    if not rows:
        raise ValueError("no comparison with a defined difference to draw")
    height = max(2.5, 0.28 * len(rows) + 1.4)
    # matplotlib is loaded by the drawing, not by every command that imports this module.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9.0, height), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    positions = list(range(len(rows)))[::-1]
    for y, c in zip(positions, rows, strict=True):
        assert c.estimate is not None
        if c.low is not None and c.high is not None:
            ax.plot([100 * c.low, 100 * c.high], [y, y], color="#355c7d", linewidth=1.6)
        hollow = c.flag is not None
        ax.plot([100 * c.estimate], [y], marker="o", markersize=5, color="#355c7d",
                markerfacecolor="white" if hollow else "#355c7d")
    ax.axvline(0.0, color="#999999", linewidth=1.0, linestyle="--")
    labels = []
    for c in rows:
        group = ", ".join(f"{v}" for v in c.group.values())
        labels.append(f"{c.a} - {c.b} | {c.metric}" + (f" | {group}" if group else "") + (" !" if c.flag else ""))
    ax.set_yticks(positions, labels, fontsize=7)
    ax.set_xlabel("difference a - b (percentage points, 95% paired cluster-bootstrap interval)")
    ax.set_title(title, fontsize=10)
    ax.grid(axis="x", color="#eeeeee")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, metadata={"Title": title})
    return path
