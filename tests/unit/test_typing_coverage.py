"""Type hints on every public function (issue 10), kept honest: every module mypy checks is either
fully typed (listed in the ``disallow_untyped_defs`` override of pyproject.toml) or explicitly
left for later (an ``ignore_errors`` override), never neither; and the ignore list only shrinks,
so a new module cannot slip in untyped, even under a wildcard such as ``privfed.deploy.experiments.*``.

The modules are those of ``[tool.mypy] files`` (less its ``exclude``), named as mypy names them
(``mypy_path`` stripped). Runs in well under a second: it reads pyproject.toml and lists files.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: The modules still untyped when the issue-10 branches merged. An ``ignore_errors`` override may
#: cover only these (fewer as they are typed; a name here may outlive its entry there, none is added); a new
#: module is written with type hints and listed under ``disallow_untyped_defs``.
UNTYPED_AT_ISSUE_10 = frozenset(
    """
    privfed.common.boosting privfed.common.boosting.loop
    privfed.common.boosting.simulation privfed.common.boosting.wire
    privfed.common.feddpdr privfed.common.feddpdr.centroid privfed.common.feddpdr.pca
    privfed.common.feddpdr.subspace privfed.common.feddpdr.svm
    privfed.common.learners.samme privfed.common.learners.stump privfed.common.mechanisms.frequency
    privfed.common.secagg.ring
    privfed.deploy.cli privfed.deploy.inprocess privfed.deploy.simulate
    privfed.deploy.experiments privfed.deploy.experiments.boosting privfed.deploy.experiments.feddpdr
    privfed.deploy.experiments.nullspace
    privfed.owner.boosting privfed.owner.data privfed.owner.handlers privfed.owner.main
    privfed.server.config privfed.server.dispatcher privfed.server.job privfed.server.main
    privfed.server.strategies.boosting privfed.server.strategies.feddpdr
    """.split()
)
#: Generated code, never typed by hand (``make proto``).
GENERATED = frozenset({"privfed.proto.privfed_pb2_grpc"})


def _mypy_config() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]


def checked_modules(config: dict, root: Path = ROOT) -> set[str]:
    """The module names mypy checks: every .py under ``config["files"]``, less ``config["exclude"]``."""
    base = config.get("mypy_path", "").rstrip("/")
    excludes = [re.compile(p) for p in config.get("exclude", [])]
    names = set()
    for entry in config["files"]:
        prefix = entry[len(base) + 1 :] if base and entry.startswith(base + "/") else entry
        for path in (root / entry).rglob("*.py"):
            rel = path.relative_to(root / entry)
            if any(x.search(f"{prefix}/{rel.as_posix()}") for x in excludes):
                continue
            parts = [*Path(prefix).parts, *rel.with_suffix("").parts]
            names.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def _matches(module: str, pattern: str) -> bool:
    """mypy's override patterns: ``a.b`` names one module, ``a.b.*`` names ``a.b`` and every submodule."""
    if pattern.endswith(".*"):
        return module == pattern[:-2] or module.startswith(pattern[:-1])
    return module == pattern


def override_patterns(config: dict, flag: str) -> list[str]:
    """The module patterns of every ``[[tool.mypy.overrides]]`` that sets ``flag = true``."""
    out: list[str] = []
    for override in config.get("overrides", []):
        if override.get(flag) is True:
            modules = override["module"]
            out += [modules] if isinstance(modules, str) else modules
    return out


def covered(modules: set[str], patterns: list[str]) -> set[str]:
    return {m for m in modules if any(_matches(m, p) for p in patterns)}


def test_the_module_listing_follows_mypy_names(tmp_path):
    (tmp_path / "tc" / "privfed" / "pkg" / "sub").mkdir(parents=True)
    for name in ("__init__.py", "a.py", "gen_pb2.py", "sub/__init__.py", "sub/b.py"):
        (tmp_path / "tc" / "privfed" / "pkg" / name).write_text("")
    (tmp_path / "tool").mkdir()
    (tmp_path / "tool" / "c.py").write_text("")
    config = {"mypy_path": "tc", "files": ["tc/privfed/pkg", "tool"], "exclude": [r"pkg/gen_pb2\.py$"]}
    assert checked_modules(config, tmp_path) == {
        "privfed.pkg", "privfed.pkg.a", "privfed.pkg.sub", "privfed.pkg.sub.b", "tool.c"
    }  # fmt: skip
    assert _matches("privfed.pkg", "privfed.pkg.*") and _matches("privfed.pkg.sub.b", "privfed.pkg.*")
    assert not _matches("privfed.pkgx", "privfed.pkg.*") and not _matches("privfed.pkg.a", "privfed.pkg")


def test_every_checked_module_is_typed_or_explicitly_left_for_later():
    config = _mypy_config()
    modules = checked_modules(config)
    assert len(modules) > 50  # the listing found the package
    typed = covered(modules, override_patterns(config, "disallow_untyped_defs"))
    ignored = covered(modules, override_patterns(config, "ignore_errors"))
    neither = sorted(modules - typed - ignored)
    assert neither == [], "type these and list them in the disallow_untyped_defs override of pyproject.toml"
    # ignore_errors silences a module whatever else lists it: one named as typed and also ignored
    # (a wildcard may cover the rest of a package while one module waits: mechanisms.frequency)
    # is not checked at all.
    named = {p for p in override_patterns(config, "disallow_untyped_defs") if not p.endswith(".*")}
    assert sorted(named & ignored) == [], "these are typed: take them out of the ignore_errors override"


def test_the_ignore_list_only_shrinks():
    config = _mypy_config()
    ignored = covered(checked_modules(config), override_patterns(config, "ignore_errors"))
    new = sorted(ignored - UNTYPED_AT_ISSUE_10 - GENERATED)
    assert new == [], "new modules are typed: list them under disallow_untyped_defs, not ignore_errors"
