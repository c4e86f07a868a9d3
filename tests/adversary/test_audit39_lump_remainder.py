"""Audit 39, A39-1: the LUMP remainder a keyed report carries is netted again against releases it was already net of.

``JobBook._still_carried`` nets a :data:`~privfed.server.rounds.LUMP` (what a report of older code names by owner
only) against *everything* the run counts or asks for the owner, and ``releases_to_report`` writes what is left
back into ``epsilon_by_release`` under the key ``LUMP``, next to the keys this run counted. A later run reads that
report (the service keeps one report per job, and carries it: ``CoordinatorService._run``) and nets the remainder
a second time against the same keys when it counts them again (a live node re-sending its kept share, a journal
round replayed): each run after the first subtracts the re-counted releases once more, and the report names less
than the ledger holds.

Harness: real owner cores over one ledger file (share_groups="all"), the coordinator's job books driven as
``run_federated_job`` drives them; report 1 is written without ``epsilon_by_release`` (an older version's
write-ahead report, or a book without ``on_ask``), reports 2 and 3 by the current code.

Fixed: what a run leaves of a LUMP is written under ``EARLIER``, which no later run nets again.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from carried import OWNER, ask, book, held, node
from differential import boost

from privfed.common.boosting.wire import at_round, empty_history
from privfed.common.tasks import BoostShareTask, Refusal, Task
from privfed.server.rounds import EARLIER, LUMP, may_have_spent, releases_may_have_spent

pytestmark = pytest.mark.in_process

RUN = "run-a39-1"
CONFIG = boost("stump", RUN, share_groups="all")
ROUND0 = BoostShareTask(CONFIG, empty_history())
ROUND1 = BoostShareTask(CONFIG, at_round(empty_history(), 1))


def _three_runs(tmp_path: Path, *, keyed_first: bool) -> tuple[float, float, dict]:
    core = node(tmp_path / "ledger.sqlite")  # a live node: it keeps its shares, and re-sends one asked again
    first = book(keyed=keyed_first)
    for name, spec in (("run1-round0", ROUND0), ("run1-round1", ROUND1)):
        payload = ask(first, core, Task(name, OWNER, RUN, spec))
        assert not isinstance(payload, Refusal), payload
    report = first.to_report()
    # run 2 (the service restarted): its journal replays, or the live node re-sends, round 0; then it stops again
    second = book()
    second.carry(releases_may_have_spent(report))
    assert not isinstance(ask(second, core, Task("run2-round0", OWNER, RUN, ROUND0)), Refusal)
    report = second.to_report()  # the one report of the service job, over the first
    assert may_have_spent(report)[OWNER] >= held(core) - 1e-12, report  # still right here
    # run 3: the same round 0 counted again, as in run 2
    third = book()
    third.carry(releases_may_have_spent(report))
    assert not isinstance(ask(third, core, Task("run3-round0", OWNER, RUN, ROUND0)), Refusal)
    report = third.to_report()
    return may_have_spent(report).get(OWNER, 0.0), held(core), report


def test_third_run_after_an_older_report_names_what_the_ledger_holds(tmp_path):
    reported, paid, report = _three_runs(tmp_path, keyed_first=False)
    assert np.isclose(paid, 2 * CONFIG.params.share_round_epsilon), paid  # two shares, none paid twice
    assert reported >= paid - 1e-12, (reported, paid, report.get("epsilon_by_release"))


def test_control_second_report_carries_the_remainder_under_earlier(tmp_path):
    """Control: the second report holds what is left of the LUMP next to the key it counted (the mixed report), under
    ``EARLIER``, which a later run does not net again."""
    core = node(tmp_path / "ledger.sqlite")
    first = book(keyed=False)
    for name, spec in (("a0", ROUND0), ("a1", ROUND1)):
        ask(first, core, Task(name, OWNER, RUN, spec))
    second = book()
    second.carry(releases_may_have_spent(first.to_report()))
    ask(second, core, Task("b0", OWNER, RUN, ROUND0))
    releases = releases_may_have_spent(second.to_report())[OWNER]
    assert EARLIER in releases and LUMP not in releases and len(releases) == 2, releases


def test_control_keyed_first_report_three_runs(tmp_path):
    """Control: with a keyed first report the same three runs name both shares."""
    reported, paid, _ = _three_runs(tmp_path, keyed_first=True)
    assert reported >= paid - 1e-12, (reported, paid)
