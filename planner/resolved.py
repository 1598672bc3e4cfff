"""A request's model, GPUs and goal, resolved and checked before any search (planner.advise's suggest and check
begin here): the model (a catalog name, a config path or object, or what --config resolves), the hardware, the
rows' length (the workload's, or the data's longest row), the image and video tokens, and the margin."""

from __future__ import annotations

from planner.config.requests import (
    APPROXIMATE_MARGIN,
    ModelRef,
    Target,
)
from planner.config.spec import (
    DEFAULT_MARGIN,
    Goal,
    Hardware,
)
from planner.errors import BadInput
from planner.model import catalog, hardware, images
from planner.model import video_rules as vr
from planner.model.families import from_config
from planner.model.modelspec import ModelSpec
from planner.search import imagefit, videofit
from planner.search.datafit import DataFit, Scanner, scan_data, with_videos


def default_resolver(ref: ModelRef) -> ModelSpec:
    """A catalog name or config path (catalog.load_model), or a config.json object."""
    if isinstance(ref, dict):
        name = str(ref.get("_name_or_path") or ref.get("model_type") or "custom")[-64:]
        return from_config(ref, name)
    try:
        return catalog.load_model(ref)
    except BadInput as e:  # a Hugging Face id, a cache folder, a folder named as a known id: what --config resolves
        from planner.intake import hub, models

        found = models.lookup(ref)
        if found is None and (refused := hub.refusal(ref)):
            raise refused from None
        if found is None and hub.clause(ref):  # an id the Hub was not asked for, or did not answer
            raise type(e)(f"{e}{hub.clause(ref)}", e.field) from None
        if found is None:
            raise
        return catalog.load_model(found.ref) if found.ref in catalog.model_names() else from_config(found.config, ref)


def check_positions(model: ModelSpec, seq_len: int) -> None:
    """GPT-2's positions are a learned table (n_positions rows): a longer sequence cannot run at all. RoPE
    models have no such table and may train past max_position_embeddings (context extension)."""
    t = model.text
    if t.traits.learned_positions and t.max_positions and seq_len > t.max_positions:
        raise BadInput(
            f"--seq-len {seq_len}: {model.name} has learned positions for at most {t.max_positions} "
            f"tokens (n_positions)",
            "seq_len",
        )


def workload_sequence(req: Target) -> Target:
    """DPO and GRPO rows are as long as their TRL inputs say: --seq-len, --data and a token budget are SFT's."""
    w = req.workload
    if not w.rl:
        return req
    for field in ("seq_len", "data", "max_tokens_per_micro_batch"):
        if getattr(req, field) is not None:
            raise BadInput(
                f"--{field.replace('_', '-')} with --workload {w.kind}: rows are planned at "
                f"{'--max-prompt-length + --max-completion-length' if w.kind == 'grpo' else '--max-length'}"
                f" ({w.seq_len()} tokens)",
                field,
            )
    return req.model_copy(update={"seq_len": w.seq_len()})


def videos_json(req: Target, model: ModelSpec) -> dict | None:
    videos = videofit.budget(req, model)
    return videos.json() if videos else None


def image_tokens(req: Target, model: ModelSpec) -> tuple[int, imagefit.ImageBudget | None]:
    """The sample's image tokens, and the worst case they were planned at for --images alone (imagefit.budget)."""
    n, b = req.image_tokens, None
    if req.images is not None or req.tokens_per_image is not None:
        if req.images is None:
            raise BadInput("--tokens-per-image goes with --images", "images")
        if n is not None:
            raise BadInput(
                "give --image-tokens or --images (with --tokens-per-image or alone), not both", "image_tokens"
            )
        b = imagefit.budget(req, model)
        n = req.images * req.tokens_per_image if b is None else b.tokens(b.tokens_per_image)  # ImageBudget.shared
    n = n or 0
    videos = videofit.budget(req, model)  # video tokens are image tokens to the tower and the decoder
    if videos is not None:  # with --data, each row's videos beside its images (resolve: with_videos)
        n += videos.tokens
    if n and model.vision is None:
        raise BadInput(f"--image-tokens {n}: model {model.name!r} has no vision tower", "image_tokens")
    if req.workload.kind == "grpo" and n > req.workload.prompt_tokens():
        raise BadInput(
            f"--image-tokens {n} exceeds --max-prompt-length {req.workload.prompt_tokens()}: image "
            "tokens are part of the prompt",
            "image_tokens",
        )
    # a video's length is asked for where the videos alone pass the length: their worst case is hours of frames; where
    # the images' worst case is what passes it, the images' rule below holds (issue 47 item 5: a cap is a bound)
    if videos is not None and videos.tokens > req.seq_len:
        length = "--max-length" if req.data is not None else "--seq-len"  # with --data: the length that cut the rows
        raise BadInput(
            f"--videos {req.videos} at their worst case ({videos.tokens_per_video:,} tokens a video: "
            f"{videos.frames} frames) are {videos.tokens:,} tokens, over {length} {req.seq_len}: give "
            f"--video-seconds, lower --max-frames or --video-max-pixels, or raise {length}",
            "videos",
        )
    # an image's worst case (a pixel or tile cap) is a bound, not a count: where it is over the length, the tower and
    # projector run on every patch the processor made and the text is cut after them (issue 48 item 3); the plan's
    # images line says so (imagefit.lines)
    if n > req.seq_len and b is None:
        raise BadInput(
            f"--image-tokens {n} exceeds --seq-len {req.seq_len}: image tokens are part of the sequence", "image_tokens"
        )
    if req.images is None:
        imagefit.budget(req, model)  # the pixel bounds without images are refused there
    return n, b


