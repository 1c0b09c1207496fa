"""Which way of serving and prompting a small local model makes it act: one table of options.

Each option is a GGUF model, a chat handler of the local server and a turn protocol of the chat
agent. The chat agent plays the same standing episodes under each (one commitment type, every cell,
explicit policy, gap 1, surface 0: 15 episodes by default) against a fresh local server, and the
traces give, per option:

* model calls, and the share of them that came back with a well-formed call of a known tool
  (``valid call``), and of a workspace tool rather than ``reply``/``end_turn`` (``world call``);
* cells in which the promised action was executed (a do-nothing agent executes in none, so this is
  the number of cells whose action outcome differs from doing nothing), and cells with a message to
  the creditor after the first event (the environment's own signals);
* seconds per model call (mean wall time of the calls, on this machine, under its current load);
* model calls whose text or arguments hold an HTML entity.

    python benchmarks/local_options.py                          # SmolLM2 options
    python benchmarks/local_options.py --gemma PATH.gguf        # and Gemma 3 270M from a GGUF file
    python benchmarks/local_options.py --types deploy_service send_report --only tools_only

It prints the load average before and after each option: the machine may be shared.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from commitbench.agents.chat import DEFAULT_PROTOCOL, PROTOCOL_TOOLS, TOOLS_ONLY
from commitbench.agents.local_model import LocalModelServer, smollm2_gguf_path
from commitbench.config import ExperimentConfig
from commitbench.envs import STANDING_ENV_ID
from commitbench.episodes.standing.compiler import load_episodes
from commitbench.judges.standing.signals import compute_signals
from commitbench.modelentry import GenerationSettings, ModelEntry
from commitbench.runner import run_experiment
from commitbench.traces import EpisodeTrace

ENTITY = re.compile(r"&(?:#\d{1,7}|#x[0-9a-fA-F]{1,6}|[a-zA-Z]{2,8});")
PROTOCOL_NAMES = {t["function"]["name"] for t in PROTOCOL_TOOLS}


@dataclass(frozen=True)
class Option:
    name: str
    model: str  # label
    path: Path
    chat_format: str
    protocol: str
    temperature: float = 0.0


def options(gemma: Path | None) -> list[Option]:
    smol = smollm2_gguf_path()
    out = [
        Option("llama-cpp chatml-function-calling, no tool_choice", "SmolLM2-135M", smol, "chatml-function-calling",
               DEFAULT_PROTOCOL),
        Option("own handler, auto", "SmolLM2-135M", smol, "commitbench-chatml", DEFAULT_PROTOCOL),
        Option("own handler, tools_only", "SmolLM2-135M", smol, "commitbench-chatml", TOOLS_ONLY),
        Option("own handler, tools_only, temperature 0.8", "SmolLM2-135M", smol, "commitbench-chatml", TOOLS_ONLY, 0.8),
    ]
    if gemma is not None:
        out.append(Option("own handler, auto", "Gemma-3-270M", gemma, "commitbench-gemma", DEFAULT_PROTOCOL))
        out.append(Option("own handler, tools_only", "Gemma-3-270M", gemma, "commitbench-gemma", TOOLS_ONLY))
        out.append(Option("own handler, tools_only, temperature 0.8", "Gemma-3-270M", gemma, "commitbench-gemma",
                          TOOLS_ONLY, 0.8))
    return out


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def measure(option: Option, types: list[str], out: Path, max_tokens: int) -> dict[str, object]:
    load_before = load()
    started = time.perf_counter()
    with LocalModelServer(model_path=option.path, chat_format=option.chat_format) as server:
        entry = ModelEntry(
            name="local-option", base_url=server.base_url, api_key_env=None, protocol=option.protocol,
            settings=GenerationSettings(model=server.alias, max_tokens=max_tokens, temperature=option.temperature,
                                        seed=0 if option.temperature else None),
        )
        config = ExperimentConfig(env=STANDING_ENV_ID,
            name="local-options", agents=["chat"], models=[entry], concurrency=1,
            episodes={"split": "test", "types": types, "policies": ["explicit"], "gaps": [1], "surfaces": [0]},
        )
        summary = run_experiment(config, out)
    wall = time.perf_counter() - started
    episodes = {e.id: e for e in load_episodes()}
    traces = [EpisodeTrace.model_validate_json(line) for line in (out / "traces.jsonl").read_text().splitlines()]
    calls = valid = world = entities = 0
    latency = 0.0
    executed = messaged = 0
    for trace in traces:
        tools = set(PROTOCOL_NAMES) | {c.tool for c in trace.tool_calls()}
        episode = episodes[trace.episode_id]
        tools |= {episode.action_tool.name, episode.check_tool.name, "post_message", "send_dm", "lookup", "end_turn"}
        for record in trace.model_calls:
            if record.purpose != "agent":
                continue
            calls += 1
            latency += record.latency_s
            texts = [record.text] + [str(c.get("arguments", "")) for c in record.tool_calls]
            entities += any(ENTITY.search(t) for t in texts)
            good = [c for c in record.tool_calls if c.get("name") in tools and _is_object(c.get("arguments"))]
            valid += bool(good)
            world += any(c.get("name") not in PROTOCOL_NAMES for c in good)
        signals = compute_signals(trace, episode)
        executed += signals.executed
        messaged += signals.messages_to_creditor > 0
    return {
        "option": option.name, "model": option.model, "cells": len(traces), "calls": calls,
        "valid_call_share": valid / calls if calls else 0.0, "world_call_share": world / calls if calls else 0.0,
        "executed_cells": executed, "creditor_cells": messaged, "s_per_call": latency / calls if calls else 0.0,
        "calls_with_entities": entities, "wall_s": wall, "failed_cells": summary.cells_failed,
        "load_before": load_before, "load_after": load(),
    }


def _is_object(raw: object) -> bool:
    try:
        return isinstance(json.loads(str(raw)) if str(raw).strip() else {}, dict)
    except ValueError:
        return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--types", nargs="+", default=["deploy_service"], help="commitment types to play")
    parser.add_argument("--gemma", type=Path, default=None, help="a Gemma 3 270M GGUF file to add as options")
    parser.add_argument("--only", nargs="+", default=None,
                        help="run only the options whose 'MODEL OPTION' label holds one of these exactly")
    parser.add_argument("--max-tokens", type=int, default=256, help="max tokens per call (the embedded default)")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows as JSON lines here")
    args = parser.parse_args(argv)
    rows = []
    chosen = [o for o in options(args.gemma) if not args.only or f"{o.model} {o.name}" in args.only]
    with tempfile.TemporaryDirectory() as tmp:
        for index, option in enumerate(chosen):
            row = measure(option, args.types, Path(tmp) / f"o{index}", args.max_tokens)
            rows.append(row)
            print(json.dumps(row), flush=True)
            if args.json is not None:
                with args.json.open("a", encoding="utf-8") as handle:
                    handle.write(json.dumps(row) + "\n")
    print("\n| model | option | cells | calls | valid call | world call | executed cells | creditor cells "
          "| s/call | calls with entities | load before/after |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | {r['option']} | {r['cells']} | {r['calls']} | {r['valid_call_share']:.0%} "
              f"| {r['world_call_share']:.0%} | {r['executed_cells']} | {r['creditor_cells']} | {r['s_per_call']:.2f} "
              f"| {r['calls_with_entities']} | {r['load_before']} / {r['load_after']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
