"""ms-swift's images (planner/frameworks/swift/reader.py hands each run's flags and environment here): the ViT's and
aligner's freeze switches and what all-linear LoRA reaches in the ViT, one image a row at MAX_PIXELS, --max_pixels
or the cap qwen_vl_utils leaves (reader_pixels), and what each release's --max_length counts of it (planner.frameworks.swift.RELEASES); a
video's frames: reader_video.py. Cited in the 4.6.0 wheel (swift/...) and at the older tags named."""

from __future__ import annotations

import math

from planner.frameworks import mmlimit
from planner.frameworks.swift import reader_pixels as px
from planner.frameworks.swift import reader_xcomposer as swiftxc
from planner.frameworks.swift.keys import KEYS
from planner.frameworks.swift.reader_deleted import within_length
from planner.frameworks.swift.reader_rl import look
from planner.intake import media, modelconfig, models
from planner.intake.collect import Collector, as_bool, as_int, default
from planner.intake.flags import Flag
from planner.model import image_rules, images, xcomposer

QWEN_VL_UTILS_MAX_PIXELS = 16384 * 28 * 28

VISION_KEYS = (
    KEYS.key("frozen_vision"),
    KEYS.key("frozen_projector"),
    "MAX_PIXELS",
    "MIN_PIXELS",
    "VIDEO_MAX_PIXELS",
    "VIDEO_MIN_PIXELS",
    "FPS",
    "FPS_MAX_FRAMES",
)


def vision(c: Collector, f: dict[str, Flag], env: dict[str, str], where: str, lora: bool) -> None:
    """A VLM's freeze switches (--freeze_vit, --freeze_aligner, --freeze_llm): with LoRA, what all-linear then reaches
    in the ViT; without, the frozen parts. The environment's video caps are said in a line."""
    if not modelconfig.tower_known(c, f | {k: Flag(k, v, f"{where} {k}={v}", k) for k, v in env.items()}, VISION_KEYS):
        return
    if c.get("lora_tower_full"):  # lora_llm reads no freeze switch (reader_tuners.read_lora_llm says so)
        return
    vit, vsrc = look(f, "frozen_vision")
    if lora and KEYS.key("frozen_vision") in f:
        why = "all-linear then takes the ViT's linears too: swift/pipelines/train/tuner.py:92-104"
        modelconfig.lora_tower(c, vit, vsrc, KEYS.flag("frozen_vision"), why)
    aligner, asrc = look(f, "frozen_projector")
    llm, lsrc = look(f, "frozen_language")
    if not lora:
        frozen, note = modelconfig.frozen_value(as_bool(vit), as_bool(aligner), as_bool(llm))
        c.fact("frozen", frozen, f"{vsrc}; {asrc}; {lsrc}", KEYS.flag("frozen_vision"))
        if note:
            c.note(f"{asrc} ({note.replace('projector', 'aligner').replace('tower', 'ViT')})")


