"""OpenRLHF's flags as its readers take them (reader.py: train_ppo_ray and train_dpo; reader_sft.py: train_sft): the
flat names of 0.10.1 and before read as their dotted 0.11.2 names and said once, a flag's value or its 0.11.2 default,
a switch's state, the precision, the DeepSpeed bucket sizes its own config leaves to DeepSpeed (zero_buckets),
the release line the flat flags name (release_hint), and DeepSpeed AutoTP and ring attention above 1 refused
(refuse_parallel_groups)."""

from __future__ import annotations

from planner.errors import BadInput
from planner.frameworks.openrlhf import lmmr1, lmmr1_dev, mmeureka, openrlhfm
from planner.frameworks.openrlhf import mmeureka_internvl as internvl
from planner.frameworks.openrlhf.keys import ALIASES, KEYS, SHARED, bucket_text
from planner.intake import line_defaults
from planner.intake.collect import Collector, as_bool, as_int, default, one
from planner.intake.flags import Flag

ORL = "openrlhf 0.11.2"
ESTIMATORS = {
    "gae": "ppo",
    "group_norm": "grpo",
    "dr_grpo": "grpo",
    "rloo": "rloo",
    "reinforce": "reinforce++",
    "reinforce_baseline": "reinforce++",
    "flash_reinforce": "reinforce++",
}
# flat names of <= 0.10.1 -> the dotted name (the 0.10.2 rename): the key table's flat lines and older aliases
OLD = KEYS.renamed("0.10") | KEYS.renamed("0.9") | KEYS.renamed("0.8") | ALIASES


def dotted(c: Collector, flags: dict[str, Flag], names: dict[str, str] = OLD) -> dict[str, Flag]:
    """The flags by their 0.11.2 names (`names`: a flat name -> its dotted name in this entry point); old flat names
    are read and said once (0.11.2 refuses them)."""
    out, old = {}, []
    for key, f in flags.items():
        if key in names:
            new = SHARED.get(key, (names[key],))
            old.append(f"--{key} ({', '.join('--' + n for n in new)})")
            for name in new:
                out.setdefault(name, f)
        else:
            out[key] = f
    if old:
        where = next(f.source for k, f in flags.items() if k in names).split(" ")[0]
        c.note(
            f"{where} {len(old)} flat flag names of OpenRLHF 0.10.1 and before, read as their dotted names (0.11.2's "
            f"parser refuses the flat ones): {', '.join(old)}"
        )
    return out


def get(f: dict[str, Flag], key: str) -> tuple[object, str]:
    if key in f:
        return one(f[key].value), f[key].source
    row = KEYS.named(key)  # the flag's 0.11.2 default (planner.frameworks.openrlhf.keys)
    return row.default, default(ORL, row.cite, f"--{key} {row.default}")


def attention(c: Collector, f: dict[str, Flag], cite: str) -> None:
    """--ds.attn_implementation, read from the flat --attn_implementation (0.8.10 .. 0.10.1) or the --flash_attn switch
    of 0.8.9 and before (planner.frameworks.openrlhf.keys); unset, the default of the release line the reading
    targets where it moved (0.8.9's eager: line_defaults.moved_default), else 0.11.2's flash_attention_2 (`cite`)."""
    key = KEYS.key("attention")
    moved = line_defaults.moved_default(c, "openrlhf", "attention") if key not in f else None
    if key not in f and moved is None:
        c.set("attention", "flash", default(ORL, cite, "flash_attention_2"), KEYS.flag("attention"))
        return
    value, source = (one(f[key].value), f[key].source) if key in f else moved
    name = "flash" if value is True or "flash" in str(value) else str(value)
    c.set("attention", name, source, KEYS.flag("attention"))


def on(f: dict[str, Flag], key: str) -> bool:
    return key in f and bool(as_bool(one(f[key].value)) if f[key].value is not True else True)


def precision(c: Collector, f: dict[str, Flag], cite: str) -> None:
    """--ds.param_dtype bf16|fp16 (0.11.2's default bf16), or the flat --bf16 of 0.10 and before; unset, the release
    line's where it moved (0.8.9's --bf16 off: fp32, line_defaults.moved_default)."""
    key = KEYS.key("precision")
    moved = line_defaults.moved_default(c, "openrlhf", "precision") if key not in f else None
    dtype, source = (str(one(f[key].value)), f[key].source) if key in f else moved or ("bf16", None)
    c.set(
        "precision",
        dtype if dtype in ("bf16", "fp16", "fp32") else "bf16",
        source or default(ORL, cite, "--ds.param_dtype bf16"),
        KEYS.flag("precision"),
    )


