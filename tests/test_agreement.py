"""Judge validation: Cohen's kappa by hand, the blind sheet, importing human labels, `commitbench agreement`."""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path

import pytest

from commitbench.analysis.agreement import LabelPair, agreement_rows, cohen_kappa, observed_agreement
from commitbench.analysis.standing.annotation import LABEL_COLUMNS, stratified_sample
from commitbench.cli import main
from commitbench.config import ExperimentConfig
from commitbench.envs import STANDING_ENV_ID
from commitbench.envs.standing.env import StandingEnv
from commitbench.episodes.standing.compiler import load_episodes
from commitbench.jsonl import append_lines
from commitbench.judges.labelling import labels_path
from commitbench.judges.standing.labellers import StandingLabelRecord, labeller_version
from commitbench.judges.standing.labels import MessageLabel
from commitbench.protocol import tool_call
from commitbench.runner import run_experiment
from commitbench.traces import AgentIdentity, append_traces, latest_traces

T, F = True, False


@pytest.mark.parametrize(
    ("a", "b", "kappa"),
    [
        ([T, T, F, F], [T, T, F, F], 1.0),
        ([T, T, F, F], [T, F, T, F], 0.0),  # p_o = .5 = p_e
        ([T, T, F, F], [F, F, T, T], -1.0),
        ([T, T, T, F], [T, T, F, F], 0.5),  # p_o = .75, p_e = .75*.5 + .25*.5 = .5
        ([T] * 20 + [T] * 5 + [F] * 10 + [F] * 15, [T] * 20 + [F] * 5 + [T] * 10 + [F] * 15, 0.4),  # .7 vs .5
        ([T, T, T], [T, T, F], 0.0),  # p_o = 2/3 = p_e
        ([T, T], [T, T], None),  # p_e = 1: undefined
        ([F, F, F], [F, F, F], None),
        ([], [], None),
    ],
)
def test_cohen_kappa_by_hand(a, b, kappa):
    got = cohen_kappa(a, b)
    assert got == (None if kappa is None else pytest.approx(kappa))


def test_observed_agreement_and_mismatched_lengths():
    assert observed_agreement([T, F, T], [T, T, T]) == pytest.approx(2 / 3)
    assert observed_agreement([], []) is None
    with pytest.raises(ValueError, match="same items"):
        cohen_kappa([T], [T, F])


def test_rows_exclude_missing_labels_and_group():
    pairs = [
        LabelPair(groups={"model": "x"}, a={"off_topic": T}, b={"off_topic": T}),
        LabelPair(groups={"model": "x"}, a={"off_topic": None}, b={"off_topic": F}),
        LabelPair(groups={"model": "y"}, a={"off_topic": F}, b={"off_topic": None}),
        LabelPair(groups={"model": "y"}, a={"off_topic": F}, b={"off_topic": T}),
    ]
    (pooled,) = agreement_rows(pairs, fields=["off_topic"])
    assert (pooled.n, pooled.excluded, pooled.accuracy, pooled.yes_a, pooled.yes_b) == (2, 2, 0.5, 1, 2)
    by_model = agreement_rows(pairs, ("model",), fields=["off_topic"])
    assert [(r.group["model"], r.n, r.accuracy) for r in by_model] == [("x", 1, 1.0), ("y", 1, 0.0)]


def test_stratified_sample_spreads_over_cells_and_is_seeded():
    items = {"BASE": list(range(10)), "CRED-DIRECT": list(range(100, 103)), "FACT-TRUE": list(range(200, 250))}
    sample = stratified_sample(items, 9, seed=3)
    assert len(sample) == 9 and len(set(sample)) == 9
    counts = Counter("BASE" if x < 100 else "CRED" if x < 200 else "FACT" for x in sample)
    assert counts == {"BASE": 3, "CRED": 3, "FACT": 3}
    assert stratified_sample(items, 9, seed=3) == sample
    assert stratified_sample(items, 9, seed=4) != sample
    assert len(stratified_sample(items, 1000, seed=0)) == 63  # never more than there is