def image(
    c: Collector,
    env: dict[str, str],
    where: str,
    release,
    limit: tuple[int, str] | None = None,
    hint=None,
    template: Flag | None = None,
    deletes: str | None = None,
) -> None:
    """One image a row at MAX_PIXELS, else at the cap every ms-swift release leaves to qwen_vl_utils: its
    MAX_PIXELS 16384 x 28 x 28 = 12,845,056 (qwen_vl_utils/vision_process.py; ms-swift reads the MAX_PIXELS
    environment variable over it: v2.5.2 swift/llm/utils/template.py:1531-1546, v3.4.0
    swift/llm/model/model/qwen.py:537-545, v4.0.0 swift/model/models/qwen.py:654-670). Up to 3.3 --max_length
    counts the text only, the images' tokens inserted after it (planner.frameworks.swift.RELEASES): the row runs
    max_length plus the image; from 3.4 a longer row is deleted, so the image is within max_length and no cap is
    assumed (planned text only, the headline says so). Derived again from a --model given beside the files. A colocated
    vLLM rollout's --vllm_limit_mm_per_prompt (`limit`: limits' image) puts up to N images in a row. An
    InternLM-XComposer-2.5 checkpoint's image follows its size: asked for (reader_xcomposer; `hint`: --model_type).
    --max_pixels (`template`, from 3.0) rescales each image first: a cap as MAX_PIXELS is, at the worst case its
    rescale and qwen_vl_utils' rounding leave (reader_pixels). Where a longer row is deleted (`deletes`: deleted's
    source), --images N share the row's length (within_length)."""
    given = as_int(env.get("MAX_PIXELS"))
    cap = as_int(env.get("IMAGE_MAX_TOKEN_NUM")) if release.name in TOKEN_CAP_LINES else None
    text = release.means("swift_max_length_counts") == "text"
    scale = as_int(template.value) if template is not None and release.name != "2" else None
    scale = scale if scale and scale > 0 else None  # rescale_image leaves an image under 1 pixel's cap as it is
    _caps(c, env, cap, deletes is None, scale)
    within_length(c, deletes)
    tiled = "MAX_NUM" in env and _tiled(c)
    if not given and not cap and not text and not tiled and not scale:
        if limit is not None:
            c.note(f"{limit[1]} (image {limit[0]} not planned: no image cap is planned without MAX_PIXELS or MAX_NUM)")
        return
    field = next((f for f in ("seq_len", "workload.max_length", "workload.max_prompt_length") if c.has(f)), "seq_len")
    if swiftxc.ask_image(c, hint, field, release.name):
        return
    own = _own_image(c, env, where, release)
    if own is not None:
        seq = c.setting(field)
        if text and seq is not None:  # up to 3.3 --images N after the text's length, as the pixel path's (below)
            each = own[0]
            c.derived[field] = (COUNTS, lambda r: _text_then_images(int(seq.value), r, lambda _: each, lambda _: each))
        return _inserted(c, *own, release, text, limit, deletes)
    pixels = given or QWEN_VL_UTILS_MAX_PIXELS
    how = (
        f"{where} IMAGE_MAX_TOKEN_NUM={cap}"
        if cap
        else f"{where} MAX_PIXELS={given}"
        if given
        else default(
            f"ms-swift {release.name}.x",
            "qwen_vl_utils/vision_process.py MAX_PIXELS = 16384 * 28 * 28; no MAX_PIXELS in the environment",
            f"image cap {pixels:,} pixels",
        )
    )
    if scale:
        how += f"; {template.source} (rescaled to at most {scale:,} pixels first, then rounded: {RESCALE})"

    def tokens(request: dict | None) -> int:  # the image under the final model (a --model beside the files)
        m = c.model if request is None else models.lookup(str(request.get("model", "")), None)
        per = modelconfig.pixels_per_token(m.config) if m is not None and modelconfig.has_vision(m.config) else None
        if not per:
            return 0
        if cap:  # qwen_vl_utils' own token cap, whatever the patch (TOKEN_CAP)
            n = cap
        elif given or per == 28 * 28:  # the default cap: the Qwen2-VL family
            n = pixels // per
        elif scale:  # qwen_vl_utils 0.0.14's 16,384 tokens, whatever the patch (reader_pixels)
            n = px.QWEN_VL_UTILS_TOKENS
        else:
            return 0
        return px.rescaled_worst_tokens(scale, math.isqrt(per), n) if scale else n

    def row(request: dict | None) -> int:  # the row's images: one, or up to the vLLM limit (_row_tokens)
        n = _row_tokens(c, limit, tokens(request), text)[0]
        return _within(c, n, deletes)[0] if limit is None else n

    c.derived["image_tokens"] = (("model",), row)
    # the length --max_length set: SFT's rows, DPO's chosen and rejected rows, GRPO's prompt (_sequence); up to 3.3
    # the images' tokens come after it, as many as --images N counts (_text_then_images)
    seq = c.setting(field)
    if text and seq is not None:
        c.derived[field] = (COUNTS, lambda request: _text_then_images(int(seq.value), request, tokens, row))
    n = tokens(None)
    if not n:
        return
    if cap:
        _inserted(
            c,
            n,
            f"{how} (one image a row of at most {cap} tokens: {TOKEN_CAP})",
            "IMAGE_MAX_TOKEN_NUM",
            release,
            text,
            limit,
            deletes,
        )
        return
    if scale:
        _inserted(
            c, n, f"{how} (one image a row of at most {n:,} tokens)", "--max_pixels", release, text, limit, deletes
        )
        return
    per = f"{pixels // n} pixels a token{', swift/model/models/qwen.py:758-770' if given else ''}"
    _inserted(c, n, f"{how} (one image a row: {pixels} // {per})", "MAX_PIXELS", release, text, limit, deletes)


