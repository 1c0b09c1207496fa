"""What a llama.cpp build costs or gains in speed: prompt and generation tokens per second, build against build.

    python benchmarks/local_build.py [--python PY ...] [--threads 1] [--words 140] [--generate 128] [--repeats 3]

Each ``--python`` is the interpreter of an environment with its own llama-cpp-python build (the
portable one of the README's install, a native one, ...); the default is this interpreter alone. For
each, a child process loads the shipped SmolLM2 GGUF, evaluates one prompt of ``--words`` words in
batches of ``--n-batch`` tokens (prompt tokens per second), then generates ``--generate`` tokens one
at a time, greedily (generation tokens per second); the median of ``--repeats`` rounds is printed,
with the features the build uses and the load average. A build that crashes is reported with its
signal, and the others are still measured. The first interpreter is the reference of the ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
from typing import Any

CHILD = r"""
import json, statistics, sys, time
import numpy as np
import llama_cpp

model, threads, words, generate, repeats, n_batch = sys.argv[1], *map(int, sys.argv[2:7])
info = llama_cpp.llama_print_system_info().decode()
print(json.dumps({"system_info": info, "version": llama_cpp.__version__}), flush=True)
llm = llama_cpp.Llama(model_path=model, n_ctx=4096, n_batch=n_batch, n_threads=threads, n_threads_batch=threads,
                      verbose=False, logits_all=False)
text = " ".join(f"item{i}" for i in range(words))
prompt = llm.tokenize(f"<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n".encode())
vocab = llm.n_vocab()
start = llm.tokenize(b"<|im_start|>user\nTell me about the office plants.<|im_end|>\n<|im_start|>assistant\n")
prompt_s, generate_s = [], []
for _ in range(repeats):
    llm.reset()
    began = time.perf_counter()
    llm.eval(prompt)
    prompt_s.append(time.perf_counter() - began)
    llm.reset()
    llm.eval(start)
    began = time.perf_counter()
    for _ in range(generate):
        logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits(llm.ctx), shape=(vocab,))
        llm.eval([int(np.argmax(logits))])
    generate_s.append(time.perf_counter() - began)
print(json.dumps({"prompt_tokens": len(prompt), "prompt_s": statistics.median(prompt_s),
                  "generate_s": statistics.median(generate_s)}), flush=True)
"""


def measure(python: str, model: str, args: argparse.Namespace) -> dict[str, Any]:
    command = [python, "-c", CHILD, model, str(args.threads), str(args.words), str(args.generate), str(args.repeats),
               str(args.n_batch)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    result: dict[str, Any] = {"python": python, "load": os.getloadavg()[0]}
    for line in done.stdout.splitlines():
        try:
            result.update(json.loads(line))
        except ValueError:
            continue
    if done.returncode < 0:
        result["crashed"] = signal.Signals(-done.returncode).name
    elif done.returncode != 0:
        result["crashed"] = f"exit code {done.returncode}: {done.stderr.strip().splitlines()[-1:]}"
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--python", action="append", default=[], help="an interpreter whose build to measure")
    parser.add_argument("--threads", type=int, default=1, help="llama.cpp threads (the server's default here: 1)")
    parser.add_argument("--words", type=int, default=140, help="words of the prompt (about 4 tokens each)")
    parser.add_argument("--generate", type=int, default=128, help="tokens generated one at a time")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--n-batch", type=int, default=512, help="tokens evaluated per batch (1: no batching)")
    args = parser.parse_args(argv)

    from commitbench.agents.local_model import smollm2_gguf_path
    from commitbench.agents.local_selftest import beyond_baseline, build_features

    model = str(smollm2_gguf_path())
    reference: dict[str, float] | None = None
    for python in args.python or [sys.executable]:
        result = measure(python, model, args)
        features = build_features(str(result.get("system_info", "")))
        extras = beyond_baseline(features)
        label = f"{python} (llama-cpp-python {result.get('version', '?')}; " + (
            f"native: +{' +'.join(extras)})" if extras else "portable baseline)"
        )
        if "crashed" in result:
            print(f"{label}: crashed ({result['crashed']}) (load {result['load']:.2f})")
            continue
        prompt_rate = result["prompt_tokens"] / result["prompt_s"]
        generate_rate = args.generate / result["generate_s"]
        line = (f"{label}: prompt {prompt_rate:,.0f} tokens/s ({result['prompt_tokens']} tokens, n_batch "
                f"{args.n_batch}), generation {generate_rate:,.1f} tokens/s on {args.threads} thread(s) "
                f"(load {result['load']:.2f})")
        if reference is None:
            reference = {"prompt": prompt_rate, "generate": generate_rate}
        else:
            line += (f"; against the first: prompt {prompt_rate / reference['prompt']:.2f}x, generation "
                     f"{generate_rate / reference['generate']:.2f}x")
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
