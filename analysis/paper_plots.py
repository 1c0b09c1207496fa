"""Plots of the papers' figures (matplotlib, Agg canvas, no pyplot state): bars with intervals, and points.

Each takes a long data frame (one row per bar or point) and writes a PNG; the frame is what the figure's CSV
holds, so the picture and its data cannot differ.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["interval_bars", "points"]

_PALETTE = ("#30638e", "#d1495b", "#edae49", "#00798c", "#66a182", "#8d6a9f", "#8c1c13", "#bbbbbb")


def _figure(panels: int, width: float, height: float) -> Figure:
    # matplotlib is loaded by the first figure drawn, not by every command that imports the papers' tables.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    ncols = 1 if panels == 1 else 2
    nrows = (panels + ncols - 1) // ncols
    fig = Figure(figsize=(width * ncols, height * nrows), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def interval_bars(frame: pd.DataFrame, path: Path, *, panel: Sequence[str], bar: str, series: str,
                  value: str = "estimate", low: str = "low", high: str = "high", title: str,
                  ylabel: str = "%") -> Path:
    """One panel per value of the ``panel`` columns, bars per ``bar`` grouped by ``series``, with 95% intervals
    where the frame has them (values are shares, drawn as percent)."""
    if frame.empty:
        raise ValueError("no rows to draw")
    keys = list(frame.groupby(list(panel), sort=True).groups) if panel else [()]
    fig = _figure(len(keys), max(6.0, 0.6 * frame[bar].nunique() * max(1, frame[series].nunique()) + 2), 3.2)
    all_series = sorted(frame[series].astype(str).unique())
    for index, key in enumerate(keys):
        key = key if isinstance(key, tuple) else (key,)
        part = frame
        for column, wanted in zip(panel, key, strict=True):
            part = part[part[column] == wanted]
        ax = fig.add_subplot((len(keys) + 1) // 2 if len(keys) > 1 else 1, 2 if len(keys) > 1 else 1, index + 1)
        bars = sorted(part[bar].astype(str).unique())
        width = 0.8 / max(1, len(all_series))
        for s, name in enumerate(all_series):
            rows = part[part[series].astype(str) == name]
            by_bar = {str(b): record for b, record in zip(rows[bar], rows.to_dict("records"), strict=True)}
            x = np.arange(len(bars)) + s * width
            heights = np.array([_num(by_bar.get(b, {}).get(value)) for b in bars])
            lows = np.array([_num(by_bar.get(b, {}).get(low)) for b in bars])
            highs = np.array([_num(by_bar.get(b, {}).get(high)) for b in bars])
            ax.bar(x, 100 * np.nan_to_num(heights), width, label=name, color=_PALETTE[s % len(_PALETTE)])
            has = np.isfinite(lows) & np.isfinite(highs) & np.isfinite(heights)
            if has.any():
                error = [100 * (heights - lows)[has], 100 * (highs - heights)[has]]
                ax.errorbar(x[has], 100 * heights[has], yerr=error, fmt="none", ecolor="black", capsize=2,
                            linewidth=0.8)
        ax.set_xticks(np.arange(len(bars)) + width * (len(all_series) - 1) / 2, labels=bars, rotation=30,
                      ha="right", fontsize=7)
        ax.set_ylim(0, 100)
        ax.set_ylabel(ylabel, fontsize=8)
        ax.set_title(" | ".join(str(k) for k in key), fontsize=8)
        if index == 0:
            ax.legend(fontsize=6)
    fig.suptitle(title, fontsize=9)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", bbox_inches="tight")
    return path


def points(frame: pd.DataFrame, path: Path, *, x: str, y: str, label: str, size: str | None = None,
           title: str, xlabel: str, ylabel: str) -> Path:
    """One point per row at (``x``, ``y``) (differences in percentage points), labelled by ``label``; rows whose
    ``size`` column is true are drawn large (pooled rows)."""
    if frame.empty:
        raise ValueError("no rows to draw")
    fig = _figure(1, 6.5, 5.0)
    ax = fig.add_subplot(1, 1, 1)
    labels = sorted(frame[label].astype(str).unique())
    for i, name in enumerate(labels):
        part = frame[frame[label].astype(str) == name]
        big = part[size].astype(bool).to_numpy() if size else np.zeros(len(part), dtype=bool)
        ax.scatter(100 * part[x].astype(float), 100 * part[y].astype(float), s=np.where(big, 80, 18),
                   color=_PALETTE[i % len(_PALETTE)], label=name, alpha=0.85)
    ax.axhline(0, color="grey", linewidth=0.6)
    ax.axvline(0, color="grey", linewidth=0.6)
    ax.set_xlabel(xlabel, fontsize=8)
    ax.set_ylabel(ylabel, fontsize=8)
    ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", bbox_inches="tight")
    return path


def _num(value: object) -> float:
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return float("nan")
    return number
