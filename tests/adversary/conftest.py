"""Fixtures of the hostile-coordinator tests (issue 9): certificates, the fake coordinator, and
honest owner node processes that are shut down (the coordinator's "job over" signal, then
SIGTERM) when a test ends."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import hostile  # noqa: E402


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "adversary: a hostile coordinator (or node) attacks honest owner processes (issue 9)"
    )


def pytest_collection_modifyitems(items):
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.adversary)


@pytest.fixture
def certs(tmp_path):
    return hostile.make_federation_certs(tmp_path / "certs", owners=3)


@pytest.fixture
def coordinator(certs):
    hc = hostile.HostileCoordinator(certs)
    yield hc
    hc.stop()


@pytest.fixture
def owners(tmp_path, coordinator, certs):
    """``owners(name, X, y, **kw)`` spawns an honest ``privfed owner`` node against the hostile
    coordinator and waits until its owners registered."""
    spawned = []

    def spawn(name, X, y, *, wait=True, **kw):
        proc = hostile.spawn_owner(tmp_path, coordinator.port, name, X, y, certs=certs, **kw)
        spawned.append(proc)
        if wait:
            try:
                coordinator.wait_registered(proc.owner_ids)
            except AssertionError:
                raise AssertionError(f"{name} did not register; its log:\n{proc.log()}") from None
        return proc

    yield spawn
    coordinator.shutdown = True
    for proc in spawned:
        proc.stop()