# OpenRLHF's own parallel groups beside data parallel (utils/deepspeed/deepspeed.py builds the (dp, sp, tp) mesh,
# v0.7.4 :101-103; the accumulation counts both, :107-112): the flag's flat and dotted names (the 0.10.2 rename),
# the memplan field a size of 1 sets, and what memplan does not plan of it. --ds_tensor_parallel_size from v0.7.4
# (cli/train_ppo_ray.py:272, train_sft.py:186, train_dpo.py:205; v0.11.0 --ds.tensor_parallel_size :353), LMM-R1
# dev's copy of v0.7.4.post2 too (lmmr1_dev.SIGN); --ring_attn_size from v0.5.7 (train_dpo.py:204; v0.7.4
# train_ppo_ray.py:355, train_sft.py:200; v0.11.0 --ds.ring_attn_size train_ppo_ray.py:506)
GROUPS = {
    ("ds_tensor_parallel_size", "ds.tensor_parallel_size"): (
        "tensor_parallel",
        "DeepSpeed AutoTP",
        (
            "v0.7.4 utils/deepspeed/deepspeed.py:228-231 deepspeed.tp_model_init splits each linear layer across the "
            "TP ranks, :101-103 ZeRO shards within the dp ranks left, :107-112 the accumulation counts TP ranks"
        ),
    ),
    ("ring_attn_size", "ds.ring_attn_size"): (
        "context_parallel",
        "ring attention",
        (
            "v0.7.4 utils/deepspeed/deepspeed.py:115-128 ring_flash_attn's substitute_hf_flash_attn: each rank a "
            "slice of the rows, keys and values all-gathered over the group a head stride at a time"
        ),
    ),
}


def refuse_parallel_groups(c: Collector, flags: dict[str, Flag]) -> None:
    """OpenRLHF's DeepSpeed AutoTP and ring attention groups: a size of 1 read as its field (tensor_parallel,
    context_parallel), above 1 refused in one line naming the value and the 1 accepted: memplan plans each OpenRLHF
    role's ranks as data parallel, and its tensor parallel (transformers' tp plan) and context parallel (ring
    attention's blocks in flight) are not checked against these (GROUPS). Every line that takes the flags, the
    forks' included (planner.frameworks.openrlhf.reader)."""
    for keys, (field, name, cite) in GROUPS.items():
        for key in keys:
            f = flags.get(key)
            size = as_int(one(f.value)) if f is not None else None
            if size is not None and size > 1:
                raise BadInput(
                    f"{f.source}: memplan plans no {name} for OpenRLHF ({cite}); 1 is accepted: give --{key} 1", field
                )
            if size == 1:
                c.number(field, 1, f"{f.source} ({name} off)", f"--{key}")


# --ds.lora.target_modules (0.11.2 cli/train_sft.py:260), --target_modules before 0.10.2 (v0.10.1 :230, v0.8.9 :215):
# argparse nargs="*" with the string default "all-linear", handed to LoraConfig as given (models/actor.py:180-187)
TARGETS = ("ds.lora.target_modules", "target_modules")
RANKS = ("ds.lora.rank", "lora_rank")


def lora_targets(c: Collector, flags: dict[str, Flag]) -> None:
    """The modules OpenRLHF's LoRA adapts (TARGETS), read as --lora-targets where --lora_rank is above 0. `all-linear`
    typed out arrives as the list ['all-linear'], which PEFT does not expand (the shorthand is a string:
    peft/tuners/tuners_utils.py _maybe_include_all_linear_layers): get_peft_model raises NoMatchingPeftModuleError
    (measured in OpenRLHF 0.11.2's venv, PEFT 0.21.2), refused in one line; without LoRA a note."""
    for key in TARGETS:
        f = flags.get(key)
        if f is None:
            continue
        words = [str(w) for w in (f.value if isinstance(f.value, list) else [f.value])]
        rank = next((as_int(one(flags[r].value)) for r in RANKS if r in flags), 0) or 0
        if rank <= 0:
            c.note(f"{f.source} (no LoRA: --{RANKS[0] if key == TARGETS[0] else RANKS[1]} is 0 or unset)")
        elif any(w.lower() == "all-linear" for w in words):
            raise BadInput(
                f"{f.source}: OpenRLHF hands --{key} to PEFT as a list (argparse nargs='*', cli/train_sft.py:260), "
                "and PEFT expands all-linear only as a string: get_peft_model raises NoMatchingPeftModuleError; "
                f"leave --{key} out (its default is all-linear) or name the modules",
                "lora_targets",
            )
        else:
            c.set("lora_targets", ",".join(words), f.source, f"--{key}")


