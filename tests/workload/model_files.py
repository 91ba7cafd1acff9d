"""Model configs as a user writes them, for the tests that load local config.json files."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path


def catalog_json(name: str) -> dict[str, object]:
    """A shipped model's config.json, as published."""
    text = resources.files("dse.workload").joinpath(f"data/models/{name}.json").read_text()
    return json.loads(text)


def write_config(directory: Path, raw: dict[str, object]) -> Path:
    """`raw` written as `directory`/config.json."""
    path = directory / "config.json"
    path.write_text(json.dumps(raw))
    return path
