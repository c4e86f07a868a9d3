"""``--task bdt``'s default release follows the job's public bound on an owner's rows (issue 22): ``marginals``
when it is 1 (one report then holds an owner's whole data), ``shares`` otherwise; ``--release`` always wins;
reports say which ran and whether by default; a marginal job never resumes by asking its owners again."""

from __future__ import annotations

import json

import numpy as np
import pytest

from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError
from privfed.common.learners.marginal_boost import MARGINAL_ROUNDS
from privfed.deploy.cli import main
from privfed.server.config import JobConfig
from privfed.server.parameters import SHARE_ROUNDS
from privfed.server.report import learner_label
from privfed.server.service import not_rerun
from privfed.server.strategies import make_strategy
from privfed.server.strategies.boosting import BoostingStrategy
from privfed.server.strategies.marginal_boost import MarginalBoostStrategy

BOUNDS = Bounds(np.zeros(3), np.ones(3))


def bdt(**values) -> JobConfig:
    return JobConfig.from_flat(task="bdt", epsilon=3.0, owners=40, **values)


def strategy(config: JobConfig):
    return make_strategy(config, n_classes=2, bounds=BOUNDS)


@pytest.mark.parametrize("rows", [{"max_owner_rows": 1}, {"rows_per_owner": 1.0}, {"rows_per_owner": 0.5}])
def test_one_row_per_owner_runs_the_marginal_release_by_default(rows):
    config = bdt(**rows)
    assert (config.owner_rows_bound, config.release, config.release_source) == (1, "marginals", "default")
    built = strategy(config)
    assert isinstance(built, MarginalBoostStrategy) and built.n_rounds == MARGINAL_ROUNDS
    report = config.to_report()
    assert (report["release"], report["release_source"], report["n_rounds"]) == ("marginals", "default", 50)
    assert learner_label(config).startswith("bdt (stumps from marginal reports")
    assert (config.quorum, config.quorum_after_release) == (20, False)  # nb's one round: checked before it only
    with pytest.raises(TypeError, match="no boosting shares"):  # never shares' parameters at marginal defaults
        config.boosting_params(n_classes=2, bounds=BOUNDS)


@pytest.mark.parametrize("rows", [{}, {"max_owner_rows": 2}, {"rows_per_owner": 1.01}, {"rows_per_owner": 30.0}])
def test_owners_of_more_rows_or_an_unknown_count_run_the_share_pipeline_by_default(rows):
    config = bdt(**rows)
    assert config.owner_rows_bound > 1 and (config.release, config.release_source) == ("shares", "default")
    built = strategy(config)
    assert isinstance(built, BoostingStrategy) and built.params.n_rounds == SHARE_ROUNDS
    assert built.params.max_owner_rows == config.owner_rows_bound
    assert (config.to_report()["release"], config.to_report()["n_rounds"]) == ("shares", SHARE_ROUNDS)
    assert (config.quorum, config.quorum_after_release) == (20, True)  # later rounds have not spent yet


@pytest.mark.parametrize(("release", "rows", "kind"), [
    ("shares", {"max_owner_rows": 1}, BoostingStrategy),
    ("marginals", {"rows_per_owner": 30.0}, MarginalBoostStrategy),
    ("marginals", {}, MarginalBoostStrategy),
])  # fmt: skip
def test_an_explicit_release_wins_over_the_rows(release, rows, kind):
    config = bdt(release=release, **rows)
    assert (config.release, config.release_source) == (release, "--release")
    assert isinstance(strategy(config), kind)
    assert (config.to_report()["release"], config.to_report()["release_source"]) == (release, "--release")
    assert config.replace(epsilon=1.0).release_source == "--release"


def test_the_default_follows_the_rows_of_each_copy_of_the_job():
    """simulate and the coordinator learn the rows per owner after parsing the flags: the release is settled
    then, and a parameter only the settled release takes is accepted until it is settled otherwise."""
    given = bdt(smoothing=2.0)  # rows unknown yet: not checked against shares
    one_row = given.replace(rows_per_owner=1.0)
    assert (one_row.release, one_row.release_source, one_row.task_options()["smoothing"]) == (
        "marginals",
        "default",
        2.0,
    )
    assert one_row.replace(epsilon=5.0).release == "marginals"  # the rows stay, so does the default
    assert bdt(n_rounds=4).replace(rows_per_owner=1.0).task_options()["n_rounds"] == 4  # given: kept
    with pytest.raises(ConfigError) as err:
        given.replace(rows_per_owner=2.0)
    assert str(err.value) == (
        "--smoothing is a parameter of --release marginals, not of --release shares (the default release, as the "
        "public bound on an owner's rows is 2): give --release marginals to use it"
    )
    with pytest.raises(ConfigError, match="give --release marginals"):  # never settled: refused when it is used
        strategy(given)


def test_a_share_parameter_with_one_row_owners_says_to_choose_the_share_release():
    with pytest.raises(ConfigError) as err:
        bdt(max_owner_rows=1, eval_fraction=0.3)
    assert str(err.value) == (
        "--eval-fraction is a parameter of --release shares, not of --release marginals (the default release, as "
        "the public bound on an owner's rows is 1): give --release shares to use it"
    )
    assert bdt(max_owner_rows=1, eval_fraction=0.3, release="shares").task_options()["eval_fraction"] == 0.3


@pytest.mark.parametrize("release", [None, "marginals"])
def test_a_marginal_job_refuses_a_journal_before_anything_is_asked(tmp_path, release):
    journal = tmp_path / "journal.sqlite"
    config = bdt(max_owner_rows=1, journal=journal, resume=True, **({"release": release} if release else {}))
    with pytest.raises(ConfigError) as err:
        strategy(config)
    assert "\n" not in str(err.value) and "cannot be resumed" in str(err.value)
    assert "give --release shares" in str(err.value) and not journal.exists()
    assert ("(the default release" in str(err.value)) == (release is None)
    assert isinstance(strategy(bdt(max_owner_rows=1, journal=journal, release="shares")), BoostingStrategy)


def test_privfed_coordinator_resume_of_a_one_row_bdt_job_is_one_line_exit_2(tmp_path, capsys):
    """iris: 120 training rows, 120 owners: one row each, as the coordinator's public partition says."""
    journal, out = tmp_path / "journal.sqlite", tmp_path / "runs"
    flags = ["--task", "bdt", "--epsilon", "3", "--dataset", "iris", "--owners", "120", "--insecure"]
    code = main(["coordinator", *flags, "--journal", str(journal), "--resume", "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "--release marginals (the default release" in err[0], err
    assert "cannot be resumed" in err[0] and not journal.exists()
    (report_file,) = out.glob("*/report.json")
    report = json.loads(report_file.read_text())
    assert report["status"] == "failed" and "cannot be resumed" in report["error"]
    assert (report["config"]["release"], report["config"]["release_source"]) == ("marginals", "default")


def test_the_service_names_why_a_job_without_a_journal_is_not_rerun():
    assert (
        "\n" not in not_rerun("feddpdr")
        and "feddpdr job" in not_rerun("feddpdr")
        and "not run again" in not_rerun("nb")
    )
