"""``python -m cortex_kernel.manifest``: regenerate the shipped JSON Schema."""

from __future__ import annotations

from .schema import SCHEMA_PATH, schema_text

SCHEMA_PATH.write_text(schema_text(), encoding="utf-8")
print(f"wrote {SCHEMA_PATH}")
