"""The commitment gateway: an OpenAI-compatible proxy that checks every reply against the turn it ends.

A deployment points its clients at the gateway instead of its model server. For each chat completion the
gateway reads the turn (what the assistant did since the last user message: its tool calls and their
results, and the new reply) and the request's tools, and marks false write claims, empty commitments and
unanchored promises; in ``enforce`` mode it replaces a false claim by honest text and nudges the next call,
in ``rewrite`` mode it has the upstream rewrite a flagged reply. Anchored promises go to the commitment
ledger. The modules, one job each:

* :mod:`~commitbench.gateway.verdicts`: the labels and what a check reports;
* :mod:`~commitbench.gateway.turn`: the turn and the reply's choices, read from request and completion;
* :mod:`~commitbench.gateway.catalog`: the tool catalogue (what a tool name or description affords);
* :mod:`~commitbench.gateway.checks`: the checks, pure functions over a turn, a choice and a detection;
* :mod:`~commitbench.gateway.detectors`: the offline and the LLM commitment detector;
* :mod:`~commitbench.gateway.actions`: what enforce and rewrite change (replacement, nudge, rewrite prompt);
* :mod:`~commitbench.gateway.recording`: anchored promises as ledger entries;
* :mod:`~commitbench.gateway.streams`: server-sent events read, assembled and written;
* :mod:`~commitbench.gateway.logbook` and :mod:`~commitbench.gateway.report`: the log and its rates;
* :mod:`~commitbench.gateway.app` and :mod:`~commitbench.gateway.server`: the ASGI app and its process;
* :mod:`~commitbench.gateway.upstream`: the connections to the upstream, their timeouts and faults;
* :mod:`commitbench.jsoncodec` (shared with the cache): JSON read and written fast, with the standard library's values;
* :mod:`~commitbench.gateway.litellm`: the same checks as a LiteLLM proxy guardrail.

``docs/gateway.md`` is the user's guide.
"""
