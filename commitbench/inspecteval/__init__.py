"""Both suites as inspect-ai tasks: ``inspect eval commitbench/standing`` and ``commitbench/followup``.

The tasks play the suites' own environments, interventions, chat agent and play loop (the runner's cell
player) through inspect's model API, and score with the suites' own labellers and report metrics:
:mod:`.tasks` (the tasks, registered through the ``inspect_ai`` entry point), :mod:`.params` (task
parameters from the episode filters), :mod:`.client` (the chat agent's client on inspect's model),
:mod:`.play` (the solver), :mod:`.transcript` (messages and tool events for ``inspect view``),
:mod:`.scoring` (scorer and metrics). Needs the ``[inspect]`` extra; ``docs/inspect.md`` is the guide.
"""
