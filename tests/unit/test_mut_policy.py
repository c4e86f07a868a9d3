"""A gap mutation testing found in the owner's policy (privfed.owner.policy): the announced δ of a job was held
by no test, so a check that let a job's releases pass it (spent δ halved, the announcement doubled) went unnoticed."""

from privfed.common.jobinfo import JobInfo
from privfed.common.ledger import Debit, Ledger
from privfed.owner.policy import exceeds_announcement


def test_a_job_is_held_to_the_delta_it_announced(tmp_path):
    """``exceeds_announcement`` counts δ as it counts ε: 6e-7 spent on the job, 4e-7 more reaches the announced 1e-6
    exactly (accepted), 5e-7 more passes it (declined)."""
    job = JobInfo(job_id="j1", data_user="alice", task="ncc", epsilon=1.0, delta=1e-6, schema_sha256="ab" * 32)
    with Ledger(tmp_path / "l.sqlite", epsilon_budget=10.0, delta_budget=1e-3) as led:
        led.debit_many([Debit("o", 0.1, 6e-7, "p", "r1", job="j1"), Debit("o", 0.1, 5e-4, "p", "r0", job="j0")])
        assert not exceeds_announcement(job, led, "o", [Debit("o", 0.1, 4e-7, "p", "r2", job="j1")])
        assert exceeds_announcement(job, led, "o", [Debit("o", 0.1, 5e-7, "p", "r2", job="j1")])
