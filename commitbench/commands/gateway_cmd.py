"""``commitbench gateway``: the commitment gateway (an OpenAI-compatible proxy that checks every reply), and
``commitbench gateway report LOG``: its log's rates per 1,000 replies."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

from commitbench.cli import UsageError


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "gateway",
        help="an OpenAI-compatible proxy that checks every reply's claims and promises against its turn",
        description="Serve an OpenAI-compatible proxy in front of --upstream. Every chat completion is checked for "
        "false write claims, empty commitments and unanchored promises (docs/gateway.md); every other path "
        "passes through unchanged. 'commitbench gateway report LOG' prints the rates of a gateway's log.",
    )
    parser.add_argument("--upstream", default=None, help="base URL of the OpenAI-compatible server (ends in /v1)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="port to listen on (default 0: a free port, printed)")
    parser.add_argument("--mode", choices=["observe", "enforce", "rewrite"], default="observe",
                        help="observe: mark and log; enforce: replace false claims and nudge the next call; "
                        "rewrite: have the upstream rewrite flagged replies (default observe)")
    parser.add_argument("--count", choices=["matching", "writes", "any"], default="matching",
                        help="which calls back a claimed write: matching (default: a successful call of a tool that "
                        "can do that write), writes (a successful call of any tool that writes) or any (the write-"
                        "claim guard's published rule: any call that ran, in a write turn by its routing)")
    parser.add_argument("--pass-path", action="append", default=[], metavar="PREFIX",
                        help="also pass paths under PREFIX to the upstream unchecked (besides /v1/models, "
                        "/v1/completions and /v1/embeddings; anything else is a 404); repeatable")
    parser.add_argument("--commitments-token", default=None, metavar="TOKEN",
                        help="serve GET /v1/commitments to requests with 'Authorization: Bearer TOKEN' (off without)")
    parser.add_argument("--ledger", type=Path, default=None, help="commitment ledger (SQLite) for anchored promises")
    parser.add_argument("--require-user", action="store_true",
                        help="record a promise only when the request names its user (the user field, "
                        "x-commitbench-user or x-session-id); else it is kept under 'anonymous'")
    parser.add_argument("--catalog", type=Path, default=None, help="tool catalogue (YAML), read before the built-in")
    parser.add_argument("--judge-model", default=None, help="LLM detector model (default: the offline detector)")
    parser.add_argument("--judge-base-url", default=None, help="OpenAI-compatible base URL of the judge model")
    parser.add_argument("--judge-api-key-env", default=None, help="environment variable with the judge's API key")
    parser.add_argument("--judge-cache", type=Path, default=Path("gateway-judge-cache.sqlite"),
                        help="cache of the judge's calls (default gateway-judge-cache.sqlite)")
    parser.add_argument("--response-format", choices=["json_schema", "json_object"], default="json_schema",
                        help="how the judge's schema is sent (default json_schema)")
    parser.add_argument("--log", type=Path, default=None, help="JSON-lines log, one line per checked turn")
    parser.add_argument("--log-text", action="store_true", help="also log message text (off by default)")
    parser.add_argument("--upstream-timeout", type=float, default=120.0,
                        help="seconds the upstream may stay silent before a 504 (default 120)")
    parser.add_argument("--max-request-bytes", type=int, default=16 << 20, help="largest request body (16 MiB)")
    parser.add_argument("--max-reply-bytes", type=int, default=32 << 20, help="largest upstream reply (32 MiB)")
    parser.add_argument("--max-check-chars", type=int, default=100_000,
                        help="longest reply text checked; longer ones are marked check_error (100,000)")
    parser.add_argument("--time-zone", default="UTC", help="zone of due times given without an offset (UTC)")
    parser.set_defaults(func=serve_handler)
    sub = parser.add_subparsers(dest="gateway_command", metavar="report")
    report = sub.add_parser("report", help="rates per 1,000 replies of a gateway log, with intervals")
    report.add_argument("log_file", type=Path, metavar="LOG", help="the gateway's JSON-lines log")
    report.add_argument("--n-boot", type=int, default=1000, help="bootstrap replicates (default 1000)")
    report.add_argument("--seed", type=int, default=0, help="seed of the bootstrap")
    report.add_argument("--json", action="store_true", help="print the report as JSON")
    report.set_defaults(func=report_handler)


def _config(args: argparse.Namespace) -> Any:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    from pydantic import ValidationError

    from commitbench.gateway.app import GatewayConfig
    from commitbench.gateway.verdicts import CountMode, Mode

    if not args.upstream:
        raise UsageError("commitbench gateway needs --upstream URL (an OpenAI-compatible base URL ending in /v1)")
    if not args.upstream.startswith(("http://", "https://")):
        raise UsageError(f"--upstream must be an http:// or https:// URL, got {args.upstream!r}")
    try:
        ZoneInfo(args.time_zone)
    except (ZoneInfoNotFoundError, ValueError):
        raise UsageError(f"--time-zone: unknown IANA time zone {args.time_zone!r}") from None
    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port must be 0 to 65535, got {args.port}")
    try:
        return GatewayConfig(
            upstream=args.upstream, mode=Mode(args.mode), count=CountMode(args.count),
            pass_paths=tuple(args.pass_path), commitments_token=args.commitments_token,
            require_user=args.require_user,
            upstream_timeout_s=args.upstream_timeout, max_request_bytes=args.max_request_bytes,
            max_reply_bytes=args.max_reply_bytes, max_check_chars=args.max_check_chars, time_zone=args.time_zone,
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        raise UsageError(f"--{str(first['loc'][0]).replace('_', '-')}: {first['msg']}") from None


def serve_handler(args: argparse.Namespace) -> int:
    from commitbench.gateway.actions import NudgeBook
    from commitbench.gateway.app import Gateway, Services
    from commitbench.gateway.catalog import CatalogError, load_catalog
    from commitbench.gateway.detectors import Detector, LLMDetector, OfflineDetector
    from commitbench.gateway.logbook import GatewayLog
    from commitbench.gateway.recording import LedgerRecorder
    from commitbench.gateway.server import bind, loop_factory, serve
    from commitbench.ledger import LedgerError
    from commitbench.llm import redact_credentials

    config = _config(args)
    try:
        catalog = load_catalog(args.catalog)
    except CatalogError as exc:
        raise UsageError(f"--catalog: {exc}") from None
    if bool(args.judge_model) != bool(args.judge_base_url):
        raise UsageError("the LLM detector needs both --judge-model and --judge-base-url")
    recorder = None
    if args.ledger is not None:
        try:
            recorder = LedgerRecorder(args.ledger)
        except LedgerError as exc:
            raise UsageError(f"--ledger: {type(exc).__name__}: {exc}") from None
    log = GatewayLog(args.log, text=args.log_text) if args.log is not None else None
    try:
        sock = bind(args.host, args.port)
    except OSError as exc:
        raise UsageError(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}") from None

    async def run() -> None:
        detector: Detector = OfflineDetector()
        client = cache = None
        if args.judge_model:
            from commitbench.cache import CallCache
            from commitbench.llm import ModelClient, ModelSettings
            from commitbench.llm.structured import ResponseFormatStyle

            settings = ModelSettings(model=args.judge_model, base_url=args.judge_base_url, temperature=0.0,
                                     api_key_env=args.judge_api_key_env)
            cache = CallCache(args.judge_cache)
            client = ModelClient(settings, cache=cache)
            detector = LLMDetector(client, style=ResponseFormatStyle(args.response_format))
        services = Services(catalog=catalog, detector=detector, recorder=recorder, log=log, nudges=NudgeBook())
        try:
            await serve(Gateway(config, services).app(), sock)
        finally:
            if client is not None:
                await client.aclose()
            if cache is not None:
                cache.close()

    print(f"commitbench gateway: {config.mode.value} mode in front of {redact_credentials(config.upstream)}",
          flush=True)
    try:
        with asyncio.Runner(loop_factory=loop_factory()) as runner:
            runner.run(run())
    except KeyboardInterrupt:
        pass
    finally:
        if recorder is not None:
            recorder.close()
        if log is not None:
            log.close()
        sock.close()
    return 0


def report_handler(args: argparse.Namespace) -> int:
    import json

    from commitbench.gateway.report import build_report, format_report, report_json
    from commitbench.jsonl import JsonlError

    if args.n_boot < 1:
        raise UsageError(f"--n-boot must be at least 1, got {args.n_boot}")
    if not args.log_file.is_file():
        raise UsageError(f"{args.log_file}: no such file")
    try:
        report = build_report(args.log_file, n_boot=args.n_boot, seed=args.seed)
    except JsonlError as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        print(json.dumps(report_json(report), indent=2, ensure_ascii=False))
    else:
        print(format_report(report, str(args.log_file)))
    return 0
