"""GRPO on the follow-up suite's train split, on an accelerator machine; then the held-out evaluation to run.

    python scripts/gpu_train.py MODEL_PATH [--out runs/grpo-<name>] [--setups C0 C1 C2 C3 C4]
        [--variants stated inferred] [--personas generic ...] [--generations 8] [--prompts-per-step 4]
        [--max-completion-length 256] [--learning-rate 1e-6] [--epochs 1] [--max-steps N]
        [--vllm none|colocate|server] [--temperature 1.0] [--seed 0] [--dry-run]

MODEL_PATH: a Hugging Face model folder (or hub id, where the machine may download) of a chat model with native
tool calls. Needs the ``rl-train`` extra with torch's CUDA build, and vLLM for ``--vllm colocate|server``
(``server``: start ``trl vllm-serve --model MODEL_PATH`` on other GPUs first).

The dataset is :func:`commitbench.rl.trl.followup_dataset` on the train split (the templated requests: it
shares no request with the test split), with each setup's tools written into the system prompt, since TRL's
GRPOTrainer renders no per-row tools; the reward is :func:`commitbench.rl.trl.followup_total`, each completion
played through the suite's environment and labelled by the offline checker, the same grading as the report's.
The trained model is saved to ``OUT/checkpoint``; the script then prints the commands of the held-out
evaluation (``scripts/gpu_study.sh`` on the checkpoint: the follow-up C0-C4 matrix and the standing test split,
through the runner and the report as any model).

``--dry-run`` prints the plan (the dataset's size by setup, the trainer's settings, the commands) without
importing torch: it runs on any machine, and CI checks it. docs/rl.md, "On a GPU", says what such a run shows.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

SETUPS = ("C0", "C1", "C2", "C3", "C4")
EXTRA_MODULES = ("torch", "transformers", "trl", "datasets", "accelerate")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("model", help="a Hugging Face model folder (or hub id)")
    parser.add_argument("--out", type=Path, default=None, help="output folder (default runs/grpo-<model name>)")
    parser.add_argument("--setups", nargs="+", default=list(SETUPS), choices=SETUPS)
    parser.add_argument("--variants", nargs="+", default=None, help="stated, inferred (default both)")
    parser.add_argument("--personas", nargs="+", default=None, help="default: every persona")
    parser.add_argument("--generations", type=int, default=8, help="completions per prompt (GRPO's group)")
    parser.add_argument("--prompts-per-step", type=int, default=4, help="prompt groups in one optimizer step")
    parser.add_argument("--max-completion-length", type=int, default=256)
    parser.add_argument("--learning-rate", type=float, default=1e-6)
    parser.add_argument("--epochs", type=float, default=1.0)
    parser.add_argument("--max-steps", type=int, default=-1, help="stop after this many steps (-1: the epochs)")
    parser.add_argument("--vllm", choices=("none", "colocate", "server"), default="colocate",
                        help="generation by vLLM in the trainer's process, by a trl vllm-serve server, or by "
                             "transformers")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dry-run", action="store_true", help="print the plan; import no torch, train nothing")
    args = parser.parse_args(argv)
    for name in ("generations", "prompts_per_step", "max_completion_length"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.generations < 2:
        parser.error("--generations must be at least 2: GRPO's advantage is a reward minus its group's mean")
    if args.out is None:
        args.out = Path("runs") / f"grpo-{Path(str(args.model).rstrip('/')).name}"
    return args


def build_rows(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The train split's rows of the chosen setups, variants and personas, the tools in each system prompt."""
    from commitbench.rl.trl import followup_dataset

    return followup_dataset(split="train", setups=args.setups, variants=args.variants, personas=args.personas,
                            tools_in_prompt=True)


def trainer_settings(args: argparse.Namespace, n_rows: int) -> dict[str, Any]:
    """GRPOConfig's keyword arguments for the run (plain values, so the dry run prints them)."""
    settings: dict[str, Any] = {
        "output_dir": str(args.out / "trainer"),
        "bf16": True,
        "gradient_checkpointing": True,
        "per_device_train_batch_size": args.generations * args.prompts_per_step,
        "gradient_accumulation_steps": 1,
        "num_generations": args.generations,
        "max_completion_length": args.max_completion_length,
        "temperature": args.temperature,
        "learning_rate": args.learning_rate,
        "num_train_epochs": args.epochs,
        "max_steps": args.max_steps,
        "logging_steps": 1,
        "save_strategy": "no",
        "report_to": [],
        "seed": args.seed,
        "use_vllm": args.vllm != "none",
    }
    if args.vllm != "none":
        settings["vllm_mode"] = args.vllm
    steps = args.max_steps if args.max_steps > 0 else int(args.epochs * n_rows / args.prompts_per_step)
    settings["_planned_steps"] = max(steps, 1)
    return settings


def evaluation_commands(args: argparse.Namespace) -> list[str]:
    """The held-out evaluation of the checkpoint: the same study as any served model."""
    checkpoint = args.out / "checkpoint"
    return [f"bash scripts/gpu_study.sh {shlex.quote(str(checkpoint))}"]


def missing_modules() -> list[str]:
    import importlib.util

    return [name for name in EXTRA_MODULES if importlib.util.find_spec(name) is None]


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    rows = build_rows(args)
    if not rows:
        print("gpu_train: the selection holds no train episode", file=sys.stderr)
        return 2
    settings = trainer_settings(args, len(rows))
    planned = settings.pop("_planned_steps")
    by_setup = Counter(str(row["setup"]) for row in rows)
    print(f"dataset: {len(rows)} train-split prompts ({', '.join(f'{k} {v}' for k, v in sorted(by_setup.items()))}),"
          f" {len({r['request_id'] for r in rows})} requests")
    print(f"trainer: GRPO, {planned} optimizer steps of {args.prompts_per_step} prompts x {args.generations} "
          f"completions; settings {json.dumps(settings, sort_keys=True)}")
    print(f"model: {args.model}; checkpoint: {args.out / 'checkpoint'}")
    print("then, the held-out evaluation: " + "; ".join(evaluation_commands(args)))
    if args.dry_run:
        return 0
    missing = missing_modules()
    if missing:
        print(f"gpu_train needs the rl-train extra (torch's CUDA build): pip install 'commitbench[rl-train]' "
              f"(missing: {', '.join(missing)})", file=sys.stderr)
        return 2

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from commitbench.rl.trl import followup_total, to_hf_dataset

    if not torch.cuda.is_available():
        print("gpu_train: no CUDA device (benchmarks/rl_train_smoke.py is the CPU smoke)", file=sys.stderr)
        return 2
    began = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.bfloat16)
    trainer = GRPOTrainer(model=model, reward_funcs=followup_total, args=GRPOConfig(**settings),
                          train_dataset=to_hf_dataset(rows), processing_class=tokenizer)
    trainer.train()
    checkpoint = args.out / "checkpoint"
    trainer.save_model(str(checkpoint))
    tokenizer.save_pretrained(str(checkpoint))
    print(f"trained {trainer.state.global_step} steps in {time.perf_counter() - began:.0f} s; saved {checkpoint}")
    print("held-out evaluation: " + "; ".join(evaluation_commands(args)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
