"""Writing a benchmark's results: the JSON file and its markdown table beside it (same name, .md)."""
from __future__ import annotations

import json
import os


def save(out: str, data: dict, md_lines: list[str]) -> None:
    with open(out, "w") as f:
        json.dump(data, f, indent=1)
        f.write("\n")
    with open(os.path.splitext(out)[0] + ".md", "w") as f:
        f.write("\n".join(md_lines) + "\n")
