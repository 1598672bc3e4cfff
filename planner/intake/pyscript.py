"""A Python training script read from its syntax tree, never run or imported: the literal keyword arguments of its
TrainingArguments / SFTConfig / DPOConfig / GRPOConfig, LoraConfig and BitsAndBytesConfig calls, the model its
`*.from_pretrained("...")` loads (with torch_dtype and attn_implementation), names bound to literals earlier in the
file, and `torch.bfloat16`-style dtypes. They become transformers / TRL argument names for the script-flags reader
(Framework.script_flags); a library's own calls over them (unsloth's) go to the module a framework declares for them
(Framework.calls).
"""

from __future__ import annotations

import ast
import operator
from pathlib import Path

from planner.errors import BadInput
from planner.frameworks import ARGS, PLAIN, by_trainer, calls_reader, reader, unread
from planner.intake import limits, releases, tasks, tuners
from planner.intake.collect import UNKNOWN, Collector, show
from planner.intake.flags import Flag

CONFIGS = {
    "TrainingArguments": PLAIN,
    "Seq2SeqTrainingArguments": PLAIN,
    "SFTConfig": "sft",
    "DPOConfig": "dpo",
    "KTOConfig": "kto",
    "GRPOConfig": "grpo",
}
OTHER_CONFIGS = {"ORPOConfig", "CPOConfig", "PPOConfig", "RLOOConfig", "OnlineDPOConfig"}
TRAINERS = {"SFTTrainer", "DPOTrainer", "GRPOTrainer", "KTOTrainer", "Trainer"}
# SFTConfig's fields given to SFTTrainer itself (TRL's older signature, as unsloth's notebooks still write it): unsloth's
# patched trainer sets them on the config, over the config's own (unsloth/trainer.py:714-780 _backwards_compatible_
# trainer); plain TRL's SFTTrainer refuses them, so they are read under unsloth only
SFT_TRAINER_KEYS = {"max_seq_length", "max_length", "packing"}
LORA = {
    "r": "lora_r",
    "target_modules": "lora_target_modules",
    "lora_dropout": "lora_dropout",
    "use_dora": "use_dora",
    "modules_to_save": "lora_modules_to_save",
}
# PEFT's OFTConfig (peft v0.20.0 tuners/oft/config.py:87-100): read beside LoRA's flags (loraargs.read_oft)
OFT = {
    "r": "oft_r",
    "oft_block_size": "oft_block_size",
    "module_dropout": "oft_module_dropout",
    "target_modules": "lora_target_modules",
    "modules_to_save": "lora_modules_to_save",
}
# PEFT's BOFTConfig (peft v0.20.0 tuners/boft/config.py:72-117): read beside LoRA's flags (loraargs.read_boft)
BOFT = {
    "boft_block_size": "boft_block_size",
    "boft_block_num": "boft_block_num",
    "boft_n_butterfly_factor": "boft_n_butterfly_factor",
    "boft_dropout": "boft_dropout",
    "target_modules": "lora_target_modules",
    "modules_to_save": "lora_modules_to_save",
}
BNB = {"load_in_4bit", "load_in_8bit", "bnb_4bit_quant_type", "use_bnb_nested_quant"}
MODEL_KWARGS = {"torch_dtype": "torch_dtype", "dtype": "dtype", "attn_implementation": "attn_implementation"}
# whole-number arithmetic on names bound to literals (unsloth's GRPO notebooks: max_completion_length = max_seq_length
# - max_prompt_length), each operand at most LIMIT so a product stays small
ARITHMETIC = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv}
LIMIT = 1 << 40
NOT_MODELS = ("Tokenizer", "Processor", "FeatureExtractor", "Config", "PeftModel", "GenerationConfig")


