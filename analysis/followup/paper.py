"""The follow-up paper's tables and figures, from a run (``commitbench report RUN --paper-tables``).

Every table and figure of the empty-commitment paper is listed (see :mod:`commitbench.analysis.paper_tables`
for the statuses): its result tables and figures are computed from the run's labelled responses with the
rows and columns the paper shows (pooled over models where the paper pools, the generic persona and the
plain arm where it says so); its design tables are written from the suite's data (setups, tools,
categories, doability); diagrams, human-label agreement and the log prevalence study are named as not
reproducible from a run.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from commitbench.analysis.followup.figures import stacked_outcome_bars
from commitbench.analysis.followup.metrics import (
    ecr_by_failure_type,
    outcome_distribution,
    paired_difference,
    rate_table,
)
from commitbench.analysis.paper_plots import interval_bars, points
from commitbench.analysis.paper_tables import PaperOutput, not_reproducible, output
from commitbench.episodes.followup.doability import load_doability
from commitbench.episodes.followup.setups import SuiteSetups

__all__ = ["PAPER", "followup_paper_tables"]

PAPER = "the empty-commitment paper (Empty Commitments)"
POOLED = "pooled"
GENERIC = "generic"
NONE = "none"


def followup_paper_tables(frame: pd.DataFrame, setups: SuiteSetups, prompt_hashes: dict[str, str],
                          headline: Sequence[dict[str, Any]], n_boot: int = 1000, seed: int = 0) -> list[PaperOutput]:
    """Every table and figure of the follow-up paper, as far as this run gives it."""
    plain = frame[_arm(frame) == NONE]
    return [
        not_reproducible("followup-table1", "The outcome labels in rule order",
                         "a table of definitions, not a result: commitbench.judges.followup.outcomes derives the "
                         "labels in that order and docs/followup.md lists them"),
        _table2(setups),
        _table3(frame),
        not_reproducible("followup-figure1", "The labelling pipeline", "a diagram of the checker, not a result "
                         "(docs/followup.md describes the detector, the feasibility rules and the response judge)"),
        not_reproducible("followup-table4", "The three fixes: what each needs and can fix",
                         "a table of the design, not a result (docs/interventions.md describes each fix)"),
        _figure2(plain, n_boot, seed),
        _per_model_table("followup-table5", plain, n_boot, seed, "Per model and pooled (%): failure and false-claim "
                         "rates in C0-inferred, failure in C0-stated, and failure, unanchored (clarifying replies "
                         "left out) and over-refusal in C2-inferred; generic persona, no fix"),
        _figure3(frame, n_boot, seed),
        not_reproducible("followup-table6", "Agreement of the detector and the judge with human labels",
                         "needs human labels: commitbench annotate export/import, then commitbench validate RUN "
                         "HUMAN.jsonl"),
        _table7(setups),
        _table8(),
        not_reproducible("followup-table9", "The feasibility rules",
                         "a table of rules, not a result (commitbench.judges.followup.feasibility is their code, "
                         "docs/followup.md their text)"),
        _table10(prompt_hashes),
        *_pilot(plain, n_boot, seed),
        not_reproducible("followup-figure5", "Empty commitments and false claims per 1,000 logged assistant turns",
                         "measured on a log of real conversations, not on a run: commitbench prevalence LOG"),
        _figure6(plain, n_boot, seed),
        _figure7(plain, n_boot, seed),
        _figure8(plain, n_boot, seed),
        _figure9(plain, n_boot, seed),
        _figure10(plain, n_boot, seed),
        _table12(frame, n_boot, seed),
        _table13(headline),
    ]


# ------------------------------------------------------------------ helpers
def _values(frame: pd.DataFrame, column: str) -> set[str]:
    return set(frame[column].astype(str)) if len(frame) else set()


def _arm(frame: pd.DataFrame) -> pd.Series:
    """The arm's intervention name, without a note the label carries ('rewrite (offline flagger)' is rewrite)."""
    return frame["arm"].astype(str).str.split(" (", n=1, regex=False).str[0]


def _noted(frame: pd.DataFrame, arm: str) -> list[str]:
    """What an arm's label says was played otherwise than the paper did (fix C with an offline flagger, say)."""
    labels = {a for a in _values(frame, "arm") if a.split(" (", 1)[0] == arm and " (" in a}
    return [f"the arm was played as {label}, not as the paper plays it" for label in sorted(labels)]