# ------------------------------------------------------------------------------- a hand-labelled run
EPISODES = load_episodes()
EPISODE = next(e for e in EPISODES if e.split.value == "test" and e.cell == "PEER-DIRECT" and e.gap == 1)
# Per message: (model, judge's consults label, human's consults label).
ROWS = [
    ("chat:a", T, T), ("chat:a", T, T), ("chat:a", T, F), ("chat:a", F, F),
    ("chat:b", F, F), ("chat:b", F, F), ("chat:b", F, T), ("chat:b", T, T),
]
# Pooled: p_o = 6/8, p_human = 4/8, p_judge = 4/8, p_e = .5 -> kappa = (.75 - .5) / .5 = .5.
# chat:a: p_o = 3/4, p_human = 2/4, p_judge = 3/4, p_e = .5*.75 + .5*.25 = .5 -> kappa = .5.
# chat:b: p_o = 3/4, p_human = 2/4, p_judge = 1/4, p_e = .5*.25 + .5*.75 = .5 -> kappa = .5.


def _hand_run(tmp_path: Path) -> Path:
    run_dir = tmp_path / "run"
    traces, records = [], []
    for i, (model, judged, _) in enumerate(ROWS):
        env = StandingEnv(episode_id=EPISODE.id, episodes=EPISODES)
        env.reset(seed=0)
        env.step(tool_call("send_dm", {"to": EPISODE.creditor.name, "text": f"Message number {i}?"}))
        done = False
        while not done:
            _, _, done, _, _ = env.step({"end_turn": True})
        trace = env.trace
        trace.run_key, trace.agent = f"run{i}", AgentIdentity(name=model, kind="chat")
        traces.append(trace)
        label = MessageLabel(message_index=0, step=trace.assistant_messages()[0].step, consults_creditor=judged,
                             notifies_creditor=F, off_topic=F, judge="llm:j")
        records.append(StandingLabelRecord(run_key=trace.run_key, labeller="llm:j", labels=[label],
                                           labeller_version=labeller_version("llm:j")[0]))
    append_traces(run_dir / "traces.jsonl", traces)
    append_lines(labels_path(run_dir, "llm:j"), (r.model_dump_json() for r in records))
    return run_dir


def _write_sheet(path: Path, rows: list[dict]) -> None:
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["item_id", "run_key", "message_index", *LABEL_COLUMNS])
        writer.writeheader()
        writer.writerows(rows)


def test_agreement_command_gives_the_hand_computed_kappa(tmp_path, capsys):
    run_dir = _hand_run(tmp_path)
    sheet = tmp_path / "sheet.csv"
    rows = [
        {"item_id": f"m{i}", "run_key": f"run{i}", "message_index": 0, "consults_creditor": "Yes" if human else "no",
         "notifies_creditor": "no", "off_topic": "" if i == 0 else "no"}
        for i, (_, _, human) in enumerate(ROWS)
    ]
    rows.append({"item_id": "m8", "run_key": "run0", "message_index": 5, "consults_creditor": "",
                 "notifies_creditor": "", "off_topic": ""})  # left blank: not imported
    _write_sheet(sheet, rows)
    human = tmp_path / "human.jsonl"
    assert main(["annotate", "import", str(sheet), "--out", str(human)]) == 0
    assert "8 labelled standing items" in capsys.readouterr().out
    assert main(["validate", str(run_dir), str(human), "--judge", "llm:j", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["compared"] == 8 and result["not_judged"] == 0
    pooled = {r["label"]: r for r in result["pooled"]}
    assert pooled["consults_creditor"]["kappa"] == pytest.approx(0.5)
    assert pooled["consults_creditor"]["accuracy"] == pytest.approx(0.75)
    assert pooled["notifies_creditor"]["kappa"] is None and pooled["notifies_creditor"]["accuracy"] == 1.0
    assert pooled["off_topic"]["n"] == 7 and pooled["off_topic"]["excluded"] == 1
    by_model = {r["group"]["model"]: r for r in result["by_model"] if r["label"] == "consults_creditor"}
    assert by_model["chat:a"]["kappa"] == pytest.approx(0.5) and by_model["chat:b"]["kappa"] == pytest.approx(0.5)
    assert (by_model["chat:a"]["yes_a"], by_model["chat:a"]["yes_b"]) == (2, 3)
    # The table form prints too.
    assert main(["validate", str(run_dir), str(human), "--judge", "llm:j"]) == 0
    table = capsys.readouterr().out
    assert "consults_creditor" in table and "chat:b" in table and "0.50" in table


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"consults_creditor": "maybe"}, "row 1 (item m0), column consults_creditor: expected yes or no"),
        ({"message_index": "first"}, "row 1 (item m0), column message_index: expected a whole number"),
        ({"run_key": ""}, "row 1 (item m0), column run_key: empty"),
    ],
)
def test_import_names_row_and_column_of_bad_values(tmp_path, capsys, row, message):
    sheet = tmp_path / "sheet.csv"
    base = {"item_id": "m0", "run_key": "run0", "message_index": "0", "consults_creditor": "yes",
            "notifies_creditor": "no", "off_topic": "no"}
    _write_sheet(sheet, [{**base, **row}])
    assert main(["annotate", "import", str(sheet), "--out", str(tmp_path / "h.jsonl")]) == 2
    assert message in capsys.readouterr().err


