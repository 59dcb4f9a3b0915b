"""Test helper: run a job's click command in-process, as a user would type it."""

from __future__ import annotations

from click.testing import CliRunner, Result


def invoke(command, *args) -> Result:
    """The command's result; every argument passed as a string (paths, numbers), and an exception the
    command does not turn into a message raised here rather than folded into the result."""
    return CliRunner().invoke(command, [str(a) for a in args], catch_exceptions=False)
