"""The JSON Schema of a manifest file, shipped as ``cortex_kernel/manifest.schema.json``.

Editors validate and complete manifests with it; ``python -m
cortex_kernel.manifest`` regenerates it (a test checks it is current).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .agents import AgentManifest, ManifestFile

__all__ = ["SCHEMA_PATH", "json_schema", "schema_text"]

#: The generated JSON Schema shipped with the package.
SCHEMA_PATH = Path(__file__).resolve().parent.parent / "manifest.schema.json"


def json_schema() -> dict[str, Any]:
    """The JSON Schema of a manifest file (one agent, or ``agents: [...]``)."""
    single = AgentManifest.model_json_schema()
    several = ManifestFile.model_json_schema()
    definitions = {**single.pop("$defs", {}), **several.pop("$defs", {})}
    definitions["AgentManifest"] = single
    definitions["ManifestFile"] = several
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://github.com/cortex-kernel/cortex-kernel/manifest.schema.json",
        "title": "cortex-kernel agent manifest",
        "anyOf": [{"$ref": "#/$defs/AgentManifest"}, {"$ref": "#/$defs/ManifestFile"}],
        "$defs": definitions,
    }


def schema_text() -> str:
    """The shipped schema's text (stable key order, trailing newline)."""
    return json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"
