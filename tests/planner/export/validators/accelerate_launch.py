"""An accelerate config file as `accelerate launch --config_file FILE script ARGS` reads it with the installed
accelerate, on a host without a GPU: the launcher's parser and `_validate_launch_command` (load_config_from_file
refuses an unknown key and a bad enum; an fsdp_config key the launcher has no flag for, which it drops without a word,
is refused here), the ranks' environment it prepares (utils/launch.py prepare_multi_gpu_env, the FSDP_* variables),
and the FullyShardedDataParallelPlugin each rank's Accelerator builds from them. Imported by the validators of the
frameworks whose FSDP plans are launched that way (llamafactory_old_validate.py, trl_validate.py)."""

import os
from unittest import mock


def launched(config: str, *argv: str):
    """(accelerate's version, the ranks' environment, their FSDP plugin) for `accelerate launch --config_file config
    argv...` run from the config's folder. The launcher's port probe is a fact of this host, not of the file: it is
    answered free."""
    import accelerate
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils import FullyShardedDataParallelPlugin
    from accelerate.utils import launch as launching

    args = launch_command_parser().parse_args(["--config_file", config, *argv])
    flags = set(vars(args))
    args, defaults, _ = _validate_launch_command(args)
    # the launcher copies each fsdp_config key onto its arguments (fsdp_ prefixed) whether or not it has that flag,
    #   and reads only its flags: a key it has no --fsdp_* flag for is dropped without a word (_validate_launch_command)
    keys = (k if k.startswith("fsdp") else "fsdp_" + k for k in defaults.fsdp_config)
    unread = sorted(set(keys) - flags)
    if unread:
        raise ValueError(f"accelerate {accelerate.__version__} launch has no flag for {unread}: never read")
    with mock.patch.object(launching, "is_port_in_use", lambda *a, **k: False):
        env = launching.prepare_multi_gpu_env(args)
    with mock.patch.dict(os.environ, env, clear=True):
        plugin = FullyShardedDataParallelPlugin()
    return accelerate.__version__, env, plugin
