"""The README's pictures of the viewer: every page of a site built from the tests' mock-server runs.

    .venv/bin/python scripts/viewer_screenshots.py [--out docs/img]

Plays the same small runs as ``tests/test_viewer.py`` (``tests/_viewer_fixtures.py``) on the mock
server, builds their sites with ``commitbench view`` and captures the overview, the run list, a
transcript and a side-by-side page of the standing run, and a transcript of the follow-up run, with
the same capture code the tests use. Needs Chromium (``apt-get install -y chromium``).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEIGHT = 1000  # pixels of each page shown, from its top (keeps the pictures small)
sys.path.insert(0, str(ROOT / "tests"))

from _browser import Browser  # noqa: E402
from _viewer_fixtures import capture_pages, followup_run, route_ready, standing_run  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img", help="where the PNG files go")
    args = parser.parse_args()

    from commitbench.commands.view_cmd import build_site
    from commitbench.mock import MockServer
    from commitbench.traces import latest_traces

    with tempfile.TemporaryDirectory(prefix="viewer-shots-") as scratch:
        base = Path(scratch)
        server = MockServer().start()
        try:
            standing = standing_run(server, base / "standing")
            server.reset()
            followup = followup_run(server, base / "followup")
        finally:
            server.stop()
        build_site(standing, base / "standing-site")
        build_site(followup, base / "followup-site", judge="llm:mock-model")

        traces = latest_traces(standing)
        shown = next(t for t in traces if t.agent and t.agent.name == "chat:mock-thinking" and not t.interventions
                     and t.factors["cell"] == "PEER-DIRECT")
        twin = next(t for t in traces if t.agent and t.agent.name == "chat:mock-no-thinking"
                    and t.episode_id == shown.episode_id and not t.interventions)
        anchored = next(t for t in latest_traces(followup)
                        if t.episode_id.startswith("del-001:C2") and not t.interventions)
        with Browser(width=1200, height=760) as browser:
            url = (base / "standing-site" / "index.html").resolve().as_uri()
            shots = capture_pages(browser, url, args.out, "viewer", f"#/run/{shown.run_key}",
                                  f"#/compare/{shown.run_key}/{twin.run_key}", max_height=HEIGHT,
                                  runs="#/runs?cell=PEER-DIRECT,CRED-DIRECT&sort=cell")
            route = f"#/run/{anchored.run_key}"
            browser.goto((base / "followup-site" / "index.html").resolve().as_uri() + route, ready=route_ready(route))
            shots["followup"] = browser.screenshot(args.out / "viewer-followup-transcript.png", True, HEIGHT)
            problems = browser.problems()
        if problems:
            raise SystemExit(f"the pages reported errors: {problems}")
        for name, path in shots.items():
            print(f"{name:<12} {path} ({path.stat().st_size / 1000:.0f} kB)")


if __name__ == "__main__":
    main()
