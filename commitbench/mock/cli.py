"""The options of ``commitbench serve-mock``, the one command line of the mock server.

:func:`add_arguments` gives the command's parser its options, :func:`options_from_args` reads them into
:class:`ServeOptions`, and :func:`commitbench.mock.app.serve` serves what they describe.
:class:`~commitbench.mock.process.MockServerProcess` starts that same command in a child process, its
arguments written by :func:`command_line`. Nothing here needs aiohttp, so ``commitbench --help`` works
without the ``[dev]`` extra.
"""

from __future__ import annotations

import argparse

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from commitbench.mock.specs import DEFAULT_MODEL, FaultConfig, FaultKind, parse_fault_rate

__all__ = ["ServeOptions", "add_arguments", "command_line", "options_from_args"]


class ServeOptions(BaseModel):
    """What ``commitbench serve-mock`` serves, and where."""

    model_config = ConfigDict(extra="forbid")

    host: str = Field(default="127.0.0.1", description="Address to listen on.")
    port: int = Field(default=0, ge=0, le=65535, description="Port to listen on; 0 picks a free one (printed).")
    latency_ms: float = Field(default=0.0, ge=0, description="Latency of each chat reply, in milliseconds.")
    latency_jitter_ms: float = Field(
        default=0.0, ge=0, description="Uniform jitter added to the latency, in milliseconds (seeded)."
    )
    faults: FaultConfig = Field(
        default_factory=FaultConfig,
        description="Fault injection: the seed, the rate of each fault, Retry-After and the hold of a timeout.",
    )
    models: list[str] = Field(
        default_factory=lambda: [DEFAULT_MODEL], min_length=1, description="Model ids /v1/models lists."
    )
    record_requests: int = Field(default=1000, ge=0, description="How many recent requests /requests keeps.")
    capacity: int | None = Field(
        default=None, ge=1, description="Chat requests served at once, each taking the latency (null: no limit)."
    )
    streaming: bool = Field(default=False, description="Answer 'stream': true with server-sent events.")


# The option that sets each field, for error messages.
_OPTION_OF = {
    "host": "--host", "port": "--port", "latency_ms": "--latency-ms", "latency_jitter_ms": "--latency-jitter-ms",
    "models": "--model", "record_requests": "--record-requests", "capacity": "--capacity",
    "streaming": "--streaming", "seed": "--seed", "rates": "--fault", "retry_after_s": "--retry-after-s",
    "timeout_hold_s": "--timeout-hold-s",
}


def _fault_rate(text: str) -> tuple[FaultKind, float]:
    try:
        return parse_fault_rate(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Give ``parser`` (the ``serve-mock`` command's) the options of :class:`ServeOptions`."""
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="port to listen on (default: a free port, printed)")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="latency of each reply")
    parser.add_argument("--latency-jitter-ms", type=float, default=0.0, help="uniform jitter added to the latency")
    parser.add_argument("--fault", action="append", default=[], type=_fault_rate, metavar="KIND=RATE",
                        help="fault rate per request, KIND one of " + ", ".join(k.value for k in FaultKind))
    parser.add_argument("--seed", type=int, default=0, help="seed of the fault and jitter RNG")
    parser.add_argument("--retry-after-s", type=float, default=0.0, help="Retry-After sent with injected 429s")
    parser.add_argument("--timeout-hold-s", type=float, default=30.0,
                        help="how long an injected timeout holds the connection (default: 30)")
    parser.add_argument("--model", action="append", default=[], help="model id listed by /v1/models (repeatable)")
    parser.add_argument("--record-requests", type=int, default=1000, help="how many recent requests /requests keeps")
    parser.add_argument("--capacity", type=int, default=None,
                        help="serve at most this many requests at once, each taking the latency (default: no limit)")
    parser.add_argument("--streaming", action="store_true", help="answer 'stream': true with server-sent events")


def options_from_args(args: argparse.Namespace) -> ServeOptions:
    """The options parsed by a parser that :func:`add_arguments` set up; ValueError names a bad option."""
    try:
        rates: dict[FaultKind, float] = dict(args.fault)
        faults = FaultConfig(seed=args.seed, rates=rates, retry_after_s=args.retry_after_s,
                             timeout_hold_s=args.timeout_hold_s)
        return ServeOptions(
            host=args.host, port=args.port, latency_ms=args.latency_ms, latency_jitter_ms=args.latency_jitter_ms,
            faults=faults, models=args.model or [DEFAULT_MODEL], record_requests=args.record_requests,
            capacity=args.capacity, streaming=args.streaming,
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        option = _OPTION_OF.get(str(first["loc"][-1] if first["loc"] else ""), "an option")
        raise ValueError(f"{option}: {first['msg']}") from None


def command_line(options: ServeOptions) -> list[str]:
    """The ``serve-mock`` arguments that describe ``options`` (a fault sequence has none: send it to /faults)."""
    if options.faults.sequence:
        raise ValueError("a fault sequence is not a command-line option; set it through /faults")
    argv = [
        "--host", options.host, "--port", str(options.port),
        "--latency-ms", repr(options.latency_ms), "--latency-jitter-ms", repr(options.latency_jitter_ms),
        "--seed", str(options.faults.seed), "--retry-after-s", repr(options.faults.retry_after_s),
        "--timeout-hold-s", repr(options.faults.timeout_hold_s), "--record-requests", str(options.record_requests),
    ]
    for kind, rate in options.faults.rates.items():
        argv += ["--fault", f"{kind.value}={rate!r}"]
    for model in options.models:
        argv += ["--model", model]
    if options.capacity is not None:
        argv += ["--capacity", str(options.capacity)]
    if options.streaming:
        argv.append("--streaming")
    return argv
