"""Fixtures of the hostile-coordinator tests (issue 9): certificates, the fake coordinator, and
honest owner node processes that are shut down (the coordinator's "job over" signal, then
SIGTERM) when a test ends."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "adversary: a hostile coordinator (or node) attacks honest owner processes (issue 9)"
    )


def pytest_collection_modifyitems(items):
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.adversary)


from hostile import certs, coordinator, owners, real_coordinator  # noqa: E402,F401 -- the fixtures, shared with tests/fuzz
