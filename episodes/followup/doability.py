"""The doability matrix: which request categories each setup can serve, with per-request overrides.

The matrix sets the denominators of two rates: deferral (among responses to requests the setup cannot
fully serve: not doable or partial) and over-refusal (among responses to requests it can fully serve).
A partial cell is one where a different affordance can carry part of the request (a ticket can ask a
person to send a reminder). Overrides change single cells for single requests, each with its reason.

The file is ``episodes/data/followup/doability.yaml``; loading it validates every category and setup and
names the file and the field of any error.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from commitbench.episodes.followup.vocabulary import Doability, RequestCategory, SetupId
from commitbench.yamlfile import YamlError, parse_yaml, read_yaml

DOABILITY_RESOURCE = "data/followup/doability.yaml"


class DoabilityFileError(ValueError):
    """The doability file is malformed; the message names the file and the field."""


class DoabilityOverride(BaseModel):
    """A change to the matrix for one request."""

    model_config = ConfigDict(extra="forbid")

    request_id: str = Field(description="Id of the request the override applies to.", min_length=1)
    setups: dict[SetupId, Doability] = Field(description="The cells that differ from the category's row.")
    reason: str = Field(description="Why this request differs from its category.", min_length=5)
    only_under: dict[str, str] | None = Field(
        default=None,
        description="Settings under which alone the override applies (a profile option and its value, e.g. "
        "{monitoring_doability: commitbench}); null: under every profile.",
    )

    @model_validator(mode="after")
    def _not_empty(self) -> DoabilityOverride:
        if not self.setups:
            raise ValueError("an override must change at least one setup")
        return self


class DoabilityMatrix(BaseModel):
    """Category x setup doability, plus overrides per request."""

    model_config = ConfigDict(extra="forbid")

    matrix: dict[RequestCategory, dict[SetupId, Doability]] = Field(
        description="For each request category, the doability in each setup."
    )
    overrides: list[DoabilityOverride] = Field(default_factory=list, description="Per-request exceptions.")

    @model_validator(mode="after")
    def _complete(self) -> DoabilityMatrix:
        for category in RequestCategory:
            if category not in self.matrix:
                raise ValueError(f"matrix.{category.value}: category missing")
            missing = [s.value for s in SetupId if s not in self.matrix[category]]
            if missing:
                raise ValueError(f"matrix.{category.value}: setups missing: {missing}")
        seen: set[str] = set()
        for index, override in enumerate(self.overrides):
            if override.request_id in seen:
                raise ValueError(f"overrides.{index}.request_id: {override.request_id!r} appears twice")
            seen.add(override.request_id)
        return self

    def lookup(
        self, request_id: str, category: RequestCategory, setup: SetupId, settings: Mapping[str, str] | None = None
    ) -> Doability:
        """The doability of one request in one setup under a profile's settings (an override that applies
        first, then the category row). ``settings`` maps option names to values (null: the project's)."""
        chosen = settings if settings is not None else project_settings()
        for override in self.overrides:
            applies = override.only_under is None or all(chosen.get(k) == v for k, v in override.only_under.items())
            if applies and override.request_id == request_id and setup in override.setups:
                return override.setups[setup]
        return self.matrix[category][setup]

    def check_request_ids(self, known_ids: Collection[str], source: str = DOABILITY_RESOURCE) -> None:
        """Fail when an override names a request that does not exist."""
        known = set(known_ids)
        for index, override in enumerate(self.overrides):
            if override.request_id not in known:
                raise DoabilityFileError(
                    f"{source}: overrides.{index}.request_id: unknown request {override.request_id!r}"
                )


def project_settings() -> dict[str, str]:
    """The project profile's settings as option values."""
    from commitbench.episodes.followup.profile import FollowupSettings

    return {name: value.value for name, value in FollowupSettings()}


def _location(loc: tuple[Any, ...]) -> str:
    return ".".join(str(part) for part in loc)


def parse_doability(data: Any, source: str) -> DoabilityMatrix:
    """Validate already-parsed YAML; ``source`` names the file in every error message."""
    if not isinstance(data, dict):
        raise DoabilityFileError(f"{source}: expected a mapping at the top level, got {type(data).__name__}")
    try:
        return DoabilityMatrix.model_validate(data)
    except ValidationError as exc:
        lines = []
        for error in exc.errors():
            message = error["msg"]
            if message.startswith("Value error, "):
                message = message[len("Value error, ") :]
            if error["loc"]:
                lines.append(f"{source}: {_location(error['loc'])}: {message}")
            else:  # whole-file checks already name the field in their message
                lines.append(f"{source}: {message}")
        raise DoabilityFileError("\n".join(lines)) from exc


def load_doability_file(path: Path) -> DoabilityMatrix:
    try:
        data = read_yaml(path)
    except YamlError as exc:
        raise DoabilityFileError(str(exc)) from None
    return parse_doability(data, str(path))


@lru_cache(maxsize=1)
def load_doability() -> DoabilityMatrix:
    """The packaged matrix (validated once per process)."""
    text = resources.files("commitbench.episodes").joinpath(DOABILITY_RESOURCE).read_text(encoding="utf-8")
    try:
        data = parse_yaml(text, DOABILITY_RESOURCE)
    except YamlError as exc:
        raise DoabilityFileError(str(exc)) from None
    return parse_doability(data, DOABILITY_RESOURCE)
