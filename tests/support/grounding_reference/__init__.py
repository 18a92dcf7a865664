"""Time grounding as Python did it before the core took it over
(`jevmem._core.ground_times`): a frozen copy of the pattern table, its
resolvers and the calendar they use, kept as the tests' oracle for the port.
Nothing in the package imports it."""

from ._grounding import PRECISIONS, TimeRef, ground

__all__ = ["PRECISIONS", "TimeRef", "ground"]