# the flags whose change sizes a 3.0-3.3 row again: its text's --max_length, then each image's tokens (image)
COUNTS = ("model", "images", "tokens_per_image", "image_tokens")


def _text_then_images(seq: int, request: dict, tokens, row) -> int:
    """A row up to 3.3 (TEXT_ONLY_CUT): the text's --max_length, then its images' tokens: --image-tokens T, --images N
    at --tokens-per-image, at --max-pixels or at the files' cap (`tokens`: one image's under the final model), else
    the reading's `row`."""
    if request.get("image_tokens"):
        return seq + int(request["image_tokens"])
    if not request.get("images"):
        return seq + row(request)
    each = request.get("tokens_per_image")
    m = models.lookup(str(request.get("model", "")), None)
    rule = images.family_rule(str(m.config.get("model_type"))) if m is not None else None
    if not each and request.get("max_pixels") and rule in images.PIXEL_RULES:  # the worst case planned (imagefit)
        each = images.worst_case(rule, request.get("min_pixels"), request["max_pixels"])[0]
    return seq + int(request["images"]) * int(each or tokens(request))


# IMAGE_MAX_TOKEN_NUM: ms-swift sets qwen_vl_utils' module cap from the environment (v4.5.2
# swift/model/models/qwen.py:697-731, from v3.9.0), over the one MAX_PIXELS gives (:747-757); qwen_vl_utils 0.0.14 resizes
# an image to at most that many merged patches (vision_process.py:132: max_pixels IMAGE_MAX_TOKEN_NUM x patch_factor^2)
TOKEN_CAP = "swift/model/models/qwen.py:697-731 sets qwen_vl_utils' IMAGE_MAX_TOKEN_NUM, vision_process.py:132"
TOKEN_CAP_LINES = ("3.9", "4")
RESCALE = "v3.4.1 swift/llm/template/base.py:236, vision_utils.py:87-97; qwen_vl_utils' smart_resize"


def _caps(c: Collector, env: dict[str, str], cap: int | None, kept: bool, scale: int | None) -> None:
    """The environment's image caps, kept for a flag that counts the images again (planner.intake.media.COUNTED:
    --images N, --data): MAX_PIXELS and MIN_PIXELS as the request's pixel bounds, qwen_vl_utils' smart_resize sizing
    each image within them (v2.5.2 swift/llm/utils/template.py:1543-1544 get_env_args('min_pixels' / 'max_pixels');
    v3.4.0 swift/llm/model/model/qwen.py:537-545 and v4.0.0 swift/model/models/qwen.py:654-670 set qwen_vl_utils'
    constants from them), IMAGE_MAX_TOKEN_NUM as that many tokens' pixels under the final model (TOKEN_CAP), MAX_NUM
    as InternVL's tiles (_own_image); with none of them, qwen_vl_utils' own cap (reader_pixels: not the HF
    processor's, which ms-swift does not let resize; within the row's length where a longer row is deleted, not
    `kept`: deleted); under --max_pixels (`scale`), the worst case its rescale
    leaves (reader_pixels.rescaled_pixels). Derived only where such a flag is given: the files' own count
    is image's."""
    high, low = as_int(env.get("MAX_PIXELS")), as_int(env.get("MIN_PIXELS"))
    if cap:
        bound = lambda request: _token_cap_pixels(request, cap)
    elif high:
        bound = lambda request: high
    else:
        bound = lambda request: px.default_cap_pixels(request, kept)
    plain = bound
    if scale:
        bound = lambda request: px.rescaled_pixels(plain(request), scale, px.token_pixels(request))
    c.derived["max_pixels"] = (media.COUNTED, media.pixel_bound(bound))
    if low and (cap or high) and (not high or low <= high):  # a floor over the cap is qwen_vl_utils' to lift
        c.derived["min_pixels"] = (media.COUNTED, media.pixel_bound(lambda request: low))
    k = as_int(env.get("MAX_NUM"))
    if _tiled(c) and k is not None and 1 <= k <= 64:
        c.derived["image_rule"] = (
            media.COUNTED,
            lambda request: images.tile_rule(k) if media.counted(request) else None,
        )


