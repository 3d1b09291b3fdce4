"""The triggers a SQLite store keeps ``run_facets`` with, as text.

Here, free of SQLAlchemy, so ``sqlite_shape`` can tell them from triggers a store
should not hold without importing the schema; ``schema`` creates them.
"""

from __future__ import annotations

# SQLite: steps.nodes "a,b" becomes the JSON array ["a","b"] for json_each; a
# name JSON cannot hold (a control character) is skipped, never a failed write.
_SQLITE_NODES_JSON = """'["' || replace(replace(replace(NEW.nodes, '\\', '\\\\'), '"', '\\"'), ',', '","') || '"]'"""

SQLITE_TRIGGERS = [
    """CREATE TRIGGER IF NOT EXISTS gt_runs_tags AFTER INSERT ON runs
    WHEN NEW.tags IS NOT NULL AND json_valid(NEW.tags) AND json_type(NEW.tags) = 'array'
    BEGIN
        INSERT OR IGNORE INTO run_facets (kind, value, run_id)
        SELECT 'tag', value, NEW.id FROM json_each(NEW.tags) WHERE type = 'text';
    END""",
    """CREATE TRIGGER IF NOT EXISTS gt_runs_tags_update AFTER UPDATE OF tags ON runs
    BEGIN
        DELETE FROM run_facets WHERE run_id = NEW.id AND kind = 'tag';
        INSERT OR IGNORE INTO run_facets (kind, value, run_id)
        SELECT 'tag', value, NEW.id FROM json_each(CASE WHEN json_valid(NEW.tags) AND json_type(NEW.tags) = 'array' THEN NEW.tags ELSE '[]' END)
        WHERE type = 'text';
    END""",
    """CREATE TRIGGER IF NOT EXISTS gt_runs_delete AFTER DELETE ON runs
    BEGIN
        DELETE FROM run_facets WHERE run_id = OLD.id;
    END""",
    f"""CREATE TRIGGER IF NOT EXISTS gt_steps_nodes AFTER INSERT ON steps
    WHEN NEW.nodes <> '' AND json_valid({_SQLITE_NODES_JSON})
    BEGIN
        INSERT OR IGNORE INTO run_facets (kind, value, run_id)
        SELECT 'node', value, NEW.run_id FROM json_each({_SQLITE_NODES_JSON}) WHERE value <> '';
    END""",
    """CREATE TRIGGER IF NOT EXISTS gt_calls_tools AFTER INSERT ON calls
    WHEN NEW.kind = 'tool'
    BEGIN
        INSERT OR IGNORE INTO run_facets (kind, value, run_id) VALUES ('tool', NEW.name, NEW.run_id);
    END""",
]


def stored_form(sql: str) -> str:
    """A trigger's text as SQLite keeps it in ``sqlite_master`` (no IF NOT EXISTS), spaces collapsed."""
    return " ".join(sql.replace("IF NOT EXISTS ", "", 1).split())


KNOWN = frozenset(stored_form(sql) for sql in SQLITE_TRIGGERS)
