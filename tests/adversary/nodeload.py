"""A node's configuration for the differential tests that run its load after registration in process (the row
count's timing channel: ``test_load_work_rows``, ``test_audit26_load_pad_paths``, ``test_audit27_load_work_trace``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from privfed.owner.main import OwnerConfig


def offline_node(
    tmp_path: Path, data: Path, name: str, ledger: str, *, shards: str = "10", **extra: Any
) -> OwnerConfig:
    """Node ``name`` over the rows of ``data``, its ledger ``tmp_path/ledger``, dialling an address nobody serves."""
    return OwnerConfig(
        coordinator="127.0.0.1:1",
        name=name,
        ledger=tmp_path / ledger,
        epsilon_budget=1.0,
        data=str(data),
        shards=shards,
        **extra,
    )
