"""JSON Schema -> GBNF, and schema-aware helpers for parsing tool arguments.

`schema_to_gbnf(schema)` gives a complete grammar whose `root` matches one JSON value valid
for the schema; `schema_rules(schema, prefix)` gives the same as named rules to embed in a
larger grammar (shared `json-...` rules have one body per name, so several schemas can
share a grammar). Unsupported keywords raise SchemaError naming the keyword and its JSON
pointer, or are dropped with a warning when `lenient=True`. `parameter_is_string(schema)`
says whether a tagged argument format writes the parameter as raw text.
"""

from autoparser.errors import SchemaError
from autoparser.schema.argument_types import parameter_is_string
from autoparser.schema.convert import (
    COMPACT,
    PRETTY,
    SchemaRules,
    Whitespace,
    schema_rules,
    schema_to_gbnf,
)

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
