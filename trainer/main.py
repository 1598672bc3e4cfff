"""Entry point of one training process (what torchrun / deepspeed / srun start):
python -m trainer.main RUN_CONFIG.json"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from trainer.console import quiet_third_party
from trainer.loop import run
from trainer.runconfig import RunConfig


def main(argv: list[str]) -> int:
    from planner.errors import BadInput

    quiet_third_party()
    cfg = RunConfig(**json.loads(Path(argv[0]).read_text()))
    try:
        run(cfg)
    except BadInput as e:  # one line, from rank 0 only; every rank exits 2
        if os.environ.get("RANK", "0") == "0":
            print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    from recipe.dist import exit_rank

    exit_rank(main(sys.argv[1:]))