def resolve(
    req: Target, global_batch: int, resolver=default_resolver, scanner: Scanner | None = None
) -> tuple[ModelSpec, Hardware, Goal, DataFit | None, imagefit.ImageBudget | None]:
    model = resolver(req.model)  # the cheap checks first: a bad model or GPU is refused before a long scan
    hw = hardware.resolve(req.gpu, req.gpus_per_node, req.nodes, req.inter_node_gbps, req.host_ram_gb)
    req = workload_sequence(req)
    if req.data is not None and req.image_rule is None:  # the data's images sized as the model's processor does
        req = req.model_copy(update={"image_rule": images.family_rule(model.model_type) or "qwen2-vl"})
    fit = scan_data(req, scanner)
    videos = videofit.budget(req, model) if fit is not None else None
    if videos is not None:  # the data's rows say their text and images, --videos N their videos (with_videos)
        fit = with_videos(fit, videos.tokens, req.max_length)
    if fit is not None:
        req = req.model_copy(update={"seq_len": fit.seq_len})
        if fit.image_tokens and req.image_tokens is None and req.images is None:
            if model.vision is None:
                raise BadInput(
                    f"--data {req.data!r} has images (up to {fit.image_tokens:,} tokens a row) and model "
                    f"{model.name!r} has no vision tower",
                    "data",
                )
            req = req.model_copy(update={"image_tokens": fit.image_tokens})
    check_positions(model, req.seq_len)
    margin = req.margin if req.margin is not None else (DEFAULT_MARGIN if model.exact else APPROXIMATE_MARGIN)
    n, budget = image_tokens(req, model)
    cut = n if n > req.seq_len else 0  # the tower's tokens where the text is cut at seq_len after it
    goal = Goal(
        global_batch=global_batch,
        seq_len=req.seq_len,
        image_tokens=min(n, req.seq_len),
        tower_tokens=cut,
        margin=margin,
        pixels=planned_pixels(req, budget, fit),
        tiles=images.tile_cap(planned_rule(req, budget, fit) or ""),
        video=planned_video(req, model),
        images=req.images,
        videos=req.videos,
    )
    return model, hw, goal, fit, budget


def planned_rule(req: Target, budget: imagefit.ImageBudget | None, fit: DataFit | None) -> str | None:
    """The image rule of --images alone's worst case or of the data's images; None where no image was sized by one."""
    return budget.rule if budget else req.image_rule if fit is not None and fit.image_tokens else None


def planned_pixels(req: Target, budget: imagefit.ImageBudget | None, fit: DataFit | None) -> tuple[int, int] | None:
    """(min_pixels, max_pixels) the images were planned within (Goal.pixels): those of --images alone's worst case or
    of the data's images, at a pixel rule; the bounds given, else the rule's defaults."""
    rule = planned_rule(req, budget, fit)
    if rule not in images.PIXEL_RULES:
        return None
    _, low, high = images.PIXEL_RULES[rule]
    return req.min_pixels or low, req.max_pixels or high


def planned_video(req: Target, model: ModelSpec) -> tuple[int, int, float, int] | None:
    """(min_pixels, max_pixels, fps, frames) of --videos' worst case (Goal.video): the bounds given, else the video
    processor's; frames, those sampled at the worst case, so that files capping a video's frames at them run the plan."""
    videos = videofit.budget(req, model)
    if videos is None:
        return None
    return req.video_min_pixels or vr.MIN_PIXELS, videos.max_pixels, videos.fps, videos.frames


def hardware_json(hw: Hardware) -> dict:
    return {
        "gpu": hw.gpu.name,
        "gpus_per_node": hw.gpus_per_node,
        "nodes": hw.nodes,
        "world_size": hw.world_size,
        "capacity_bytes": hw.gpu.capacity_bytes,
        "inter_node_gbps": hw.inter_node_gbps,
        "host_ram_bytes": int(hw.host_ram_gib * 2**30),
    }
