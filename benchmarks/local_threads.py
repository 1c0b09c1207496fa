"""How many threads the embedded model should use: one prompt evaluated with 1 thread and with 2.

    python benchmarks/local_threads.py [--words 400] [--repeats 2]

Loads the shipped SmolLM2 GGUF in this process (llama-cpp-python) twice, evaluates the same prompt
(``--words`` words, about 3.7 tokens each) ``--repeats`` times with a cleared cache, and prints the
mean seconds per thread count, their ratio and the load average. On a machine whose cores are busy
with other work, llama.cpp's threads wait for each other at every step, so more threads can be slower.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time


def measure(threads: int, prompt: str, repeats: int) -> tuple[float, int]:
    from llama_cpp import Llama

    from commitbench.agents.local_model import smollm2_gguf_path

    llm = Llama(str(smollm2_gguf_path()), n_ctx=4096, n_threads=threads, n_threads_batch=threads, verbose=False)
    times, tokens = [], 0
    for _ in range(repeats):
        llm.reset()
        started = time.perf_counter()
        out = llm.create_completion(prompt, max_tokens=20, temperature=0)
        times.append(time.perf_counter() - started)
        tokens = out["usage"]["prompt_tokens"]
    return statistics.mean(times), tokens


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--words", type=int, default=400)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)
    words = " ".join(f"word{i}" for i in range(args.words))
    prompt = f"<|im_start|>user\n{words}<|im_end|>\n<|im_start|>assistant\n"
    results = {}
    for threads in (1, 2):
        load = os.getloadavg()[0]
        seconds, tokens = measure(threads, prompt, args.repeats)
        results[threads] = seconds
        print(f"{threads} thread(s): {seconds:.2f} s for {tokens} prompt tokens + 20 generated (load {load:.2f})")
    print(f"2 threads / 1 thread: {results[2] / results[1]:.2f}x the time (cpus: {os.cpu_count()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
