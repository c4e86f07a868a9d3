"""``privfed simulate --data``: how many owners each file's node hosts (walkthrough 13, W13-5)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from privfed.common.errors import ConfigError
from privfed.deploy.simulation_nodes import node_ranges, owners_per_file


def _best_largest_owner(n_owners: int, sizes: list[int]) -> int:
    """The smallest possible largest owner (rows, rounded up) over every split of the owners, by brute force."""
    best = None
    for counts in itertools.product(*(range(1, s + 1) for s in sizes)):
        if sum(counts) == n_owners:
            load = max(-(-s // c) for s, c in zip(sizes, counts))
            best = load if best is None else min(best, load)
    assert best is not None
    return best


@pytest.mark.parametrize("seed", [*range(60), None])
def test_every_file_hosts_one_to_its_rows_and_the_largest_owner_is_as_small_as_it_can_be(seed):
    if seed is None:  # proportional shares would give 1, 1, 1, 3: a 7-row owner where 6 is possible
        sizes, n_owners = [2, 7, 2, 11], 6
    else:
        rng = np.random.default_rng(seed)
        sizes = [int(s) for s in rng.integers(1, 12, size=int(rng.integers(1, 5)))]
        n_owners = int(rng.integers(len(sizes), sum(sizes) + 1))
    counts = owners_per_file(n_owners, sizes)
    assert counts.sum() == n_owners
    assert all(1 <= c <= s for c, s in zip(counts, sizes))
    assert max(-(-s // int(c)) for s, c in zip(sizes, counts)) == _best_largest_owner(n_owners, sizes)


def test_owners_equal_to_the_rows_give_every_owner_one_row_of_uneven_sites():
    assert node_ranges(755, 3, [300, 255, 200]) == [range(0, 300), range(300, 555), range(555, 755)]
    assert list(owners_per_file(400, [200, 200])) == [200, 200]
    assert list(owners_per_file(4, [1, 1, 1, 1000])) == [1, 1, 1, 1]


def test_without_files_the_owners_are_split_evenly_over_the_processes():
    assert node_ranges(10, 3) == [range(0, 3), range(3, 6), range(6, 10)]
    assert node_ranges(2, 5) == [range(0, 1), range(1, 2)]


def test_more_owners_than_rows_is_refused_with_the_files_rows():
    with pytest.raises(ConfigError, match=r"--owners 11: the --data files hold 10 rows \(4, 6\).*at most 10"):
        owners_per_file(11, [4, 6])
