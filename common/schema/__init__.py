"""The federation schema (public configuration): the document (:mod:`.document`: features, bounds,
categories, fill values, classes, header rule) and how a data file is read against it
(:mod:`.table`)."""

from privfed.common.schema.document import KEYS, ClassValue, FederationSchema
from privfed.common.schema.table import MISSING, LoadedRows, RawTable, load_rows
from privfed.common.schema.values import is_numeral, value_text

__all__ = [
    "KEYS",
    "MISSING",
    "ClassValue",
    "FederationSchema",
    "LoadedRows",
    "RawTable",
    "is_numeral",
    "load_rows",
    "value_text",
]