def release_hint(flags: dict[str, Flag], module: str | None = None) -> tuple[str, str, tuple[str, ...]] | None:
    """(the release line, why, the lines the flags allow) a flat flag names (OLD: 0.10.1 and before), else None
    (planner.intake.releases): --flash_attn only 0.8.9 and before took (v0.8.9 cli/train_ppo_ray.py:282), the flat
    --attn_implementation only 0.8.10 .. 0.10.1 (v0.8.10 :283); --param_dtype 0.9.10 on, --bf16 before it. --bf16 with
    neither attention flag is 0.5's, 0.8's or 0.9's (flash by default from 0.8.10): each allowed, 0.9 assumed; the 0.5
    line (0.5.0 .. 0.5.3) takes 0.8's flags, so a flat flag of 0.8 allows both. A fork's own
    flag names its release: MM-Eureka's copy of 0.6.1 (mmeureka.SIGNS), LMM-R1's of 0.7.3 (lmmr1.SIGNS, or `module`:
    the launch script starting one of its reward servers, lmmr1.module_sign), its dev's with --ds_tensor_parallel_size,
    OpenRLHF-M's (_fork); --freeze_prefix alone, which the forks take and no OpenRLHF release, allows LMM-R1 and
    MM-Eureka (LMM-R1 assumed: its images are the larger)."""
    fork = _fork(flags, module)
    if fork is not None:
        return fork
    flat = next((f for k, f in flags.items() if k in OLD), None)
    if flat is None:
        return None
    why = f"{flat.source} (a flat flag of OpenRLHF 0.10.1 and before)"
    if KEYS.key("attention", "0.8") in flags:
        return (
            "0.8",
            f"{flags[KEYS.key('attention', '0.8')].source} (taken by OpenRLHF 0.8.9 and before only)",
            ("0.5", "0.8"),
        )
    if KEYS.key("precision", "0.9") not in flags:
        return "0.10", why, ("0.10",)
    return "0.9", why, ("0.9",) if KEYS.key("attention", "0.9") in flags else ("0.5", "0.8", "0.9")


def _fork(flags: dict[str, Flag], module: str | None) -> tuple[str, str, tuple[str, ...]] | None:
    """(release, why, the lines allowed) of a multimodal fork's own flags and files: MM-Eureka's (qwen or internvl
    branch), LMM-R1's (main, or dev where --ds_tensor_parallel_size is beside its sign) or OpenRLHF-M's (a flag it
    shares with MM-Eureka's qwen branch alone, beside the math_verifier server MM-Eureka does not ship)."""
    dev = "ds_tensor_parallel_size" in flags
    shared = next((k for k in flags if k in openrlhfm.SIGNS), None)
    own = any(k in flags for k in (*mmeureka.FILTER, *set(mmeureka.SIGNS) - set(openrlhfm.SIGNS)))
    if shared is not None and not own and module is not None and openrlhfm.SERVER in module:
        why = f"{flags[shared].source} ({openrlhfm.CLI}:{openrlhfm.SIGNS[shared]}) with {module} (MM-Eureka has none)"
        return "openrlhf-m", f"{why}: OpenRLHF-M's alone", ("openrlhf-m",)
    for signs, release, who, cli in (
        (mmeureka.SIGNS, "mm-eureka", "MM-Eureka's", mmeureka.CLI),
        (internvl.SIGNS, "mm-eureka-internvl", "MM-Eureka internvl's", internvl.CLI),
        (lmmr1.SIGNS, "lmm-r1", "LMM-R1's", lmmr1.CLI),
    ):
        sign = next((k for k in flags if k in signs), None)
        if sign is not None:
            return _named(release, f"{flags[sign].source} ({who} own flag, {cli}:{signs[sign]}", flags, dev, sign)
    url = flags.get("remote_rm_url")
    if url is not None and internvl.REWARD in str(url.value):
        return (
            "mm-eureka-internvl",
            f"{url.source} (a file of MM-Eureka's internvl branch alone)",
            ("mm-eureka-internvl",),
        )
    if module is not None:
        also = "; OpenRLHF-M ships it too: --framework openrlhf@openrlhf-m" if openrlhfm.SERVER in module else ""
        why = f"{module} (a module of LMM-R1's, {lmmr1.MODULE.replace('.', '/')}{also}"
        return _named("lmm-r1", why, flags, dev)
    sign = next((k for k in flags if k in mmeureka.FILTER), None)
    if sign is not None:  # both MM-Eureka branches; --freeze_prefix, the qwen branch's alone of the two, or assumed
        told = "; its internvl branch takes it too (:418-421), not --freeze_prefix: --framework openrlhf@mm-eureka-internvl"
        why = f"{flags[sign].source} (MM-Eureka's own flag, {mmeureka.CLI}:{mmeureka.FILTER[sign]}{told})"
        return "mm-eureka", why, ("mm-eureka",)
    sign = next((k for k in flags if k in lmmr1.SHARED), None)
    if sign is not None and dev:
        return _named("lmm-r1", f"{flags[sign].source} (LMM-R1's flag, {lmmr1.CLI}:{lmmr1.SHARED[sign]}", flags, dev)
    if sign is not None:  # LMM-R1 dev plans as its main, OpenRLHF-M as MM-Eureka (their pixels): the two planned
        why = (
            f"{flags[sign].source} (taken by LMM-R1, {lmmr1.CLI}:{lmmr1.SHARED[sign]}, and MM-Eureka, no OpenRLHF; "
            "LMM-R1 dev and OpenRLHF-M too, planned as those two)"
        )
        return "lmm-r1", why, ("lmm-r1", "mm-eureka")
    return None