def _token_cap_pixels(request: dict, cap: int) -> int | None:
    """IMAGE_MAX_TOKEN_NUM's pixels under the request's model: cap x the pixels a token covers (TOKEN_CAP)."""
    m = models.lookup(str(request.get("model", "")), None)
    per = modelconfig.pixels_per_token(m.config) if m is not None and modelconfig.has_vision(m.config) else None
    return cap * per if per else None


def _family(c: Collector) -> str | None:
    """The image rule of the reading's model's family (planner.model.images), None where the model is not known."""
    return images.family_rule(str(c.model.config.get("model_type"))) if c.model is not None else None


def _tiled(c: Collector) -> bool:
    """Whether the reading's model takes InternVL's tiles (planner.model.images.tiled); False where it is not known."""
    return c.model is not None and images.tiled(images.family_rule(str(c.model.config.get("model_type"))) or "")


def _own_image(c: Collector, env: dict[str, str], where: str, release) -> tuple[int, str, str] | None:
    """(tokens, source, key) of one image for the VLMs whose image is not a pixel budget's: InternVL's tiles up
    to MAX_NUM (4.6.0 swift/template/templates/internvl.py:28, v3.0.0 swift/llm/template/template/internvl.py:40);
    MiniCPM-V's slices, at max_slice_nums from the environment or the processor's 9 (v2.5.2
    swift/llm/utils/template.py:3700-3711, get_env_args('max_slice_nums'); the placeholder's markers, about two tokens
    a slice, are not counted);
    InternLM-XComposer2's image resized to img_size (template.py:2276, vis_processor), a token a patch."""
    if _family(c) == "minicpm-v":
        k = as_int(env.get("MAX_SLICE_NUMS")) or image_rules.MINICPMV_MAX_SLICES
        how = (
            f"{where} MAX_SLICE_NUMS={k}"
            if "MAX_SLICE_NUMS" in env
            else default(
                f"ms-swift {release.name}.x", "the processor's max_slice_nums 9 (preprocessor_config.json)", "9 slices"
            )
        )
        n = image_rules.minicpmv_worst_tokens(k)
        return n, f"{how} (one image a row: the whole and {k} slices, 64 queries each)", "MAX_SLICE_NUMS"
    if _tiled(c) and "MAX_NUM" in env:
        k = as_int(env["MAX_NUM"])
        if k is not None and 1 <= k <= 64:  # memplan's InternVL rule counts up to 64 tiles
            n = images.worst_case(images.tile_rule(k))[0]
            why = f"one image a row, up to {k} tiles and the thumbnail (swift/template/templates/internvl.py:28)"
            return n, f"{where} MAX_NUM={k} ({why})", "MAX_NUM"
    n = xcomposer.image_tokens(c.model.config) if c.model is not None else None
    if n is not None:
        size = c.model.config.get("img_size", 490)
        why = f"one image a row, resized to {size} x {size}: {n} patches (v2.5.2 swift/llm/utils/template.py:2276)"
        return n, why, "--model_type"
    return None


# the modalities a colocated engine takes from a row and memplan plans (swift/infer_engine/vllm_engine.py:468-483 hands
# vLLM its images, audios and videos; memplan plans no audio)
PLANNED = ("image", "video")
LIMIT = "vllm_limit_mm_per_prompt"  # 4.6.0 swift/rlhf_trainers/args_mixin.py:45
NO_AUDIO = "ms-swift hands vLLM a row's audios too (swift/infer_engine/vllm_engine.py:468-483); memplan plans no audio"