def read(path: Path, text: str) -> Collector:
    try:
        tree = limits.parse_python(text, path)
    except limits.OverLimit:
        raise
    except (SyntaxError, ValueError) as e:
        raise BadInput(
            f"--config {path}: not Python that parses ({e.__class__.__name__} at line {getattr(e, 'lineno', '?')})",
            "config",
        ) from None
    _refuse_unread(tree, path)
    hfargs, unsloth = reader(ARGS), calls_reader()  # the script-flags reader; a library's calls over it
    names = _literals(tree)
    flags: dict[str, Flag] = {}
    trainer, why = PLAIN, ""
    notes = []
    seen, moved = unsloth.Seen(), {}
    dead = _dead(tree)
    for call in sorted((n for n in ast.walk(tree) if isinstance(n, ast.Call)), key=lambda n: (n.lineno, n.col_offset)):
        name = _name(call.func)
        if id(call) in dead:
            continue
        if unsloth.is_unsloth(_name(getattr(call.func, "value", call.func)), name):
            owner = _name(call.func.value)
            kw = _kwargs(call, names, path, f"{owner}.{name}")
            if name == "from_pretrained" and call.args and "model_name" not in kw:
                kw["model_name"] = _model(call, names, path)["model_name_or_path"]
            unsloth.take(seen, owner, name, kw, f"{path.name}:{call.lineno}")
        elif name in CONFIGS:
            if CONFIGS[name] != PLAIN or trainer == PLAIN:
                trainer, why = CONFIGS[name], f"{path.name}:{call.lineno} {name}(...)"
            flags |= _kwargs(call, names, path, name)
        elif name == "RewardConfig":  # TRL's RewardTrainer: a seq-cls score head (planner.intake.tasks)
            trainer, why = "reward", f"{path.name}:{call.lineno} {name}(...)"
            flags |= _kwargs(call, names, path, name)
        elif name in OTHER_CONFIGS:
            notes.append(f"{path.name}:{call.lineno} {name}(...) (this trainer is not planned yet; planned as SFT)")
            flags |= _kwargs(call, names, path, name)
        elif name == "LoraConfig":
            lora = _kwargs(call, names, path, name, rename=LORA)
            flags |= {k: v for k, v in lora.items() if k in LORA.values()}
            flags["use_peft"] = Flag("use_peft", True, f"{path.name}:{call.lineno} LoraConfig(...)", "LoraConfig")
        elif name in ("OFTConfig", "BOFTConfig"):
            where, keys = f"{path.name}:{call.lineno} {name}(...)", BOFT if name == "BOFTConfig" else OFT
            flags |= {k: v for k, v in _kwargs(call, names, path, name, rename=keys).items() if k in keys.values()}
            flags["use_peft"] = Flag("use_peft", True, where, name)
            flags["peft_boft" if name == "BOFTConfig" else "peft_oft"] = Flag("peft_oft", True, where, name)
        elif name in ("AdaLoraConfig", "VeraConfig"):  # HF's Trainer calls no update_and_allocate; TRL writes neither
            tuners.tuner(f"{path.name}:{call.lineno} {name}(...)", name.removesuffix("Config").lower())
        elif name == "BitsAndBytesConfig":
            bnb = _kwargs(call, names, path, name, rename={"bnb_4bit_use_double_quant": "use_bnb_nested_quant"})
            flags |= {k: v for k, v in bnb.items() if k in BNB}
        elif name == "from_pretrained" and _is_model(call.func):
            flags |= _model(call, names, path)
        elif name in TRAINERS:
            own = _kwargs(call, names, path, name)
            if "model" not in flags and "model_name_or_path" not in flags and isinstance(own.get("model"), Flag):
                flags |= {"model": own["model"]} if isinstance(own["model"].value, str) else {}
            if name == "SFTTrainer" and seen.where:
                moved |= {k: v for k, v in own.items() if k in SFT_TRAINER_KEYS}
        elif name in ("HfArgumentParser", "TrlParser"):
            notes.append(
                f"{path.name}:{call.lineno} {name}(...) (its arguments come from the command line: read the "
                "launch script that runs it)"
            )
    if seen.where:  # unsloth runs TRL's trainers (its scripts use SFTTrainer; a bare Trainer is read as SFT's)
        trainer, why = (trainer if trainer != PLAIN else "sft"), why or seen.where
        flags = unsloth.flags(seen) | {
            k: v for k, v in flags.items() if k != "model" or "model_name_or_path" not in seen.flags
        }
        flags |= moved
    c = Collector(by_trainer(trainer))
    c.fact("framework", c.framework, why or f"{path.name}: a transformers Trainer script", "script")
    c.add_file(path.resolve())
    if seen.where:
        unsloth.release(c, seen)
    else:
        releases.for_script(c, path, trainer, flags)
    hfargs.read(c, flags, path, trainer, why=why)
    if seen.where:
        unsloth.read(c, seen)
    if trainer == "reward":
        tasks.read_reward(c, why)
    for line in notes:
        c.note(line)
    return c


