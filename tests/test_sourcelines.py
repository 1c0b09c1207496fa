"""The line an object was just parsed from (commitbench.sourcelines), as the trace and labels readers leave it."""

from __future__ import annotations

import threading
import weakref
from pathlib import Path

from commitbench.sourcelines import KEPT, line_of, remember
from commitbench.traces import EpisodeTrace, iter_latest_traces, map_latest_traces


class Parsed:
    def __init__(self, n: int) -> None:
        self.n = n


def test_the_last_objects_parsed_have_their_lines_by_identity() -> None:
    first, second, twin = Parsed(1), Parsed(2), Parsed(1)
    remember(first, b'{"n":1}\n')
    remember(second, b'{"n":2}')
    assert line_of(first) == b'{"n":1}' and line_of(second) == b'{"n":2}'  # the end of line left out
    assert line_of(twin) is None  # equal is not the same object
    seen: list[bytes | None] = []
    worker = threading.Thread(target=lambda: seen.append(line_of(second)))
    worker.start()
    worker.join()
    assert seen == [b'{"n":2}']  # a thread that converts what another parsed finds it too
    many = [Parsed(k) for k in range(KEPT + 1)]
    for item in many:
        remember(item, b"{}")
    assert line_of(first) is None and line_of(many[-1]) == b"{}"  # no more than KEPT are kept
    gone = Parsed(3)
    remember(gone, b"{}")
    alive = weakref.ref(gone)
    del gone
    assert alive() is None  # remembering keeps nothing alive


def test_a_trace_read_from_a_run_has_the_line_the_file_holds(tmp_path: Path) -> None:
    trace = EpisodeTrace(env_id="e", episode_id="ep", factors={}, run_key="k1", events=[], turns=[])
    other = trace.model_copy(update={"run_key": "k2"})
    lines = [trace.model_dump_json().encode(), other.model_dump_json().encode()]
    (tmp_path / "traces.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    assert [line_of(t) for t in iter_latest_traces(tmp_path)] == lines
    assert list(map_latest_traces(tmp_path, line_of, workers=1)) == lines
