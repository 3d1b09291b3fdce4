"""JSON schemas under a secret key: a tool's schema describes a password, it holds none.

A model is handed its tools' schemas (``{"properties": {"password": {"type": "string",
"description": "..."}}}``), and a secret key's value used to be redacted whole, schema or not:
the recording lost what the tool asks for. A value is read as a schema only when every key of
it, at every level, is a JSON Schema keyword and its type is one of JSON's, and it gives no
instance: a ``default``, ``examples``, ``const`` or ``enum`` (other than null or a boolean) may
be the secret itself (``password: str = "changeme"``). Anything else under a secret key
(``{"password": "hunter2"}``, ``{"password": {"current": ..., "new": ...}}``) is marked whole,
as a mapping and as JSON text alike (a replay hands back what text was recorded from).
"""

from __future__ import annotations

from typing import Any

_TYPES = frozenset({"string", "number", "integer", "boolean", "object", "array", "null"})
_TEXT = frozenset({"title", "description", "format", "pattern", "$comment", "$id", "$schema", "$ref", "$anchor", "contentMediaType", "contentEncoding"})
_NUMBERS = frozenset(
    {
        "minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minItems",
        "maxItems", "minProperties", "maxProperties", "minContains", "maxContains",
    }
)
_FLAGS = frozenset({"readOnly", "writeOnly", "deprecated", "uniqueItems", "nullable"})
_ONE = frozenset({"items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames", "unevaluatedProperties", "unevaluatedItems", "additionalItems"})
_LISTS = frozenset({"anyOf", "oneOf", "allOf", "prefixItems"})
_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})
# The keywords whose values are instances of the schema: a default password is a password.
VALUE_KEYWORDS = frozenset({"default", "examples", "example", "const", "enum"})
# What makes a mapping of keywords a schema rather than data that uses a keyword's name.
_SAYS_SCHEMA = frozenset({"type", "$ref", "anyOf", "oneOf", "allOf"})
MAX_DEPTH = 12  # schemas nested deeper are marked whole (and text is parsed at most this often over)
_MAX_NODES = 2_000


def is_schema(value: Any) -> bool:
    """Whether ``value`` is a JSON schema (keywords only, at every level; see the module)."""
    budget = [_MAX_NODES]
    return type(value) is dict and _schema(value, 0, budget)


def holds_values(value: Any) -> bool:
    """Whether the schema ``value`` gives an instance anywhere (a default, an example, an enum):
    one that is not null or a boolean may be the secret."""
    if type(value) is dict:
        for k, x in value.items():
            if k in VALUE_KEYWORDS and x is not None and type(x) is not bool:
                return True
            if k not in VALUE_KEYWORDS and holds_values(x):
                return True
    elif type(value) is list:
        return any(holds_values(x) for x in value)
    return False


def _schema(value: dict, depth: int, budget: list[int]) -> bool:
    budget[0] -= 1
    if depth > MAX_DEPTH or budget[0] < 0 or not value or _SAYS_SCHEMA.isdisjoint(value):
        return False
    for k, x in value.items():
        if k == "type":
            ok = x in _TYPES if type(x) is str else type(x) is list and bool(x) and all(type(t) is str and t in _TYPES for t in x)
        elif k in _TEXT:
            ok = type(x) is str
        elif k in _NUMBERS:
            ok = type(x) in (int, float)
        elif k in _FLAGS:
            ok = type(x) is bool
        elif k == "required":
            ok = type(x) is list and all(type(n) is str for n in x)
        elif k in VALUE_KEYWORDS:
            ok = True  # an instance: marked, not read
        elif k in _ONE:
            ok = type(x) is bool or (type(x) is dict and _schema(x, depth + 1, budget)) or (k == "items" and _schemas(x, depth, budget))
        elif k in _LISTS:
            ok = _schemas(x, depth, budget)
        elif k in _MAPS:
            ok = type(x) is dict and all(type(s) is bool or (type(s) is dict and _schema(s, depth + 1, budget)) for s in x.values())
        else:
            return False
        if not ok:
            return False
    return True


def _schemas(value: Any, depth: int, budget: list[int]) -> bool:
    return type(value) is list and bool(value) and all(type(s) is dict and _schema(s, depth + 1, budget) for s in value)
