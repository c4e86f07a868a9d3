"""The federation schema: parsing (TOML and JSON), validation, labels mapped by value, owners'
files checked against it with file and line, and the agreement between an owner's and the
coordinator's schema."""

from pathlib import Path

import numpy as np
import pytest

from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError
from privfed.common.schema import FederationSchema
from privfed.owner.data import check_owner_rows, load_owner_file, read_owner_rows, shorthand_schema
from privfed.owner.main import agreed_schema

TOML = """
features = ["a", "b"]
classes = [-1, 3, 7]
test = "test.csv"
[bounds]
lo = 0
hi = [16, 8.5]
"""
JSON = '{"classes": [-1, 3, 7], "bounds": {"hi": [16, 8.5], "lo": [0, 0]}, "features": ["a", "b"], "test": "test.csv"}'


def test_toml_and_json_of_one_schema_parse_to_the_same_value_and_digest():
    a, b = FederationSchema.parse(TOML), FederationSchema.parse(JSON)
    assert a == b and a.digest() == b.digest()
    assert (a.d, a.n_classes, a.classes, a.test) == (2, 3, (-1, 3, 7), "test.csv")
    assert np.array_equal(a.bounds.hi, [16.0, 8.5]) and np.array_equal(a.bounds.lo, [0.0, 0.0])
    assert FederationSchema.parse(a.to_json()) == a  # the canonical form is what travels


def test_features_may_be_a_count_and_classes_strings():
    s = FederationSchema.parse('features = 3\nclasses = ["cat", "dog"]\n[bounds]\nlo = -1\nhi = 1\n')
    assert s.features == ("x0", "x1", "x2") and s.classes == ("cat", "dog") and s.test is None


@pytest.mark.parametrize(
    "text, fragment",
    [
        ('features = ["a"]\nclasses = [0, 1]\ncolour = 1\n[bounds]\nlo = 0\nhi = 1\n', "unknown key(s) ['colour']"),
        ('features = ["a"]\nclasses = [0, 1]\n', "missing key(s) ['bounds']"),
        ('features = ["a", "b"]\nclasses = [0, 1]\n[bounds]\nlo = [0]\nhi = 1\n', "bounds.lo must be a number or"),
        ('features = ["a"]\nclasses = [0, 1]\n[bounds]\nlo = 1\nhi = 0\n', "lo < hi"),
        ('features = ["a"]\nclasses = [0, 0]\n[bounds]\nlo = 0\nhi = 1\n', "distinct"),
        ('features = ["a"]\nclasses = [0, "x"]\n[bounds]\nlo = 0\nhi = 1\n', "all integers or all strings"),
        ('features = ["a"]\nclasses = [0.5, 1]\n[bounds]\nlo = 0\nhi = 1\n', "classes must be a list of label"),
        ('features = ["a"]\nclasses = [true, false]\n[bounds]\nlo = 0\nhi = 1\n', "classes must be a list of label"),
        ('features = ["a"]\nclasses = [1]\n[bounds]\nlo = 0\nhi = 1\n', "at least two"),
        ('features = ["a", "a"]\nclasses = [0, 1]\n[bounds]\nlo = 0\nhi = 1\n', "distinct"),
        ('features = ["a"]\nclasses = [0, 1]\n[bounds]\nlo = 0\nhi = inf\n', "finite"),
        ("features = [", "invalid TOML"),
        ('{"features": 1,', "line 1: invalid JSON"),
    ],
)
def test_a_bad_schema_is_one_config_error_naming_the_source(text, fragment):
    with pytest.raises(ConfigError) as info:
        FederationSchema.parse(text, source="s.toml")
    assert str(info.value).startswith("s.toml: ") and fragment in str(info.value), str(info.value)


def test_labels_map_to_class_indices_by_value():
    schema = FederationSchema.parse(TOML)
    y, bad = schema.class_indices(np.array([3.0, 7.0, -1.0, 3.0]))
    assert y.tolist() == [1, 2, 0, 1] and bad is None
    _, bad = schema.class_indices(np.array([3.0, 7.0, 5.0, 2.0]))
    assert bad == 2
    strings = FederationSchema.parse('features = 1\nclasses = ["cat", "dog"]\n[bounds]\nlo = 0\nhi = 1\n')
    y, bad = strings.class_indices(np.array(["dog", "cat", "cow"], dtype=object))
    assert y[:2].tolist() == [1, 0] and bad == 2


