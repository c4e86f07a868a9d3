"""`privfed owner`'s command line: what its flags become, and the combinations it refuses."""

import pytest


def test_a_policy_daemon_refuses_a_connect_timeout_it_would_ignore(tmp_path):
    """README: flags that would do nothing are refused. A --policy daemon keeps trying to reach its coordinator
    until SIGTERM, so a --connect-timeout beside it is an error naming both; without --policy it is the node's."""
    from privfed.common.errors import ConfigError
    from privfed.deploy.cli import build_parser
    from privfed.deploy.owner_cli import owner_config

    base = ["owner", "--coordinator", "127.0.0.1:1", "--name", "owner-0", "--ledger", str(tmp_path / "l.sqlite")]
    base += ["--epsilon-budget", "1", "--insecure"]
    daemon = base + ["--policy", str(tmp_path / "policy.toml")]
    with pytest.raises(ConfigError, match="--connect-timeout does nothing with --policy"):
        owner_config(build_parser("owner").parse_args([*daemon, "--connect-timeout", "5"]))
    assert owner_config(build_parser("owner").parse_args(daemon)).policy == tmp_path / "policy.toml"
    assert owner_config(build_parser("owner").parse_args(base)).connect_timeout == 120.0
    assert owner_config(build_parser("owner").parse_args([*base, "--connect-timeout", "5"])).connect_timeout == 5.0


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--epsilon-budget", "-3"], "--epsilon-budget must be >= 0"),
        (["--epsilon-budget", "3", "--delta-budget", "2"], "--delta-budget is a probability"),
    ],
)
def test_a_budget_out_of_range_is_named_by_its_flag(flags, said, capsys):
    from privfed.deploy.cli import main

    argv = ["owner", "--coordinator", "127.0.0.1:9", "--name", "owner-0", "--dataset", "iris", "--n-owners", "2"]
    assert main([*argv, "--shards", "0:1", "--ledger", "unused.sqlite", "--insecure", *flags]) == 2
    assert said in capsys.readouterr().err


def test_shards_zero_with_a_file_is_named_as_the_count_it_is(tmp_path, capsys):
    from privfed.deploy.cli import main

    (tmp_path / "rows.csv").write_text("a,b,y\n1,2,0\n3,4,1\n")
    argv = ["owner", "--coordinator", "127.0.0.1:9", "--name", "owner-0", "--data", str(tmp_path / "rows.csv")]
    flags = ["--bounds", "0:10", "--classes", "2", "--ledger", str(tmp_path / "l.sqlite"), "--epsilon-budget", "1"]
    assert main([*argv, "--shards", "0", *flags, "--insecure"]) == 2
    assert "--shards 0: with --data it is how many owners share the file's rows (at least 1)" in capsys.readouterr().err


@pytest.mark.parametrize("header", [True, False])
def test_shards_one_above_the_rows_of_a_headed_file_stop_the_node_before_it_dials(tmp_path, capsys, header):
    """Walkthrough 14, W14-10: without --schema, --shards equal to the lines of a file with a header (one more than
    its rows) registered with the service, which logged "its rows do not fit the federation schema" once the node
    refused every task; now it stops at once with the one line --shards above the lines gives. A first line holding
    a number is a row (the built-in schemas' rule), so such a file still starts with --shards equal to its lines."""
    from privfed.deploy.cli import main

    lines = ["a,b,y"] * header + ["1,2,0", "3,4,1"]
    (tmp_path / "rows.csv").write_text("\n".join(lines) + "\n")
    argv = ["owner", "--coordinator", "127.0.0.1:9", "--name", "owner-0", "--data", str(tmp_path / "rows.csv")]
    flags = ["--ledger", str(tmp_path / "l.sqlite"), "--epsilon-budget", "1", "--insecure", "--connect-timeout", "1"]
    assert main([*argv, "--shards", str(len(lines)), *flags]) == 2
    err = capsys.readouterr().err
    if header:
        assert f"--shards 3: the first of the 3 line(s) in {tmp_path / 'rows.csv'} holds no number" in err, err
        assert "give --shards at most 2" in err
    else:  # it dials (nobody answers at port 9)
        assert "holds no number" not in err and "127.0.0.1:9" in err, err


def test_shards_are_checked_against_the_rows_a_schema_reads_not_the_lines(tmp_path, capsys):
    """Walkthrough 4, m10: a 1-row file with its header passed ``--shards 2`` (2 lines), registered, then refused
    every task as schema_mismatch. With ``--schema`` the rows are known before the node dials out."""
    from privfed.deploy.cli import main

    (tmp_path / "schema.toml").write_text(
        'features = ["a", "b"]\nclasses = [0, 1]\nlabel = "y"\n[bounds]\nlo = 0\nhi = 10\n'
    )
    (tmp_path / "rows.csv").write_text("a,b,y\n1,2,0\n")
    argv = ["owner", "--coordinator", "127.0.0.1:9", "--name", "owner-0", "--data", str(tmp_path / "rows.csv")]
    flags = ["--schema", str(tmp_path / "schema.toml"), "--ledger", str(tmp_path / "l.sqlite"), "--epsilon-budget", "1"]
    assert main([*argv, "--shards", "2", *flags, "--insecure", "--connect-timeout", "1"]) == 2
    err = capsys.readouterr().err
    assert "--shards 2: 1 row(s) in" in err and "cannot give 2 owners a row each" in err, err
