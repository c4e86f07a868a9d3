"""STYLE rules 1 and 5, enforced: common/ is pure, and no code draws from global generators."""

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
GLOBAL_DRAW = re.compile(
    r"np\.random\.(rand|randn|random|normal|uniform|laplace|choice|seed|shuffle|"
    r"permutation|randint|default_rng\(\))\b"
)


def imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def python_files(*dirs):
    return [p for d in dirs for p in (ROOT / d).rglob("*.py") if "_pb2" not in p.name]


def test_common_imports_no_io_or_outer_layers():
    bad = {}
    for path in python_files("common"):
        hits = {n for n in imports(path) if any(n == f or n.startswith(f + ".") for f in FORBIDDEN_IN_COMMON)}
        if hits:
            bad[str(path.relative_to(ROOT))] = sorted(hits)
    assert bad == {}


def test_no_random_module_and_no_global_numpy_draws():
    bad = []
    for path in python_files("common", "server", "owner", "deploy", "proto"):
        if "random" in imports(path) or GLOBAL_DRAW.search(path.read_text()):
            bad.append(str(path.relative_to(ROOT)))
    assert bad == []


def test_server_and_owner_do_not_import_each_other():
    """The coordinator and the owner node share only common/ and proto/ (issue 10)."""
    bad = {}
    for side, other in (("server", "privfed.owner"), ("owner", "privfed.server")):
        for path in python_files(side):
            hits = {n for n in imports(path) if n == other or n.startswith(other + ".")}
            if hits:
                bad[str(path.relative_to(ROOT))] = sorted(hits)
    assert bad == {}
