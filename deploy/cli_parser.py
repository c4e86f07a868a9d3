"""privfed's argparse conventions, for every command of the ``privfed`` command line (:mod:`privfed.deploy.cli`).

Defaults in every ``--help`` (:class:`HelpFormatter`), one-line errors and exit code 2, values such as
``-1:16`` taken as values (:class:`Parser`), and ``--version`` (:class:`VersionAction`).
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from typing import Any, NoReturn


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows ``(default: X)`` after a flag's help, unless the flag is required, has no default
    value (None, False, an empty list) or its help already says what the default means."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if action.required or default is None or default is False or default == [] or "default" in text:
            return text
        return super()._get_help_string(action) or ""


class Parser(argparse.ArgumentParser):
    """argparse with privfed's conventions: defaults in every ``--help``, one-line errors (exit 2),
    and values such as ``-1:16`` (negative bounds) taken as values, not as unknown flags."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)
        # argparse reads "-1:16" as an option because it starts with "-"; a leading negative
        # number followed by ":" (a lo:hi range) is a value. Only "--flags" are options here.
        self._negative_number_matcher = re.compile(r"^-\d+$|^-\d*\.\d+$|^-(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?:")

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


class VersionAction(argparse.Action):
    """``--version``: privfed's version and, from a git checkout, its commit (looked up only when asked)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        super().__init__(option_strings, dest=dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        from privfed.server.report import version_info

        info = version_info()
        commit = f" (commit {info['commit']})" if info["commit"] else ""
        print(f"privfed {info['privfed'] or 'unknown version'}{commit}")
        parser.exit(0)
