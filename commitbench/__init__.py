"""commitbench: measure whether LLM agents keep, drop, or fake their promises."""

__version__ = "0.1.0"
