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