def _csv(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_owner_files_holding_different_label_subsets_get_the_same_class_indices(tmp_path):
    schema = FederationSchema.parse(TOML)
    only_3_7 = check_owner_rows(read_owner_rows(_csv(tmp_path, "a.csv", "a,b,y\n1,2,3\n2,3,7\n")), schema)
    all_three = check_owner_rows(read_owner_rows(_csv(tmp_path, "b.csv", "b,a,y\n2,1,-1\n\n3,2,7\n4,4,3\n")), schema)
    assert only_3_7.y.tolist() == [1, 2] and all_three.y.tolist() == [0, 2, 1]
    assert only_3_7.classes.tolist() == all_three.classes.tolist() == [-1, 3, 7]
    assert only_3_7.feature_names == ("a", "b") and all_three.feature_names == ("a", "b")  # from the schema
    assert np.array_equal(only_3_7.bounds.hi, schema.bounds.hi)


@pytest.mark.parametrize(
    "text, message",
    [
        (
            "a,b,y\n1,2,3\n\n2,3,5\n",
            "c.csv: line 4: label 5 is not a class of the federation schema (classes [-1, 3, 7])",
        ),
        (
            "a,b,c,y\n1,2,3,3\n1,2,3,7\n",
            "c.csv: line 1: cannot tell the label column: the columns besides the features are ['c', 'y'] (name it "
            'with label = "..." in the schema)',
        ),
        (
            "a,b,y\n1,2,3\n1,2\n",
            "c.csv: line 3: 2 columns, expected 3 (as on line 1)",
        ),
    ],
)
def test_an_unknown_label_or_a_wrong_feature_count_names_file_and_line(tmp_path, text, message):
    with pytest.raises(ConfigError) as info:
        check_owner_rows(read_owner_rows(_csv(tmp_path, "c.csv", text)), FederationSchema.parse(TOML))
    assert str(info.value) == message


def test_the_old_flags_are_a_shorthand_schema_with_classes_0_to_k_minus_1(tmp_path):
    rows = read_owner_rows(_csv(tmp_path, "d.csv", "-1,2,0\n3,4,2\n"))
    schema = shorthand_schema(rows, "-1:16", 3)
    assert schema.classes == (0, 1, 2) and schema.d == 2 and schema.bounds.lo.tolist() == [-1.0, -1.0]
    assert load_owner_file(str(tmp_path / "d.csv"), "-1:16", 3).y.tolist() == [0, 2]
    with pytest.raises(ConfigError, match="line 2: label 2 is not a class"):
        load_owner_file(str(tmp_path / "d.csv"), "-1:16", 2)
    with pytest.raises(ConfigError, match="public bounds are required"):
        shorthand_schema(rows, None, 2)
    with pytest.raises(ConfigError, match="--classes must be an int >= 2"):
        shorthand_schema(rows, "0:1", 1)


def test_an_owner_schema_must_agree_with_the_coordinators():
    remote = FederationSchema.parse(TOML)
    assert agreed_schema(None, remote, from_file=False) is remote
    assert agreed_schema(FederationSchema.parse(JSON), remote, from_file=True) == remote  # same digest
    other = FederationSchema.parse(TOML.replace("[-1, 3, 7]", "[3, 7]"))
    with pytest.raises(ConfigError, match=r"--schema \(sha256 \w{12}\) is not the coordinator's.*classes \[3, 7\]"):
        agreed_schema(other, remote, from_file=True)
    shorthand = FederationSchema.shorthand(Bounds.of(0.0, 16.0, 2), 2)
    with pytest.raises(ConfigError, match="--bounds/--classes do not match.*bounds differ, classes"):
        agreed_schema(shorthand, remote, from_file=False)
    same = FederationSchema.shorthand(Bounds(np.array([0.0, 0.0]), np.array([16.0, 8.5])), 2)
    two = FederationSchema.parse(TOML.replace("[-1, 3, 7]", "[0, 1]"))
    assert agreed_schema(same, two, from_file=False) is two  # names and test file are not compared
    with pytest.raises(ConfigError, match="no federation schema"):
        agreed_schema(None, None, from_file=False)


def test_string_class_values_match_the_label_text_of_an_owner_file(tmp_path):
    schema = FederationSchema.parse('features = ["w", "h"]\nclasses = ["cat", "dog"]\n[bounds]\nlo = 0\nhi = 9\n')
    pets = check_owner_rows(read_owner_rows(_csv(tmp_path, "p.csv", "w,h,kind\n1,2,dog\n\n3,4, cat\n")), schema)
    assert pets.y.tolist() == [1, 0] and pets.classes.tolist() == ["cat", "dog"]
    with pytest.raises(ConfigError) as info:
        check_owner_rows(read_owner_rows(_csv(tmp_path, "q.csv", "w,h,kind\n1,2,dog\n3,4,cow\n")), schema)
    assert (
        str(info.value) == "q.csv: line 3: label 'cow' is not a class of the federation schema (classes ['cat', 'dog'])"
    )


def test_integer_class_values_match_integral_label_texts_only(tmp_path):
    schema = FederationSchema.parse(TOML)
    rows = check_owner_rows(read_owner_rows(_csv(tmp_path, "n.csv", "a,b,y\n1,2,3.0\n1,2,-1\n1,2,7e0\n")), schema)
    assert rows.y.tolist() == [1, 0, 2]
    with pytest.raises(ConfigError, match="n.csv: line 3: label 2.5 is not a class"):
        check_owner_rows(read_owner_rows(_csv(tmp_path, "n.csv", "a,b,y\n1,2,3\n1,2,2.5\n")), schema)
