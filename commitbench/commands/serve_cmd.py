"""``commitbench serve-local`` and ``commitbench serve-mock``: model servers in the foreground."""

from __future__ import annotations

import argparse
from typing import Any

from commitbench.agents.local_model import LOCAL_N_CTX


def register(subparsers: Any) -> None:
    local = subparsers.add_parser(
        "serve-local",
        help="serve the embedded SmolLM2 model (llama.cpp) until Ctrl-C",
        description="Run llama.cpp's OpenAI-compatible server with the SmolLM2-135M model shipped by "
        "the [local] extra, and print its base URL.",
    )
    local.add_argument("--port", type=int, default=None, help="port to listen on (default: a free port)")
    local.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    local.add_argument("--n-ctx", type=int, default=LOCAL_N_CTX,
                       help=f"context window in tokens (default: {LOCAL_N_CTX})")
    local.add_argument("--threads", type=int, default=None, help="CPU threads (default: half the CPUs, at least 1)")
    local.add_argument("--model-path", default=None, help="another GGUF file to serve instead of SmolLM2")
    local.add_argument("--check", action="store_true",
                       help="run only the self-test (a multi-token prompt in a child process), print what the "
                       "llama.cpp build uses and how fast it was, and exit (1 if it failed)")
    local.set_defaults(func=serve_local_handler)

    mock = subparsers.add_parser(
        "serve-mock",
        help="serve the scripted mock OpenAI-compatible server until Ctrl-C",
        description="Run the mock chat-completions server (echo replies, optional latency and faults).",
    )
    mock.add_argument("--port", type=int, default=0, help="port to listen on (default: a free port)")
    mock.add_argument("--latency-ms", type=float, default=0.0, help="latency of each reply")
    mock.add_argument("--fault", action="append", default=[], metavar="KIND=RATE", help="fault rate per request")
    mock.add_argument("--seed", type=int, default=0, help="seed of the fault RNG")
    mock.add_argument("--capacity", type=int, default=None,
                      help="serve at most this many requests at once, each taking the latency (default: no limit)")
    mock.set_defaults(func=serve_mock_handler)


def serve_local_handler(args: argparse.Namespace) -> int:
    from commitbench.agents.local_model import LocalModelError, LocalModelServer
    from commitbench.cli import UsageError

    server = LocalModelServer(
        host=args.host, port=args.port, n_ctx=args.n_ctx, n_threads=args.threads, model_path=args.model_path
    )
    if args.check:
        try:
            result = server.check()
        except LocalModelError as exc:
            raise UsageError(str(exc)) from exc
        print(
            f"self-test passed: llama-cpp-python {result.llama_cpp_version}, build uses {' '.join(result.features)}; "
            f"a {result.prompt_tokens}-token prompt and {result.completion_tokens} generated tokens in "
            f"{result.seconds:.2f} s on {server.n_threads} thread(s)",
            flush=True,
        )
        return 0
    # Whatever ends this command (Ctrl-C while the model loads or serves, the server's own exit), the
    # server is stopped; if this process is killed outright, the kernel ends the server with it.
    try:
        server.start()
        print(f"serving {server.alias} at {server.base_url} (Ctrl-C to stop)", flush=True)
        server.wait()
        print(server.death(), flush=True)
        return 1
    except LocalModelError as exc:
        raise UsageError(str(exc)) from exc
    except KeyboardInterrupt:
        print("stopping", flush=True)
        return 0
    finally:
        server.stop()


def serve_mock_handler(args: argparse.Namespace) -> int:
    from commitbench import mockserver

    argv = ["--port", str(args.port), "--latency-ms", str(args.latency_ms), "--seed", str(args.seed)]
    for fault in args.fault:
        argv += ["--fault", fault]
    if args.capacity is not None:
        if args.capacity < 1:
            from commitbench.cli import UsageError

            raise UsageError("--capacity must be at least 1")
        argv += ["--capacity", str(args.capacity)]
    return mockserver.main(argv)
