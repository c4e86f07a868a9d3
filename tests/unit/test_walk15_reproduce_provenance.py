"""Walkthrough 15: which commit a ``privfed reproduce`` report says its numbers come from.

The researcher ran ``privfed reproduce --quick`` (5 min) in her checkout and committed a file meanwhile. The
report's header, ``index.html`` and ``reproduce.json`` then named the new commit (``commit bca45a63aafc``), while
every experiment's own ``report.json`` under ``runs/`` named the one they ran on (``a45d0c09f483``): ``run`` reads
``host_info()`` (``git describe``) after the experiments end, not when they start, and nothing compares the two.
A ``git pull`` or ``git checkout`` during a long ``make reproduce`` (25 min) credits its numbers to code that did
not produce them. The commit recorded should be the one the run started from (and a change during the run said).

Fixed: ``run`` reads the commit before the experiments, and records and warns of another one at the end.
"""

import argparse
import json

import privfed.deploy.reproduce as reproduce_module
import privfed.server.report as report_module


def test_the_report_names_the_commit_the_run_started_from(tmp_path, monkeypatch):
    def at(commit):
        return lambda: {"privfed": "0.1.0", "commit": commit}

    monkeypatch.setattr(report_module, "version_info", at("aaaaaaaaaaaa"))

    def experiments_during_which_a_commit_lands(sections, out, **kwargs):
        monkeypatch.setattr(report_module, "version_info", at("bbbbbbbbbbbb"))
        return [], 1.0

    monkeypatch.setattr(reproduce_module, "reproduce", experiments_during_which_a_commit_lands)
    args = argparse.Namespace(out=tmp_path, quick=True, seed=0, only=None, timeout=None, jobs=1)
    reproduce_module.run(args, sections=())
    host = json.loads((tmp_path / "reproduce.json").read_text())["host"]
    assert host["git_commit"].startswith("aaaaaaaaaaaa"), host
    assert host["git_commit_at_end"].startswith("bbbbbbbbbbbb"), host  # and the move is said
