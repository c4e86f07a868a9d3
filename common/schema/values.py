"""How a file's label and category texts are read as values (both the schema document and the
table loader use it)."""

from __future__ import annotations


def value_text(value: object) -> str:
    """A label or category as the text values are matched against: a number that is an integer
    as its integer ("3.0" -> "3", 3.0 -> "3"), anything else as its stripped text."""
    text = str(value).strip()
    try:
        number = float(text)
    except ValueError:
        return text
    return str(int(number)) if number.is_integer() and abs(number) <= 2.0**53 else text


def is_numeral(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
