"""JSON Schema -> GBNF, and schema-aware helpers for parsing tool arguments."""

from autoparser.errors import SchemaError
from autoparser.schema.convert import (
    COMPACT,
    PRETTY,
    SchemaRules,
    Whitespace,
    schema_rules,
    schema_to_gbnf,
)
from autoparser.schema.params import parameter_is_string

__all__ = [
    "COMPACT",
    "PRETTY",
    "SchemaError",
    "SchemaRules",
    "Whitespace",
    "parameter_is_string",
    "schema_rules",
    "schema_to_gbnf",
]
