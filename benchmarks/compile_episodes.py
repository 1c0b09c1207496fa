"""Time compiling all standing episodes and one env step.

Run: python benchmarks/compile_episodes.py
"""

from __future__ import annotations

import time

from commitbench.envs.standing.env import StandingEnv
from commitbench.episodes.standing.compiler import compile_spec
from commitbench.episodes.standing.loader import load_spec
from commitbench.protocol import tool_call


def main() -> None:
    t0 = time.perf_counter()
    spec = load_spec()
    t1 = time.perf_counter()
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        episodes = compile_spec(spec)
        best = min(best, time.perf_counter() - start)
    print(f"load spec: {1000 * (t1 - t0):.1f} ms")
    print(f"compile {len(episodes)} episodes: best of 5 = {best:.3f} s (target <= 1 s; ratio {best / 1.0:.2f})")

    env = StandingEnv(episodes=episodes, split="test", cells=["BASE"], gaps=[20])
    n = 0
    elapsed = 0.0
    for seed in range(200):
        env.reset(seed=seed)
        terminated = False
        while not terminated:
            action = tool_call("lookup", {"query": "wifi"}) if n % 3 else {"end_turn": True}
            start = time.perf_counter()
            _, _, terminated, _, _ = env.step(action)
            elapsed += time.perf_counter() - start
            n += 1
    per_step = 1e6 * elapsed / n
    print(f"env step: {per_step:.1f} us per step over {n} steps (target <= 50 us; ratio {per_step / 50:.2f})")


if __name__ == "__main__":
    main()
