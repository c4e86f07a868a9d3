"""Fixtures of the fuzz tests (issue 14, item 3): hostile inputs to real servers and nodes."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent / "adversary"))

import hostile  # noqa: E402


def pytest_configure(config):
    config.addinivalue_line("markers", "fuzz: random and mutated protobuf messages against real processes")


def pytest_collection_modifyitems(items):
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.fuzz)


@pytest.fixture
def certs(tmp_path):
    return hostile.make_federation_certs(tmp_path / "certs", owners=2)


@pytest.fixture
def coordinator(certs):
    hc = hostile.HostileCoordinator(certs)
    yield hc
    hc.stop()


@pytest.fixture
def owners(tmp_path, coordinator, certs):
    """``owners(name, X, y)``: an honest ``privfed owner`` process, registered, stopped at the end."""
    spawned = []

    def spawn(name, X, y, **kw):
        proc = hostile.spawn_owner(tmp_path, coordinator.port, name, X, y, certs=certs, **kw)
        spawned.append(proc)
        coordinator.wait_registered(proc.owner_ids)
        return proc

    yield spawn
    coordinator.shutdown = True
    for proc in spawned:
        proc.stop()
