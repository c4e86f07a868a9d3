"""The command line that starts a ``privfed owner`` node process, written once for the launchers, the
benchmarks and the tests that spawn real owner processes."""

from __future__ import annotations

import sys


def owner_argv(coordinator: str, name: str) -> list[str]:
    """``privfed owner --coordinator ADDR --name NAME`` under this interpreter; the caller appends the rest."""
    return [sys.executable, "-m", "privfed.deploy.cli", "owner", "--coordinator", coordinator, "--name", name]