def limits(c: Collector, f: dict[str, Flag], own: bool = False) -> dict[str, tuple[int, str]]:
    """--vllm_limit_mm_per_prompt of a colocated vLLM rollout (4.6.0 swift/rlhf_trainers/args_mixin.py:45, 59-60,
    handed to the engine at rollout_mixin.py:517) or of 3.4.x's engine on GPUs of its own (`own`: v3.4.1
    swift/trainers/rlhf_trainer/grpo_trainer.py:499, the trainer builds it either way): {"image" / "video": (the items
    a row may hold, where read)}, the video only where named; {} where not given or where a rollout server takes its
    own (a line), the other keys a line (NO_AUDIO)."""
    g = f.get(LIMIT)
    if g is None:
        return {}
    if c.get("workload.generation") != "vllm-colocate" and not own:
        c.note(f"{g.source} (not applied: only a colocated vLLM rollout takes it, the rollout server its own)")
        return {}
    value = g.value[-1] if isinstance(g.value, list) else g.value
    accepted = 'a JSON object such as \'{"image": 4, "video": 1}\' (vLLM\'s limit_mm_per_prompt)'
    mmlimit.note_others(c, value, g.source, NO_AUDIO, PLANNED)
    out = {}
    for kind in PLANNED if "video" in mmlimit.others(value) else ("image",):
        n = mmlimit.image_limit(value, g.source, accepted, kind)
        out[kind] = n, g.source
    return out


def up_to(limit: tuple[int, str], kind: str) -> str:
    """A limit (limits') as a setting's source: the items a row may hold."""
    n, where = limit
    return f"{where} (up to {n} {kind}{'s' if n != 1 else ''} a row: vLLM refuses more, the dataset decides)"


def _row_tokens(c: Collector, limit: tuple[int, str] | None, n: int, text: bool) -> tuple[int, int]:
    """(a row's image tokens, the room they had) for one image of `n` tokens: up to `limit` images (_limit), within
    the length --max_length sets from 3.4 (a longer row is deleted), inserted after it up to 3.3 (`text`)."""
    if limit is None:
        return n, n
    field = next((f for f in ("seq_len", "workload.max_length", "workload.max_prompt_length") if c.has(f)), "seq_len")
    seq = c.setting(field)
    room = n * limit[0] if text or seq is None else int(seq.value)
    return mmlimit.row_image_tokens(limit[0], n, room), room


def _within(c: Collector, n: int, deletes: str | None) -> tuple[int, int | None]:
    """(one image's tokens in a row that runs, the length that cut them or None): where a longer row is deleted
    (`deletes`: reader_deleted.deleted), an image over --max_length never reaches the model, so at most that many."""
    field = next((f for f in ("seq_len", "workload.max_length", "workload.max_prompt_length") if c.has(f)), "seq_len")
    seq = c.setting(field)
    length = int(seq.value) if deletes is not None and seq is not None else None
    return (length, length) if length is not None and n > length else (n, None)


def _inserted(c: Collector, n: int, how: str, key: str, release, text: bool, limit=None, deletes=None) -> None:
    """The row's image tokens; up to 3.3 inserted after the text's --max_length, as the pixel path does; with a
    vLLM `limit` (_limit), N images, from 3.4 within the length --max_length sets (a longer row is deleted:
    planner.frameworks.mmlimit.row_image_tokens); one image a row within that length where a longer row is deleted
    (`deletes`, _within)."""
    field = next((f for f in ("seq_len", "workload.max_length", "workload.max_prompt_length") if c.has(f)), "seq_len")
    seq = c.setting(field)
    if limit is not None:
        each, (n, room) = n, _row_tokens(c, limit, n, text)
        how = f"{how}; {up_to(limit, 'image')}: {each:,} tokens each, within {room:,}"
        c.set("image_tokens", n, how, key)
    else:  # one image a row: the files do not say how many (the dataset does)
        n, cut = _within(c, n, deletes)
        if cut is not None:
            how = f"{how}; at most --max_length {cut:,} tokens: {deletes}"
        c.assume_media("image_tokens", n, how, key)
    if text and seq is not None:
        c.set(
            field,
            int(seq.value) + n,
            f"{seq.source} + {n} image tokens (ms-swift {release.name}.x checks --max_length on the text, then "
            "inserts the image's tokens: planner.frameworks.swift.RELEASES)",
            KEYS.flag("seq_len"),
        )
