"""The viewer at the scale of a full test grid: a 10,800-run site opened from file:// in headless Chromium.

    .venv/bin/python benchmarks/viewer.py [--run-dir DIR] [--n-boot 1000] [--repeats 5]

Without ``--run-dir`` it plays the standing suite's 1,080 test episodes with the five reference agents
under two arms (none and oracle:B4): 10,800 runs, about half a minute on two cores. It then builds the
site with ``commitbench view`` and measures, in Chromium (Debian's ``chromium``, driven over the
DevTools pipe by ``tests/_browser.py``):

* the run list's time to interactive: from the start of navigation to the first frame drawn after
  the list (10,800 runs: index parsed, filters and counts computed, first page of rows in the table)
  is on screen, for a fresh load of ``index.html#/runs``;
* a filter: from a click on a filter box to the first frame after the list is redrawn;
* the first free-text search (it loads the search text) and a second one;
* opening a transcript (it loads one transcript file) from the list.

Each is the median (and the worst) of ``--repeats`` tries. Target: the run list interactive within 2 s.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from _browser import Browser  # noqa: E402

AGENTS = ["creditor-rule", "last-speaker-wins", "rank-wins", "always-execute", "drop-on-any-cancel"]
ARMS = ["none", "oracle:B4"]
TARGET_MS = 2000.0

# Installed before any page script runs: the time of the first frame after the run list is drawn.
FIRST_LIST_FRAME = """
(() => {
  const seen = () => {
    const main = document.getElementById('main');
    if (!main || !(main.dataset.route || '').startsWith('#/runs')) return false;
    requestAnimationFrame(() => setTimeout(() => { window.__firstListFrame = performance.now(); }, 0));
    return true;
  };
  document.addEventListener('DOMContentLoaded', () => {
    const main = document.getElementById('main');
    if (!main) return;  // not the viewer (the blank page between tries)
    const watch = new MutationObserver(() => { if (seen()) watch.disconnect(); });
    watch.observe(main, { attributes: true });
  });
})();
"""

# Click an element and time until the first frame after the page is redrawn.
CLICK_TO_FRAME = """
new Promise((resolve) => {
  const main = document.getElementById('main');
  const before = main.dataset.renderedAt;
  const t0 = performance.now();
  const watch = new MutationObserver(() => {
    if (main.dataset.renderedAt !== before) {
      watch.disconnect();
      requestAnimationFrame(() => setTimeout(() => resolve(performance.now() - t0), 0));
    }
  });
  watch.observe(main, { attributes: true });
  ACTION;
})
"""


def play(run_dir: Path) -> float:
    from commitbench.config import ExperimentConfig
    from commitbench.rundir import RunStatus
    from commitbench.runner import run_experiment

    config = ExperimentConfig.model_validate({
        "name": "viewer-benchmark", "env": "commitbench/Standing-v0",
                                    "agents": AGENTS, "interventions": ARMS, "episodes": {"split": "test"},
    })
    started = time.perf_counter()
    summary = run_experiment(config, run_dir)
    if summary.status is not RunStatus.COMPLETE:
        raise SystemExit(f"the run did not complete: {summary.failures[:3]}")
    return time.perf_counter() - started


def timed(browser: Browser, action: str) -> float:
    return float(browser.evaluate(CLICK_TO_FRAME.replace("ACTION", action)))


def summary(name: str, values: list[float]) -> str:
    return f"{name:<44} median {statistics.median(values):8.0f} ms   worst {max(values):8.0f} ms   (n={len(values)})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run-dir", type=Path, default=None, help="an existing run directory (else one is played)")
    parser.add_argument("--n-boot", type=int, default=1000, help="bootstrap replicates of the report's tables")
    parser.add_argument("--repeats", type=int, default=5, help="tries of each measurement")
    args = parser.parse_args()

    from commitbench.commands.view_cmd import build_site
    from commitbench.traces import iter_traces

    with tempfile.TemporaryDirectory(prefix="viewer-bench-") as scratch:
        run_dir = args.run_dir
        if run_dir is None:
            run_dir = Path(scratch) / "run"
            seconds = play(run_dir)
            print(f"played {len(AGENTS)} reference agents x 1,080 test episodes x {len(ARMS)} arms in {seconds:.1f} s")
        runs = sum(1 for _ in iter_traces(run_dir))
        site_dir = Path(scratch) / "site"
        started = time.perf_counter()
        site = build_site(run_dir, site_dir, n_boot=args.n_boot)
        build_s = time.perf_counter() - started
        files = sum(1 for p in site_dir.rglob("*") if p.is_file())
        index_mb = (site_dir / "data" / "index.js").stat().st_size / 1e6
        print(f"site: {site.runs} runs ({runs} traces), {site.run_shards} transcript files, {site.text_shards} search "
              f"files, {files} files, {site.bytes / 1e6:.1f} MB (index {index_mb:.1f} MB); built in {build_s:.1f} s "
              f"(report with {args.n_boot} bootstrap replicates included)")
        url = (site_dir / "index.html").resolve().as_uri()

        with Browser(width=1280, height=900) as browser:
            print(f"browser: {browser.version}")
            browser.command("Page.addScriptToEvaluateOnNewDocument", {"source": FIRST_LIST_FRAME})
            tti, filters, first_search, search, transcript = [], [], [], [], []
            for attempt in range(args.repeats):
                browser.command("Page.navigate", {"url": "about:blank"})
                browser.goto(url + "#/runs", ready="window.__firstListFrame")
                tti.append(float(browser.evaluate("window.__firstListFrame")))
                count = browser.evaluate("document.getElementById('run-count').dataset.count")
                assert int(count) == site.runs, count
                cell = browser.evaluate(
                    "Array.from(document.querySelectorAll('fieldset.facet')).find(f => f.querySelector('legend')"
                    f".textContent === 'cell').querySelectorAll('input')[{attempt % 5 + 2}].id")
                filters.append(timed(browser, f"document.getElementById({cell!r}).click()"))
                filters.append(timed(browser, f"document.getElementById({cell!r}).click()"))  # and off again
                word = ["cancel", "green", "budget", "invoice", "legal"][attempt % 5]
                first_search.append(timed(browser, f"location.hash = '#/runs?q={word}'"))
                search.append(timed(browser, f"location.hash = '#/runs?q={word}%20the'"))
                timed(browser, "location.hash = '#/runs'")
                key = browser.evaluate(f"document.querySelectorAll('.run-link')[{attempt * 7}].getAttribute('href')")
                transcript.append(timed(browser, f"location.hash = {key!r}"))
            problems = browser.problems()
        print(summary("run list: navigation start -> first frame", tti))
        print(summary("filter: click -> first frame of the new list", filters))
        print(summary("first text search (loads the search text)", first_search))
        print(summary("later text search", search))
        print(summary("open a transcript (loads its file)", transcript))
        verdict = "within" if statistics.median(tti) <= TARGET_MS and max(tti) <= TARGET_MS else "NOT within"
        print(f"run list of {site.runs} runs interactive {verdict} {TARGET_MS / 1000:.0f} s "
              f"(worst {max(tti) / TARGET_MS:.2f} of the target); page errors: {len(problems)}")
        for problem in problems[:5]:
            print("  " + problem)


if __name__ == "__main__":
    main()
