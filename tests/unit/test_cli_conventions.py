"""One CLI convention (issue 11, item 3): ε lists, defaults in --help, one-line errors with exit 2,
negative bounds, --version, mutually exclusive flags, experiment NAME --help."""

from __future__ import annotations

import argparse
import importlib
import math
import subprocess

import pytest

from privfed.deploy.argtypes import epsilon_list
from privfed.deploy.cli import build_parser, main
from privfed.deploy.experiments import EXPERIMENTS
from privfed.server.report import version_info


def _subparsers(parser: argparse.ArgumentParser):
    """Every (name, parser) below ``parser``, nested ones included."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield name, sub
                yield from _subparsers(sub)


@pytest.mark.parametrize(
    "text, values",
    [("0.5,1,inf", [0.5, 1.0, math.inf]), ("2", [2.0]), ("1, 4 ,∞", [1.0, 4.0, math.inf]), ("1e-1", [0.1])],
)
def test_epsilon_lists_are_comma_separated_with_inf(text, values):
    assert epsilon_list(text) == values


@pytest.mark.parametrize("text", ["", "0", "-1", "1,a", "nan", "1;2"])
def test_bad_epsilon_lists_are_refused(text):
    with pytest.raises(argparse.ArgumentTypeError):
        epsilon_list(text)


def test_simulate_and_coordinator_read_epsilon_the_same_way():
    parser = build_parser()
    assert parser.parse_args(["simulate", "--epsilon", "0.5,1,inf"]).epsilon == [0.5, 1.0, math.inf]
    assert parser.parse_args(["simulate"]).epsilon == [0.5, 1.0, 2.0, 4.0, 8.0]  # the default, parsed
    assert parser.parse_args(["coordinator", "--owners", "2", "--epsilon", "inf"]).epsilon == math.inf


def test_a_coordinator_takes_one_epsilon_in_one_line(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["coordinator", "--owners", "2", "--epsilon", "1,2", "--insecure"])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1
    assert "give one epsilon" in err[0] and err[0].startswith("privfed coordinator: error:")


@pytest.mark.parametrize(
    "argv",
    [
        ["simulate", "--owners", "many"],
        ["simulate", "--owners", "0"],
        ["simulate", "--epsilon", "0"],
        ["simulate", "--task", "svm"],
        ["simulate", "--frobnicate"],
        ["simulate", "--epsilon", "1,,2"],  # an empty item
        ["owner", "--coordinator", "127.0.0.1", "--name", "a", "--ledger", "l", "--epsilon-budget", "1"],  # no port
        ["coordinator", "--owners", "1", "--epsilon", "1", "--insecure", "--certs", "x"],  # mutually exclusive
        [
            "owner",
            "--coordinator",
            "h:1",
            "--name",
            "owner-0",
            "--ledger",
            "l",
            "--epsilon-budget",
            "1",
            "--data",
            "rows.csv",
            "--dataset",
            "digits",
        ],  # mutually exclusive
        ["certs", "--out", "d", "--owners", "1", "--force", "--add"],
        ["coordinator", "--owners", "1", "--epsilon", "1", "--serve", "--load-model", "m.json"],
        ["experiment", "no-such-experiment"],
        ["experiment", "bdt-error", "--no-such-flag"],
    ],
)
def test_every_bad_argument_is_one_line_and_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2
    assert len(err) == 1 and ": error: " in err[0] and "--help" in err[0], err


def test_negative_bounds_are_a_value_not_a_flag():
    args = build_parser().parse_args(
        [
            "owner",
            "--coordinator",
            "h:1",
            "--name",
            "owner-0",
            "--ledger",
            "l",
            "--epsilon-budget",
            "1",
            "--data",
            "rows.csv",
            "--bounds",
            "-1:16",
        ]
    )
    assert args.bounds == "-1:16"
    args = build_parser().parse_args(
        [
            "owner",
            "--coordinator",
            "h:1",
            "--name",
            "owner-0",
            "--ledger",
            "l",
            "--epsilon-budget",
            "1",
            "--data",
            "rows.csv",
            "--bounds",
            "-.5e1:2.5",
        ]
    )
    assert args.bounds == "-.5e1:2.5"


def test_every_option_of_every_command_has_help_and_shows_its_default():
    for name, sub in _subparsers(build_parser()):
        text = sub.format_help()
        for action in sub._actions:
            if not action.option_strings or action.help == argparse.SUPPRESS:
                continue
            assert action.help, f"privfed {name} {action.option_strings[0]} has no help text"
            default = action.default
            unset = default is None or default is False or default == [] or default == argparse.SUPPRESS
            if action.required or unset or "default" in action.help:
                continue
            assert f"(default: {default})" in " ".join(text.split()), f"privfed {name} {action.option_strings[0]}"


def test_timeouts_say_their_unit():
    for name, sub in _subparsers(build_parser()):
        for action in sub._actions:
            if any("timeout" in o for o in action.option_strings):
                assert "second" in action.help, f"privfed {name} {action.option_strings[0]}: {action.help!r}"


@pytest.mark.parametrize("name", sorted(EXPERIMENTS))
def test_experiment_name_help_shows_the_experiments_own_options(name, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["experiment", name, "--help"])
    out = capsys.readouterr().out
    assert exc.value.code == 0 and f"usage: privfed experiment {name}" in out
    own = argparse.ArgumentParser()
    importlib.import_module(EXPERIMENTS[name]).add_arguments(own)
    flags = [o for a in own._actions for o in a.option_strings if o.startswith("--") and o != "--help"]
    assert flags and all(f in out for f in flags)


def test_version_names_the_package_version_and_the_git_commit(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    out = capsys.readouterr().out.strip()
    info = version_info()
    assert exc.value.code == 0 and out.startswith(f"privfed {info['privfed']}")
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=str(_repo()))
    if head.returncode == 0:  # a git checkout: the commit is named
        assert info["commit"] and head.stdout.strip().startswith(info["commit"].removesuffix("-dirty"))
        assert f"(commit {info['commit']})" in out


def _repo():
    from pathlib import Path

    import privfed.server

    return Path(privfed.server.__file__).resolve().parent


@pytest.mark.parametrize("columns", [60, 140])
def test_help_is_wrapped_to_the_terminal_width_read_when_it_is_printed(columns, monkeypatch):
    """The width is read when the help is formatted (not when the parser is built, which reads none:
    a node never prints a help and would load shutil, bz2 and lzma for it; issue 27)."""
    parser = build_parser("privfed")
    monkeypatch.setenv("COLUMNS", str(columns))
    owner = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices["owner"]
    lines = owner.format_help().splitlines()
    assert max(map(len, lines)) <= columns - 2 and max(map(len, lines)) > columns - 20, lines
