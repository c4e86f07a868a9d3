"""Fixtures of the fuzz tests (issue 14, item 3): hostile inputs to real servers and nodes."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent / "adversary"))


def pytest_configure(config):
    config.addinivalue_line("markers", "fuzz: random and mutated protobuf messages against real processes")


def pytest_collection_modifyitems(items):
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.fuzz)


from hostile import certs, coordinator, owners  # noqa: E402,F401 -- the adversary tests' fixtures
