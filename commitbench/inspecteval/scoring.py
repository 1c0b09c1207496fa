"""The scorer and the metrics: the suite's signals and labels per sample, its headline metrics per task.

The scorer reads the trace the solver stored, labels it with the suite's offline labeller (the labeller
``commitbench label`` stores under ``rules``; its labels are what ``commitbench report`` reads by default),
or, when the eval names a model for inspect's model role ``grader`` (``--model-role grader=...``, or the task
parameter ``grader``; :mod:`commitbench.inspecteval.grader`, whose probe checks it before any sample plays),
with the suite's LLM labeller on that model (:func:`grader_client`: the chat agent's client on the grader
role, with the judge's pinned settings: temperature 0, the judge's seed and reply bound), and grades it with
the suite's inspect kit (``Suite.inspect``, :class:`commitbench.suites.kits.InspectKit`): the standing suite
builds the run's metric row with the analysis code the report uses (signals, judge aggregates, the strict
grade, the cell's roles), the follow-up suite its outcome label and commitment counts, and a suite without a
kit the scalar fields of its labeller's record. The score's value holds a few of those per sample; its
metadata holds the signals, the labels and the rows; both say whether the labeller's record holds a judge
error (:data:`JUDGE_ERROR_KEY`).

The task's metric reads the rows of every epoch (``scores="unreduced"``: a config's samples are inspect's
epochs, and the report pools them the same way) and computes the kit's values: for the two built-in
suites the report's metrics with the report's own functions, each estimate with its 95% cluster-bootstrap
interval (``_low``, ``_high``) where the report gives one (clustered by commitment type, resp. request;
the report gives no interval over fewer than six commitment types), and for every suite ``judge_errors``,
the runs whose labelling had a judge error: those runs count as the report counts them (a standing metric
whose grade needs a missing label leaves the run out, ``<metric>_excluded``; an unlabelled follow-up
response has no row), never as wrong answers. What inspect cannot show is the
report's grouping (by policy, by arm, by setup) and its paired differences: ``commitbench report`` gives
every table, on a run directory of ``commitbench run`` or on the log directory of these tasks
(:mod:`commitbench.inspecteval.logs`).
"""

from __future__ import annotations

from typing import Any, cast

from inspect_ai.model import GenerateConfig
from inspect_ai.scorer import Metric, SampleScore, Score, Scorer, Target, metric, scorer
from inspect_ai.solver import TaskState

from commitbench.inspecteval.client import InspectModelClient
from commitbench.inspecteval.grader import GRADER_ROLE, grader_model
from commitbench.inspecteval.play import TRACE_KEY, TaskPlan, model_entry_of
from commitbench.judges.labelling import LabelRecord, pin_judge_settings
from commitbench.llm import ModelClient
from commitbench.suites import AnySuite
from commitbench.suites.kits import InspectKit, ScoredRun, generic_grade, generic_values
from commitbench.traces import EpisodeTrace

__all__ = [
    "GRADER_ROLE", "JUDGE_ERRORS_METRIC", "JUDGE_ERROR_KEY", "grader_client", "inspect_kit", "judge_errors",
    "label_episode", "score_episode", "suite_metric",
]

ROWS_KEY = "rows"
# The score's metadata key (and value key) that says the labelling of the run had a judge error.
JUDGE_ERROR_KEY = "judge_error"
# The metric value that counts those runs, in every suite's metric.
JUDGE_ERRORS_METRIC = "judge_errors"


def inspect_kit(suite: AnySuite) -> InspectKit:
    """The suite's inspect kit, or the generic one (the scalar fields of its labeller's record)."""
    return suite.inspect if suite.inspect is not None else InspectKit(grade=generic_grade, values=generic_values)


def _rows(scores: list[SampleScore]) -> list[dict[str, Any]]:
    return [row for s in scores for row in (s.score.metadata or {}).get(ROWS_KEY, [])]


def judge_errors(scores: list[SampleScore]) -> int:
    """Runs (samples of every epoch) whose labelling had a judge error."""
    return sum(1 for s in scores if (s.score.metadata or {}).get(JUDGE_ERROR_KEY))


def suite_metric(suite: AnySuite) -> Any:
    """The task's metric of a suite: its kit's values over the rows of every epoch's samples, and the number of
    runs whose labelling had a judge error (``judge_errors``)."""
    kit = inspect_kit(suite)

    @metric(name=f"{suite.name}_metrics", scores="unreduced")
    def suite_metrics(n_boot: int = 1000) -> Metric:
        def compute(scores: list[SampleScore]) -> dict[str, float | int | str | bool | None]:
            values: dict[str, float | int | str | bool | None] = dict(kit.values(_rows(scores), n_boot, 0))
            values[JUDGE_ERRORS_METRIC] = judge_errors(scores)
            return values

        return compute

    suite_metrics.__doc__ = kit.description or f"The {suite.name} suite's values over every epoch's runs."
    return suite_metrics


def grader_client() -> InspectModelClient | None:
    """The LLM judge's client on inspect's ``grader`` model role, or None when the eval names no grader."""
    model = grader_model()
    if model is None:
        return None
    settings = pin_judge_settings(model_entry_of(model).model_settings())
    config = GenerateConfig(temperature=settings.temperature, seed=settings.seed, max_tokens=settings.max_tokens)
    return InspectModelClient(settings, role=GRADER_ROLE, config=config)


async def score_episode(plan: TaskPlan, trace: EpisodeTrace, judge: str,
                        client: InspectModelClient | None = None) -> tuple[str, LabelRecord, ScoredRun]:
    """Label a trace with the suite's labeller ``judge`` (with ``client``: its LLM labeller on that client) and
    grade it; (the labeller's name, its record, the grade)."""
    kit = inspect_kit(plan.suite)
    # The chat agent's client answers the judge's calls as a ModelClient would (complete and settings).
    if client is not None:
        labeller = plan.suite.labeller("llm", cast(ModelClient, client))
    else:
        labeller = plan.suite.labeller(judge)
    record = await labeller.label(trace)
    return labeller.name, record, kit.grade(plan.by_id.get(trace.episode_id), trace, record)


@scorer(metrics=[])
def label_episode(plan: TaskPlan, judge: str = "rules") -> Scorer:
    """Score a played episode: the suite's signals and the labels of its offline labeller, or of its LLM
    labeller on the ``grader`` model role when the eval names one (see the module doc). The value is the kit's
    facts of the run and ``judge_error``; the answer and explanation are the kit's; the metadata holds the run
    key, episode, sample, labeller, ``judge_error``, signals, the labeller's record and the metric rows
    (``docs/inspect.md``, "The scorer")."""

    async def score(state: TaskState, target: Target) -> Score:
        stored = state.store.get(TRACE_KEY)
        if stored is None:
            raise ValueError("the sample holds no trace: the episode was not played")
        trace = EpisodeTrace.model_validate(stored)
        labeller, record, run = await score_episode(plan, trace, judge, grader_client())
        return Score(value={**run.value, JUDGE_ERROR_KEY: record.has_errors}, answer=run.answer,
                     explanation=run.explanation,
                     metadata={"run_key": trace.run_key, "episode_id": trace.episode_id, "sample": trace.sample,
                               "labeller": labeller, JUDGE_ERROR_KEY: record.has_errors, "signals": run.signals,
                               "labels": run.labels, ROWS_KEY: run.rows})

    return score
