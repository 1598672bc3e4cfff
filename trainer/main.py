"""Entry point of one training process (what torchrun / deepspeed / srun start):
    python -m trainer.main RUN_CONFIG.json"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from trainer.console import quiet_third_party
from trainer.loop import RunConfig, run


def main(argv: list[str]) -> int:
    quiet_third_party()
    cfg = RunConfig(**json.loads(Path(argv[0]).read_text()))
    run(cfg)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
