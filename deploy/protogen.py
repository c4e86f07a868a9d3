"""Regenerate the Python code for ``proto/privfed.proto`` (``make proto``).

The generated ``privfed_pb2*.py`` files are committed; ``tests/unit/test_protogen.py`` runs
:func:`generate` into a temporary directory and fails if the result differs from what is
committed, so the schema and the code cannot drift apart.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

PROTO_DIR = Path(__file__).resolve().parent.parent / "proto"
GENERATED = ("privfed_pb2.py", "privfed_pb2.pyi", "privfed_pb2_grpc.py")


def generate(out_dir: Path) -> list[Path]:
    """Run protoc (grpcio-tools) and write the generated modules into ``out_dir``."""
    from grpc_tools import protoc  # test/dev dependency only

    with tempfile.TemporaryDirectory() as tmp:
        # Map proto/ to the virtual path privfed/proto so generated imports read
        # ``from privfed.proto import privfed_pb2``.
        args = [
            "protoc",
            f"-I{protoc._get_resource_file_name('grpc_tools', '_proto')}",
            f"-Iprivfed/proto={PROTO_DIR}",
            f"--python_out={tmp}",
            f"--pyi_out={tmp}",
            f"--grpc_python_out={tmp}",
            "privfed/proto/privfed.proto",
        ]
        if protoc.main(args) != 0:
            raise RuntimeError("protoc failed on proto/privfed.proto")
        out_dir.mkdir(parents=True, exist_ok=True)
        written = []
        for name in GENERATED:
            target = out_dir / name
            shutil.copyfile(Path(tmp) / "privfed" / "proto" / name, target)
            written.append(target)
        return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=PROTO_DIR)
    args = parser.parse_args(argv)
    for path in generate(args.out):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
