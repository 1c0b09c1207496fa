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
    OutcomeLabel.DONE_NOW: "#30638e",
    OutcomeLabel.DEFERRAL: "#66a182",
    OutcomeLabel.OVER_REFUSAL: "#8d6a9f",
    OutcomeLabel.OTHER: "#bbbbbb",
}


def outcome_shares(frame: pd.DataFrame, bar: list[str]) -> pd.DataFrame:
    """Share of each outcome label per bar (rows: bars, columns: labels in LABEL_ORDER)."""
    counts = frame.groupby([*bar, "outcome"], observed=True).size().unstack("outcome", fill_value=0)
    counts = counts.reindex(columns=[label.value for label in LABEL_ORDER], fill_value=0)
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

    setups = sorted(frame["setup"].astype(str).unique())
    if not setups:
        raise ValueError("no labelled responses to plot")
    fig, axes = plt.subplots(len(setups), 1, figsize=(9, 1.6 + 0.9 * len(setups) * 2), squeeze=False)
    fig.suptitle(title, fontsize=11)
    for ax, setup in zip(axes[:, 0], setups, strict=True):
        shares = outcome_shares(frame[frame["setup"].astype(str) == setup], list(bar))
        names = [" / ".join(str(v) for v in (k if isinstance(k, tuple) else (k,))) for k in shares.index]
        left = [0.0] * len(shares)
        for label in LABEL_ORDER:
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