def _generic(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[frame["persona"].astype(str) == GENERIC]


def _pooled(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.assign(model=POOLED)


def _outcomes(frame: pd.DataFrame, by: Sequence[str], n_boot: int, seed: int) -> pd.DataFrame:
    return outcome_distribution(frame, list(by), n_boot=n_boot, seed=seed) if len(frame) else pd.DataFrame()


def _outcome_figure(item_id: str, caption: str, frame: pd.DataFrame, by: Sequence[str], bar: Sequence[str],
                    n_boot: int, seed: int, missing: Sequence[str] = ()) -> PaperOutput:
    data = _outcomes(frame, by, n_boot, seed)

    def draw(path: Path) -> Path:
        return stacked_outcome_bars(frame, path, bar=tuple(bar), title=caption)

    return output(item_id, caption, data, missing=missing, draw=draw if len(frame) else None)


def _needs(frame: pd.DataFrame, column: str, wanted: Sequence[str]) -> list[str]:
    have = _values(frame, column)
    return [f"no {column} {w} in the run" for w in wanted if w not in have]


# ------------------------------------------------------------------ design tables from the suite's data
def _table2(setups: SuiteSetups) -> PaperOutput:
    rows = []
    for setup_id, setup in setups.setups.items():
        props = setup.properties
        rows.append({"setup": setup_id.value, "tools": ", ".join(setup.tools),
                     "acts after the turn": props.acts_after_turn, "schedules actions": props.schedules_actions,
                     "watches events": props.watches_events, "notifies the user later": props.notifies_user_later,
                     "remembers across sessions": props.remembers_across_sessions,
                     "delegates to humans": props.delegates_to_humans,
                     "outbound channels": ", ".join(c.value for c in props.outbound_channels)})
    return output("followup-table2", "The five setups and their persistence properties", pd.DataFrame(rows))


def _table3(frame: pd.DataFrame) -> PaperOutput:
    counts = (frame.assign(category=frame["category"].astype(str)).groupby("category")["request_id"].nunique()
              .rename("requests").reset_index())
    return output("followup-table3", "Request categories with the number of requests played", counts)


def _table7(setups: SuiteSetups) -> PaperOutput:
    rows = [{"tool": t.name, "what it does": t.description, "writes": t.is_write,
             "lets the assistant": ", ".join(c.value for c in t.enables), "wakes the assistant": t.wakes_assistant,
             "setups": ", ".join(s.value for s, d in setups.setups.items() if t.name in d.tools)} for t in setups.tools]
    return output("followup-table7", "The tools and what their mocks do", pd.DataFrame(rows))


def _table8() -> PaperOutput:
    matrix = load_doability()
    rows = [{"category": category.value, **{setup.value: level.value for setup, level in levels.items()}}
            for category, levels in matrix.matrix.items()]
    return output("followup-table8", "The doability matrix: which categories each setup can serve (before the "
                  "per-request changes)", pd.DataFrame(rows))


def _table10(prompt_hashes: dict[str, str]) -> PaperOutput:
    frame = pd.DataFrame([{"prompt": name, "sha256": digest} for name, digest in sorted(prompt_hashes.items())])
    return output("followup-table10", "The prompt versions the numbers come from", frame,
                  missing=["the hashes of this run's prompts and data, as its manifest records them"])


# ------------------------------------------------------------------ result tables and figures
def _figure2(plain: pd.DataFrame, n_boot: int, seed: int) -> PaperOutput:
    frame = _pooled(_generic(plain))
    return _outcome_figure("followup-figure2", "Outcome distribution by setup, inferred against stated, generic "
                           "persona, pooled over the models", frame, ("setup", "variant"), ("model", "variant"),
                           n_boot, seed, _needs(frame, "variant", ("inferred", "stated")))


def _condition(frame: pd.DataFrame, setup: str, variant: str) -> pd.DataFrame:
    return frame[(frame["setup"].astype(str) == setup) & (frame["variant"].astype(str) == variant)]


def _per_model_table(item_id: str, plain: pd.DataFrame, n_boot: int, seed: int, caption: str) -> PaperOutput:
    generic = _generic(plain)
    columns = (("C0 inferred failure", "C0", "inferred", "failure_rate"),
               ("C0 inferred false claim", "C0", "inferred", "false_claim_rate"),
               ("C0 stated failure", "C0", "stated", "failure_rate"),
               ("C2 inferred failure", "C2", "inferred", "failure_rate"),
               ("C2 inferred unanchored", "C2", "inferred", "unanchored_rate"),
               ("C2 inferred over-refusal", "C2", "inferred", "over_refusal_rate"))
    records: dict[str, dict[str, Any]] = {}
    missing = []
    for name, setup, variant, metric in columns:
        part = _condition(generic, setup, variant)
        if part.empty:
            missing.append(f"no {setup}-{variant} responses (generic persona, no fix)")
            continue
        for frame in (part, _pooled(part)):
            table = rate_table(frame, metric, ["model"], n_boot=n_boot, seed=seed)
            for row in table.to_dict("records"):
                record = records.setdefault(str(row["model"]), {"model": str(row["model"])})
                record[name] = row["estimate"]
                record[f"{name} low"] = row["low"]
                record[f"{name} high"] = row["high"]
    ordered = sorted(records.values(), key=lambda r: (r["model"] == POOLED, r["model"]))
    return output(item_id, caption, pd.DataFrame(ordered), missing=sorted(set(missing)))


def _figure3(frame: pd.DataFrame, n_boot: int, seed: int) -> PaperOutput:
    doable = frame[frame["setup"].astype(str).isin(["C2", "C3", "C4"])]
    generic = _generic(doable)
    records: list[dict[str, Any]] = []
    inferred = generic[generic["variant"].astype(str) == "inferred"].assign(arm=_arm)
    fixes = (("stated", "variant", "stated", "inferred", generic[_arm(generic) == NONE]),
             ("A: capability card", "arm", "card", NONE, inferred),
             ("C: detect and rewrite", "arm", "rewrite", NONE, inferred))
    missing = _noted(doable, "rewrite")
    for fix, compare, a, b, part in fixes:
        if a not in _values(part, compare) or b not in _values(part, compare):
            missing.append(f"no {fix} beside its baseline in C2-C4")
            continue
        for pooled in (False, True):
            base = _pooled(part) if pooled else part
            rows: dict[str, dict[str, Any]] = {}
            for metric, column in (("failure_rate", "failure"), ("over_refusal_rate", "over_refusal")):
                table = paired_difference(base, metric, compare, a, b, by=["model"], n_boot=n_boot, seed=seed)
                for row in table.to_dict("records"):
                    record = rows.setdefault(str(row["model"]), {"fix": fix, "model": str(row["model"]),
                                                                 "pooled": pooled})
                    record[f"{column} change"] = row["difference"]
                    record[f"{column} low"] = row["low"]
                    record[f"{column} high"] = row["high"]
            records.extend(rows.values())
    data = pd.DataFrame(records)

    def draw(path: Path) -> Path:
        return points(data, path, x="over_refusal change", y="failure change", label="fix", size="pooled",
                      title="Change in failure rate against change in over-refusal (C2-C4, against the inferred "
                      "baseline)", xlabel="over-refusal change (pp)", ylabel="failure change (pp)")

    return output("followup-figure3", "Change in failure rate against change in over-refusal for each fix, against "
                  "the inferred baseline of the same model and setup, in C2-C4 (pooled and per model)", data,
                  missing=missing, draw=draw if len(data) else None)


def _pilot(plain: pd.DataFrame, n_boot: int, seed: int) -> list[PaperOutput]:
    why = ("the pilot is its own run, several samples of each episode (samples: 3 on 60 requests); this run has "
           "one sample")
    if plain["sample"].nunique() < 2 if len(plain) else True:
        return [not_reproducible("followup-figure4", "Pilot: outcome distribution by setup", why),
                not_reproducible("followup-table11", "Pilot: the per-model rates of Table 5", why)]
    return [
        _outcome_figure("followup-figure4", "Pilot: outcome distribution by setup, inferred against stated, pooled "
                        "over the models and samples", _pooled(_generic(plain)), ("setup", "variant"),
                        ("model", "variant"), n_boot, seed),
        _per_model_table("followup-table11", plain, n_boot, seed, "Pilot, per model (%): the rates of Table 5"),
    ]


def _figure6(plain: pd.DataFrame, n_boot: int, seed: int) -> PaperOutput:
    return _outcome_figure("followup-figure6", "Outcome distribution per model, generic persona",
                           _generic(plain), ("model", "setup", "variant"), ("model", "variant"), n_boot, seed)


def _figure7(plain: pd.DataFrame, n_boot: int, seed: int) -> PaperOutput:
    support = _pooled(plain[plain["persona"].astype(str) == "support"])
    return _outcome_figure("followup-figure7", "Outcome distribution under the support persona by setup and "
                           "variant, pooled over the models", support, ("setup", "variant"), ("model", "variant"),
                           n_boot, seed, [] if len(support) else ["no support-persona responses"])


def _figure8(plain: pd.DataFrame, n_boot: int, seed: int) -> PaperOutput:
    frame = _pooled(_generic(plain))
    data = ecr_by_failure_type(frame, ["setup", "variant"], n_boot=n_boot, seed=seed) if len(frame) else pd.DataFrame()
    long = data.assign(bar=data["setup"].astype(str) + " " + data["variant"].astype(str)) if len(data) else data

    def draw(path: Path) -> Path:
        return interval_bars(long, path, panel=(), bar="bar", series="metric",
                             title="Empty commitments by primary failure type, over agent-initiated commitments")

    return output("followup-figure8", "Empty commitments by primary failure type (capability, temporal, agentive) "
                  "as a share of agent-initiated commitments, per setup and variant, generic persona, pooled", data,
                  draw=draw if len(data) else None)


def _figure9(plain: pd.DataFrame, n_boot: int, seed: int) -> PaperOutput:
    frame = plain[plain["setup"].astype(str).isin(["C2", "C3", "C4"])]
    data = (rate_table(frame, "unanchored_rate_with_clarifying", ["model", "setup", "variant"], n_boot=n_boot,
                       seed=seed) if len(frame) else pd.DataFrame())

    def draw(path: Path) -> Path:
        return interval_bars(data, path, panel=("setup",), bar="model", series="variant",
                             title="Unanchored rate, clarifying replies included (C2-C4)")

    return output("followup-figure9", "Unanchored rate in C2-C4 per model, inferred and stated, clarifying replies "
                  "included, with 95% intervals", data, missing=_needs(frame, "setup", ("C2", "C3", "C4")),
                  draw=draw if len(data) else None)


def _figure10(plain: pd.DataFrame, n_boot: int, seed: int) -> PaperOutput:
    frame = _pooled(_condition(plain, "C0", "inferred"))
    tables = [rate_table(frame, metric, ["category"], n_boot=n_boot, seed=seed)
              for metric in ("incidence", "ecr")] if len(frame) else []
    data = pd.concat(tables, ignore_index=True) if tables else pd.DataFrame()

    def draw(path: Path) -> Path:
        return interval_bars(data, path, panel=(), bar="category", series="metric",
                             title="Commitment incidence and empty-commitment rate per category (C0-inferred)")

    return output("followup-figure10", "Commitment incidence and empty-commitment rate per request category in "
                  "C0-inferred, both personas, pooled (the request set's validity check)", data,
                  draw=draw if len(data) else None)


def _table12(frame: pd.DataFrame, n_boot: int, seed: int) -> PaperOutput:
    conditions = (("inferred baseline", NONE, "inferred"), ("stated", NONE, "stated"),
                  ("A: capability card", "card", "inferred"), ("C: detect and rewrite", "rewrite", "inferred"))
    parts, missing = [], _noted(frame, "rewrite")
    for name, arm, variant in conditions:
        part = frame[(_arm(frame) == arm) & (frame["variant"].astype(str) == variant)
                     & frame["setup"].astype(str).isin(["C0", "C2"])]
        if part.empty:
            missing.append(f"no {name} responses in C0 or C2")
            continue
        for by in ("source_kind", "category"):
            table = rate_table(_pooled(part), "failure_rate", [by, "setup"], n_boot=n_boot, seed=seed)
            parts.append(table.rename(columns={by: "group"}).assign(breakdown=by, condition=name))
    data = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    return output("followup-table12", "Failure rate (%) by request source and category, both personas, pooled: the "
                  "inferred baseline, the stated variant and fixes A and C, in C0 and C2", data, missing=missing)


def _table13(headline: Sequence[dict[str, Any]]) -> PaperOutput:
    return output("followup-table13", "Every headline rate (%) per model, setup, variant and persona",
                  pd.DataFrame(list(headline)))
