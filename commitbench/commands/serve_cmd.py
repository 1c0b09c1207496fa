"""``commitbench serve-local`` and ``commitbench serve-mock``: model servers in the foreground."""

from __future__ import annotations

import argparse
from typing import Any

from commitbench.agents.local_model import LOCAL_N_CTX
from commitbench.mock.cli import add_arguments as add_mock_arguments
from commitbench.mock.cli import options_from_args as mock_options_from_args


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
        description="Run the mock chat-completions server (echo replies, optional latency, capacity and faults) "
        "and print 'listening on http://HOST:PORT/v1' once it accepts connections. Needs the [dev] extra.",
    )
    add_mock_arguments(mock)
    mock.set_defaults(func=serve_mock_handler)


def serve_local_handler(args: argparse.Namespace) -> int:
    from commitbench.agents.local_model import LocalModelError, LocalModelServer
    from commitbench.cli import UsageError

    if args.port is not None and not 0 <= args.port <= 65535:
        raise UsageError(f"--port must be from 0 (a free port) to 65535, got {args.port}")
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
    from commitbench.cli import UsageError

    try:
        options = mock_options_from_args(args)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    try:
        from commitbench.mock.app import serve
    except ImportError as exc:
        raise UsageError(f"serve-mock needs the [dev] extra (pip install -e '.[dev]'): {exc}") from None
    try:
        serve(options, announce=lambda line: print(line, flush=True))
    except OSError as exc:
        raise UsageError(f"cannot listen on {options.host}:{options.port}: {exc.strerror or exc}") from None
    return 0