def _refuse_unread(tree: ast.AST, path: Path) -> None:
    """A script built on a framework memplan does not read (planner.frameworks.unread: `from megatron.training import
    pretrain`, `from nemo.collections import llm`), refused in one line naming it and its import."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        u = unread.by_imports(names)
        if u is not None:
            raise BadInput(
                f"--config {path}: line {node.lineno} imports {next(n for n in names if u.by_import(n))}: {u.name}, "
                f"{u.what}, which memplan does not read (accepted: a script of transformers' or TRL's trainers)",
                "config",
            )


def _dead(tree: ast.AST) -> set[int]:
    """The calls under an `if False:` / `if 0:` (notebooks keep their saving and reloading cells so): never run."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Constant) and not node.test.value:
            out |= {id(n) for part in node.body for n in ast.walk(part) if isinstance(n, ast.Call)}
    return out


def _name(func: ast.AST) -> str:
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def _is_model(func: ast.AST) -> bool:
    """`X.from_pretrained` where X is a model class (not a tokenizer, processor or config)."""
    owner = func.value if isinstance(func, ast.Attribute) else None
    text = _name(owner) if owner is not None else ""
    return bool(text) and not any(t in text for t in NOT_MODELS)


def _literals(tree: ast.AST) -> dict[str, object]:
    """Names bound to a literal (the last binding in the file wins)."""
    out = {}
    for node in sorted((n for n in ast.walk(tree) if isinstance(n, ast.Assign)), key=lambda n: n.lineno):
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = _value(node.value, out)
            if value is not UNKNOWN:
                out[node.targets[0].id] = value
    return out


def _value(node: ast.AST, names: dict[str, object]) -> object:
    """A literal's value, a bound name's, `torch.bfloat16` as "bfloat16"; UNKNOWN for anything computed."""
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        pass
    if isinstance(node, ast.Name):
        return names.get(node.id, UNKNOWN)
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "torch":
        return node.attr
    if isinstance(node, ast.BinOp) and type(node.op) in ARITHMETIC:  # `max_seq_length - max_prompt_length`
        left, right = _value(node.left, names), _value(node.right, names)
        if all(type(v) is int and abs(v) <= LIMIT for v in (left, right)) and (
            right or type(node.op) is not ast.FloorDiv
        ):
            return ARITHMETIC[type(node.op)](left, right)
        return UNKNOWN
    if isinstance(node, (ast.List, ast.Tuple)):
        items = [_value(e, names) for e in node.elts]
        return UNKNOWN if any(i is UNKNOWN for i in items) else items
    return UNKNOWN


def _kwargs(call: ast.Call, names: dict, path: Path, func: str, rename: dict | None = None) -> dict[str, Flag]:
    out = {}
    for kw in call.keywords:
        if kw.arg is None:
            continue
        value = _value(kw.value, names)
        key = (rename or {}).get(kw.arg, kw.arg)
        shown = show(value) if value is not UNKNOWN else ast.unparse(kw.value)
        out[key] = Flag(key, value, f"{path.name}:{kw.value.lineno} {func}({kw.arg}={shown})", kw.arg)
    return out


def _model(call: ast.Call, names: dict, path: Path) -> dict[str, Flag]:
    out = {}
    if call.args:
        value = _value(call.args[0], names)
        shown = show(value) if value is not UNKNOWN else ast.unparse(call.args[0])
        out["model_name_or_path"] = Flag(
            "model_name_or_path",
            value,
            f"{path.name}:{call.lineno} {ast.unparse(call.func)}({shown!r})",
            "from_pretrained",
        )
    for k, v in _kwargs(call, names, path, ast.unparse(call.func)).items():
        if k in MODEL_KWARGS:
            out[MODEL_KWARGS[k]] = v
    return out
