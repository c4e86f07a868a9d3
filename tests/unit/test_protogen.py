"""The committed generated code is exactly what `make proto` would write now."""

from privfed.deploy.protogen import GENERATED, PROTO_DIR, generate


def test_generated_code_is_up_to_date(tmp_path):
    generate(tmp_path)
    stale = [name for name in GENERATED if (tmp_path / name).read_bytes() != (PROTO_DIR / name).read_bytes()]
    assert stale == [], f"run `make proto` and commit: {stale} differ from proto/privfed.proto"
