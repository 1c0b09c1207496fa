"""Label a run directory with a judge: the one path from a judge config to stored labels.

``commitbench label`` and ``commitbench run`` (after the cells are played, when the config names an
LLM judge) both call :func:`label_directory`. It finds the run's suite, builds the labeller the
judge config asks for (the offline one, or an LLM judge on its own model: a served model, or the
embedded one started for the job), sends every judge call through the run's cache, and runs the
resumable loop of :mod:`commitbench.judges.labelling`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from commitbench.agents.local_model import DEFAULT_ALIAS, LocalModelServer, unless_it_dies
from commitbench.cache import CacheMode, CallCache
from commitbench.config import JudgeConfig
from commitbench.judges.labelling import (
    Labeller,
    LabelRecord,
    LabelSummary,
    label_run,
    labels_path,
    pin_judge_settings,
)
from commitbench.llm.structured import ResponseFormatStyle, judge_style
from commitbench.rundir import read_manifest
from commitbench.rundir.reader import run_suite
from commitbench.traces import iter_latest_traces

if TYPE_CHECKING:
    from commitbench.llm.client import ModelClient


def configured_judge(run_dir: Path | str) -> JudgeConfig | None:
    """The judge a run's config names (from its manifest); None for a run directory without a manifest."""
    manifest = read_manifest(run_dir)
    if manifest is None:
        return None
    return JudgeConfig.model_validate(manifest.config.get("judge") or {})


@contextlib.contextmanager
def judge_client(
    judge: JudgeConfig, cache_path: Path, cache_mode: CacheMode = CacheMode.READ_WRITE, concurrency: int = 16
) -> Iterator[tuple[ModelClient, ResponseFormatStyle, LocalModelServer | None]]:
    """A client for an LLM judge (the embedded model started for it when ``local``), through a cache.

    Yields the client, the response-format style and the embedded server (None for a served model):
    run the judge's work through :func:`~commitbench.agents.local_model.unless_it_dies` with it, so
    that a server that dies ends the job with its exit code and log instead of a judge error per record.
    """
    assert judge.model is not None
    server = LocalModelServer().start() if judge.model.local else None
    try:
        cache = CallCache(cache_path if cache_mode is not CacheMode.OFF else None, cache_mode)
    except BaseException:
        if server is not None:
            server.stop()
        raise
    try:
        base_url = server.base_url if server is not None else None
        settings = pin_judge_settings(judge.model.model_settings(base_url, local_alias=DEFAULT_ALIAS))
        style = judge_style(judge.response_format, judge.model.local)
        from commitbench.llm.client import ModelClient  # the openai SDK, loaded only where a judge is called

        yield ModelClient(settings, cache=cache, max_concurrency=max(1, concurrency)), style, server
    finally:
        cache.close()
        if server is not None:
            server.stop()


def label_directory(
    run_dir: Path,
    judge: JudgeConfig,
    *,
    cache_path: Path | None = None,
    cache_mode: CacheMode = CacheMode.READ_WRITE,
    concurrency: int = 16,
    retry_errors: bool = False,
    limit: int | None = None,
    relabel_stale: bool = False,
    out_dir: Path | None = None,
) -> LabelSummary:
    """Label the finished traces of ``run_dir`` that ``judge`` has not labelled yet; returns the counts.

    The labels file is ``out_dir``'s when one is given (a run directory on read-only storage: nothing is
    written into it), else the run directory's.
    """
    suite = run_suite(run_dir)
    probe = iter_latest_traces(run_dir)
    try:
        empty = next(probe, None) is None
    finally:
        getattr(probe, "close", lambda: None)()  # the file is let go of now, not when the collector finds it
    if empty:
        raise ValueError(f"{run_dir} holds no finished traces to label")

    async def go(labeller: Labeller[LabelRecord]) -> LabelSummary:
        return await label_run(  # the traces streamed from the file: a large run is never held whole
            iter_latest_traces(run_dir), labeller, labels_path(out_dir or run_dir, labeller.name),
            record_type=suite.label_record, concurrency=concurrency, retry_errors=retry_errors, limit=limit,
            relabel_stale=relabel_stale,
        )

    if judge.kind == "rules":
        return asyncio.run(go(suite.labeller("rules", run_dir=Path(run_dir))))
    cache_file = cache_path or Path(run_dir) / "cache.sqlite"
    with judge_client(judge, cache_file, cache_mode, concurrency) as (client, style, server):

        async def with_client() -> LabelSummary:
            async with client:
                labeller = suite.labeller("llm", client, style=style, max_attempts=judge.max_attempts,
                                          fresh_retries=retry_errors,
                                          run_dir=Path(run_dir))
                return await unless_it_dies(server, go(labeller))

        return asyncio.run(with_client())
