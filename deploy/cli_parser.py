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
    value (None, False, an empty list) or its help already says what the default means.

    The terminal's width is read when a text is formatted, not when the formatter is made: argparse
    makes one for every flag it adds, and its width is read through ``shutil``, which loads ``bz2``
    and ``lzma`` (0.5 MB of every node process, which never prints a help; issue 27)."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24, width: int | None = None):
        super().__init__(prog, indent_increment, max_help_position, 80 if width is None else width)
        self._width_asked, self._max_help_position_asked = width, max_help_position

    def format_help(self) -> str:
        if self._width_asked is None:  # argparse's own default width, read now
            import shutil

            self._width = shutil.get_terminal_size().columns - 2
            self._max_help_position = min(
                self._max_help_position_asked, max(self._width - 20, self._indent_increment * 2)
            )
        return super().format_help()

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

    def add_subparsers(self, **kwargs: Any) -> Any:
        # argparse formats the subcommands' prog with a help formatter; without positionals or a usage
        # of its own that text is this parser's prog, given here so that no width is read (HelpFormatter)
        if "prog" not in kwargs and self.usage is None and not self._get_positional_actions():
            kwargs["prog"] = self.prog
        return super().add_subparsers(**kwargs)

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
