"""STYLE rules 1 and 5 and issue 10's layers, enforced by scanning imports (every ``import`` and
``from ... import`` in a file, also those inside functions): common/ is pure, the coordinator and
the owner node share only common/ and proto/, nothing of argparse or deploy/ below deploy/, and no
code draws from global generators."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN_IN_COMMON = {
    "grpc",
    "socket",
    "threading",
    "time",
    "asyncio",
    "subprocess",
    "random",
    "privfed.server",
    "privfed.owner",
    "privfed.proto",
    "privfed.deploy",
}
#: The command line is deploy/'s business: below it, configuration travels as typed objects
#: (``JobConfig``, ``NodeConfig``), never as an argparse Namespace (issue 10).
BELOW_DEPLOY = ("common", "server", "owner", "proto")
GLOBAL_DRAW = re.compile(
    r"np\.random\.(rand|randn|random|normal|uniform|laplace|choice|seed|shuffle|"
    r"permutation|randint|default_rng\(\))\b"
)


def imports(source: str) -> set[str]:
    """Every module name ``source`` imports, at any depth."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def python_files(*dirs: str, root: Path = ROOT) -> list[Path]:
    return [p for d in dirs for p in (root / d).rglob("*.py") if "_pb2" not in p.name]


def forbidden_imports(dirs: tuple[str, ...], forbidden: set[str], root: Path = ROOT) -> dict[str, list[str]]:
    """file -> the imports of ``forbidden`` modules (or their submodules) in the files under ``dirs``."""
    bad = {}
    for path in python_files(*dirs, root=root):
        hits = {n for n in imports(path.read_text()) if any(n == f or n.startswith(f + ".") for f in forbidden)}
        if hits:
            bad[path.relative_to(root).as_posix()] = sorted(hits)
    return bad


def test_the_scan_sees_every_form_of_import(tmp_path):
    source = (
        "import argparse as ap\nfrom privfed.deploy.cli import main\n"
        "def later():\n    from privfed.server import job\n    import privfed.owner.node\n"
        "from argparser import x\nimport privfed.serverless\n"  # a name that only starts like a forbidden one
    )
    assert imports(source) == {
        "argparse", "privfed.deploy.cli", "privfed.server", "privfed.owner.node", "argparser", "privfed.serverless"
    }  # fmt: skip
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text(source)
    assert forbidden_imports(("pkg",), {"argparse", "privfed.server", "privfed.owner"}, root=tmp_path) == {
        "pkg/m.py": ["argparse", "privfed.owner.node", "privfed.server"]
    }


def test_common_imports_no_io_or_outer_layers():
    assert forbidden_imports(("common",), FORBIDDEN_IN_COMMON) == {}


def test_no_random_module_and_no_global_numpy_draws():
    bad = []
    for path in python_files("common", "server", "owner", "deploy", "proto"):
        source = path.read_text()
        if "random" in imports(source) or GLOBAL_DRAW.search(source):
            bad.append(str(path.relative_to(ROOT)))
    assert bad == []


def test_server_and_owner_do_not_import_each_other():
    """The coordinator and the owner node share only common/ and proto/ (issue 10); proto/, the
    wire both sides speak, imports neither."""
    assert forbidden_imports(("server",), {"privfed.owner"}) == {}
    assert forbidden_imports(("owner",), {"privfed.server"}) == {}
    assert forbidden_imports(("proto",), {"privfed.server", "privfed.owner"}) == {}


def test_nothing_below_deploy_imports_argparse_or_deploy():
    """The CLI builds typed configurations and passes them down (issue 10): no argparse, and no
    import of deploy/, in common/, server/, owner/ or proto/."""
    assert forbidden_imports(BELOW_DEPLOY, {"argparse", "privfed.deploy"}) == {}