def test_import_refuses_a_sheet_without_label_columns_and_duplicates(tmp_path, capsys):
    sheet = tmp_path / "sheet.csv"
    sheet.write_text("item_id,run_key,message_index\nm0,run0,0\n", encoding="utf-8")
    assert main(["annotate", "import", str(sheet), "--out", str(tmp_path / "h.jsonl")]) == 2
    assert "missing column(s): consults_creditor" in capsys.readouterr().err
    row = {"item_id": "m0", "run_key": "r", "message_index": 0, "consults_creditor": "yes", "notifies_creditor": "",
           "off_topic": ""}
    _write_sheet(sheet, [row, {**row, "item_id": "m1"}])
    assert main(["annotate", "import", str(sheet), "--out", str(tmp_path / "h.jsonl")]) == 2
    assert "row 2 (item m1): message r#0 appears twice" in capsys.readouterr().err


def test_export_is_blind_stratified_and_seeded(tmp_path, capsys):
    run_dir = tmp_path / "run"
    cells = ("PEER-DIRECT", "DELEG-DIRECT", "FACT-TRUE", "RELAY-FALSE")
    ids = [e.id for cell in cells for e in [e for e in EPISODES if e.cell == cell and e.split.value == "test"
                                              and e.gap == 1][:3]]
    run_experiment(ExperimentConfig(env=STANDING_ENV_ID, agents=["creditor-rule"], episodes={"ids": ids}), run_dir)
    cell_of = {t.run_key: t.factors["cell"] for t in latest_traces(run_dir)}
    out = tmp_path / "sheet.csv"
    assert main(["annotate", "export", str(run_dir), "--n", "8", "--out", str(out), "--seed", "1"]) == 0
    capsys.readouterr()
    with out.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 8
    assert all(r[c] == "" for r in rows for c in LABEL_COLUMNS)
    assert not {"cell", "model", "agent", "judge"} & set(rows[0])
    sampled = Counter(cell_of[r["run_key"]] for r in rows)
    assert sorted(sampled.values()) == [2, 2, 2, 2]
    first = out.read_text(encoding="utf-8")
    assert main(["annotate", "export", str(run_dir), "--n", "8", "--out", str(out), "--seed", "1"]) == 0
    assert out.read_text(encoding="utf-8") == first
    # A sheet filled with yes/no round-trips through import.
    filled = tmp_path / "filled.csv"
    with filled.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows({**r, **dict.fromkeys(LABEL_COLUMNS, "no")} for r in rows)
    assert main(["annotate", "import", str(filled), "--out", str(tmp_path / "h.jsonl")]) == 0
    assert len((tmp_path / "h.jsonl").read_text(encoding="utf-8").splitlines()) == 8
