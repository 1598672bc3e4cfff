"""Hydra's file configs parsed once per validator process. verl's validators compose verl's own YAML (ppo_trainer,
sft_trainer_engine) once per written script, and Hydra reads and parses every file of the config tree again on each
compose (hydra/_internal/core_plugins/file_config_source.py FileConfigSource.load_config: OmegaConf.load of the
file, 27 files a ppo_trainer compose): half of a compose's time, and verl's validators took a minute of a worker in
`make test` (stop 71, cProfile of tests/planner/frameworks/test_rules_prune.py -k verl-families). Each file's result
is kept and a deep copy handed to Hydra, which then merges, interpolates and checks as before: the composition, the
overrides and every error are Hydra's own."""

import copy
import functools


def parse_each_file_once() -> None:
    from hydra._internal.core_plugins.file_config_source import FileConfigSource

    if getattr(FileConfigSource.load_config, "memplan_cached", False):
        return
    load = FileConfigSource.load_config
    seen: dict = {}

    @functools.wraps(load)
    def cached(self, config_path: str):
        key = (self.path, config_path)
        if key not in seen:
            seen[key] = load(self, config_path)  # a missing file raises, as before, and is not kept
        return copy.deepcopy(seen[key])

    cached.memplan_cached = True
    FileConfigSource.load_config = cached
