"""Figures of the empty-commitment suite (matplotlib, Agg backend, written to files)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from commitbench.judges.followup.outcomes import OutcomeLabel

# Failures first (warm colours), then the desirable labels, then the rest.
LABEL_ORDER: tuple[OutcomeLabel, ...] = (
    OutcomeLabel.FALSE_CLAIM,
    OutcomeLabel.EMPTY,
    OutcomeLabel.UNANCHORED,
    OutcomeLabel.ANCHORED,
    OutcomeLabel.ANCHORED_MISMATCH,
    OutcomeLabel.DONE_NOW,
    OutcomeLabel.DEFERRAL,
    OutcomeLabel.OVER_REFUSAL,
    OutcomeLabel.OTHER,
)
COLOURS: dict[OutcomeLabel, str] = {
    OutcomeLabel.FALSE_CLAIM: "#8c1c13",
    OutcomeLabel.EMPTY: "#d1495b",
    OutcomeLabel.UNANCHORED: "#edae49",
    OutcomeLabel.ANCHORED: "#00798c",
    OutcomeLabel.ANCHORED_MISMATCH: "#7fbcc5",
    OutcomeLabel.DONE_NOW: "#30638e",
    OutcomeLabel.DEFERRAL: "#66a182",
    OutcomeLabel.OVER_REFUSAL: "#8d6a9f",
    OutcomeLabel.OTHER: "#bbbbbb",
}


def plotted_labels(frame: pd.DataFrame) -> tuple[OutcomeLabel, ...]:
    """The labels a figure shows: the original eight, and anchored_mismatch where the frame has it."""
    present = {str(value) for value in frame["outcome"].unique()}
    return tuple(label for label in LABEL_ORDER
                 if label is not OutcomeLabel.ANCHORED_MISMATCH or label.value in present)


def outcome_shares(
    frame: pd.DataFrame, bar: list[str], labels: tuple[OutcomeLabel, ...] | None = None
) -> pd.DataFrame:
    """Share of each outcome label per bar (rows: bars, columns: ``labels``, by default the plotted ones)."""
    counts = frame.groupby([*bar, "outcome"], observed=True).size().unstack("outcome", fill_value=0)
    counts = counts.reindex(columns=[label.value for label in labels or plotted_labels(frame)], fill_value=0)
    return counts.div(counts.sum(axis=1), axis=0)


def stacked_outcome_bars(
    frame: pd.DataFrame, path: Path, bar: tuple[str, ...] = ("model", "variant", "persona", "arm"), *, title: str
) -> Path:
    """One panel per setup, one stacked horizontal bar per (model, variant, persona, arm): outcome shares.

    ``title`` heads the figure; it must name the checker whose labels are plotted (the follow-up report
    passes "labels by the offline baseline checker" or "labels by the LLM checker").
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    setup_of = frame["setup"].astype(str)  # once: a large frame's column is long
    setups = sorted(setup_of.unique())
    if not setups:
        raise ValueError("no labelled responses to plot")
    fig, axes = plt.subplots(len(setups), 1, figsize=(9, 1.6 + 0.9 * len(setups) * 2), squeeze=False)
    fig.suptitle(title, fontsize=11)
    labels = plotted_labels(frame)
    for ax, setup in zip(axes[:, 0], setups, strict=True):
        shares = outcome_shares(frame[setup_of == setup], list(bar), labels)
        names = [" / ".join(str(v) for v in (k if isinstance(k, tuple) else (k,))) for k in shares.index]
        left = [0.0] * len(shares)
        for label in labels:
            values = shares[label.value].tolist()
            ax.barh(names, values, left=left, color=COLOURS[label], label=label.value)
            left = [a + b for a, b in zip(left, values, strict=True)]
        ax.set_xlim(0, 1)
        ax.set_title(f"Setup {setup}", loc="left", fontsize=10)
        ax.invert_yaxis()
    axes[-1, 0].set_xlabel("share of responses")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.08, 1, 0.97))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120, metadata={"Title": title})
    plt.close(fig)
    return path


CHAIN_STAGES: tuple[tuple[str, str], ...] = (
    ("incidence", "incidence (responses)"),
    ("anchored_rate", "anchored (an enabling call)"),
    ("carried_rate", "carried (its arguments match)"),
    ("follow_through_rate", "kept (delivered as asked, on time)"),
)
CHAIN_COLOURS = ("#bbbbbb", "#00798c", "#7fbcc5", "#30638e")


def chain_bars(records: list[dict[str, object]], path: Path, *, title: str) -> Path:
    """One group of four bars per table row (setup / variant / persona / model / arm): the chain from a promise
    to a kept promise, each stage with its 95% interval. ``title`` must name the checker."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    if not records:
        raise ValueError("no follow-through rows to plot")
    names = [" / ".join(str(r.get(k, "")) for k in ("setup", "variant", "persona", "model", "arm")) for r in records]
    fig, ax = plt.subplots(figsize=(9, 2.2 + 0.5 * len(records)))
    fig.suptitle(title, fontsize=11)
    height = 0.8 / len(CHAIN_STAGES)
    positions = np.arange(len(records))
    for offset, ((metric, label), colour) in enumerate(zip(CHAIN_STAGES, CHAIN_COLOURS, strict=True)):
        values = np.array([_number(r.get(metric)) for r in records])
        low = np.array([_number(r.get(f"{metric}_low")) for r in records])
        high = np.array([_number(r.get(f"{metric}_high")) for r in records])
        where = positions + offset * height
        ax.barh(where, np.nan_to_num(values), height=height, color=colour, label=label)
        ok = np.isfinite(low) & np.isfinite(high) & np.isfinite(values)
        ax.errorbar(values[ok], where[ok], xerr=[values[ok] - low[ok], high[ok] - values[ok]], fmt="none",
                    ecolor="#333333", elinewidth=0.8, capsize=2)
    ax.set_yticks(positions + 0.4 - height / 2)
    ax.set_yticklabels(names, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("share (incidence: of responses; anchored, carried: of promises that needed a call; "
                  "kept: of graded promises)", fontsize=8)
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=2, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 1.1 / (2.2 + 0.5 * len(records)), 1, 0.97))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120, metadata={"Title": title})
    plt.close(fig)
    return path


def _number(value: object) -> float:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return float("nan")
