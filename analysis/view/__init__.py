"""The run viewer's data: what a static site shows of a run directory, shaped from traces, labels and the report.

* :mod:`~commitbench.analysis.view.model`: the records the site is made of (run-list columns, one
  run's row and transcript page, the overview), as pydantic models;
* :mod:`~commitbench.analysis.view.transcript`: a trace as a list of chat items (messages, tool calls
  with their results, reasoning, revisions) and its model-call records, shared by the suites;
* :mod:`~commitbench.analysis.view.standing` and :mod:`~commitbench.analysis.view.followup`: each
  suite's runs (pure functions over traces, labels and episodes): a standing run as a
  :class:`~commitbench.analysis.view.model.RunRecord` with its page, a follow-up run with what its page
  is made of (:class:`~commitbench.analysis.view.model.FollowupEntry`; the browser makes the page,
  ``assets/pages.js``);
* :mod:`~commitbench.analysis.view.site`: the site's files, streamed: the hand-written page, script
  and style (package data under ``assets/``), the run index, and the transcripts in shards written as
  script files that register their data, so the site works from ``file://`` and loads a shard only
  when a page needs it. ``commitbench view`` (``commitbench.commands.view_cmd``) writes them to disk
  and serves them.
"""
