"""JSON Schema -> GBNF, and schema-aware helpers for parsing tool arguments.

`schema_to_gbnf(schema)` gives a complete grammar whose `root` matches one JSON value valid
for the schema; `schema_rules(schema, prefix)` gives the same as named rules to embed in a
larger grammar (shared `json-...` rules have one body per name, so several schemas can
share a grammar). Unsupported keywords raise SchemaError naming the keyword and its JSON
pointer, or are dropped with a warning when `lenient=True`; `loosen_schema(schema)` drops
them (and bounds above a limit) ahead of conversion, returning what it dropped, for callers
that degrade rather than refuse (the server). `parameter_is_string(schema)`
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
from autoparser.schema.loosen import Loosened, loosen_schema

__all__ = [
    "COMPACT",
    "PRETTY",
    "Loosened",
    "SchemaError",
    "SchemaRules",
    "Whitespace",
    "loosen_schema",
    "parameter_is_string",
    "schema_rules",
    "schema_to_gbnf",
]