def _named(release: str, why: str, flags: dict[str, Flag], dev: bool, sign: str = "") -> tuple[str, str, tuple]:
    """(release, why, (release,)) for a fork's sign (`why` open at its last parenthesis): LMM-R1's main turned dev
    where --ds_tensor_parallel_size (`dev`) is given, and the other line that takes the sign said."""
    if release == "lmm-r1" and dev:
        f = flags["ds_tensor_parallel_size"]
        cite = f"{lmmr1_dev.CLI}:{lmmr1_dev.SIGN['ds_tensor_parallel_size']}"
        return "lmm-r1-dev", f"{why}; {f.source}, LMM-R1 dev's, not its main's: {cite})", ("lmm-r1-dev",)
    told = {"lmm-r1": "; its dev branch takes it too: --framework openrlhf@lmm-r1-dev"}.get(release, "")
    if release == "mm-eureka" and sign in openrlhfm.SIGNS:
        told = f"; OpenRLHF-M takes it too ({openrlhfm.CLI}:{openrlhfm.SIGNS[sign]}): --framework openrlhf@openrlhf-m"
    return release, f"{why}{told})", (release,)


def zero_buckets(c: Collector, f: dict[str, Flag], stage: int) -> None:
    """OpenRLHF builds its DeepSpeed config itself with reduce_bucket_size, stage3_prefetch_bucket_size and
    stage3_param_persistence_threshold "auto" (0.11.0 utils/deepspeed/deepspeed_utils.py:29-34; v0.5.0 and v0.3.8
    utils/deepspeed_utils.py:31-36) and no HF Trainer fills them: DeepSpeed drops an "auto" value
    (runtime/config_utils.py:56) and takes its own defaults (keys.bucket_text), not HF's sizes from the hidden size. overlap_comm
    is set only by --ds.overlap_comm (--overlap_comm 0.8.10 .. 0.10.1), else DeepSpeed's default, on at stage 3 only
    (runtime/zero/config.py overlap_comm_valid)."""
    if stage not in (1, 2, 3):
        return
    flag = f.get("ds.overlap_comm") or f.get("overlap_comm")
    why = "DeepSpeed's own defaults for its config's \"auto\" sizes (utils/deepspeed/deepspeed_utils.py:29-34)"
    source = default(ORL, "deepspeed runtime/zero/config.py", why) + (f"; {flag.source}" if flag else "")
    c.set("zero_buckets", bucket_text(stage, on(f, flag.key) if flag else False), source, "--ds.zero_stage")


def gpus(body: dict) -> int:
    """The GPUs a request's launch spans (gpus_per_node x nodes, each 1 unless given)."""
    return (as_int(body.get("gpus_per_node")) or 1) * (as_int(body.get("nodes")) or 1)


def split_batch(c: Collector, m: int, g: int, src: str, key: str) -> bool:
    """The global batch `g` split over micro-batches of `m` on the launch's GPUs (batch / micro / world:
    utils/deepspeed/deepspeed.py:110; v0.5.7 :86), derived again where the GPUs are given as a flag (deepspeed over
    every visible GPU: OpenRLHF#384's 128 on 8 GPUs is 16 micro-steps, not 128); a batch that does not split is a line,
    as DeepSpeed refuses it at start. Whether it split."""
    world = gpus({"gpus_per_node": c.get("gpus_per_node"), "nodes": c.get("nodes")})
    if g % (m * world):
        c.note(f"{src} is not micro {m} x {world} GPUs x an accumulation: DeepSpeed refuses it at start")
        return False
    c.number("grad_accum", g // (m * world), f"{src} / (micro {m} x {world} GPUs)", key)
    c.derived["grad_accum"] = (("gpus_per_node", "nodes"), lambda b: max(1, g // (m * gpus(b))))
    return True
