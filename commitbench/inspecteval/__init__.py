"""Both suites as inspect-ai tasks: ``inspect eval commitbench/standing`` and ``commitbench/followup``.

The tasks play the suites' own environments, interventions, chat agent and play loop (the runner's cell
player) through inspect's model API, and score with the suites' own labellers and report metrics:
:mod:`.tasks` (the tasks, registered through the ``inspect_ai`` entry point), :mod:`.params` (task
parameters from the episode filters), :mod:`.client` (the chat agent's client on inspect's model, also
the LLM judge's on the ``grader`` role), :mod:`.play` (the solver), :mod:`.evalrun` (the eval's epoch
count for the solver, and checks made once per eval, through an inspect hook), :mod:`.grader` (the
``grader`` role's model, probed before any sample plays), :mod:`.transcript`
(messages and tool events for ``inspect view``), :mod:`.scoring` (scorer, with the offline labeller or
the LLM judge on the ``grader`` role, and metrics), :mod:`.logs` (a log directory of the tasks as a run
directory, which ``commitbench report`` and ``commitbench view`` read). Needs the ``[inspect]`` extra,
but for :func:`.logs.is_inspect_log`; ``docs/inspect.md`` is the guide.
"""
