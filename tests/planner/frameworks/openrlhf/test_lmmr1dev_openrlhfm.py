"""LMM-R1's dev branch (TideDra/lmm-r1 2e98315: OpenRLHF v0.7.4.post2 with LMM-R1's flags) and OpenRLHF-M
(OpenRLHF/OpenRLHF-M 2bf6337: v0.6.1.post1 with the pixel flags MM-Eureka's qwen branch kept), read as
openrlhf@lmm-r1-dev and openrlhf@openrlhf-m (planner.frameworks.openrlhf.lmmr1_dev, .openrlhfm). Dev's scripts are
main's byte for byte, so a script names dev by --ds_tensor_parallel_size beside an LMM-R1 flag (above 1 refused: no
AutoTP planned); OpenRLHF-M by a flag it shares with MM-Eureka beside the math_verifier server MM-Eureka lacks, its
own example (copied verbatim, tests/data/frameworks/scripts/SOURCES.md) read at its 640 x 28 x 28 pixel cap where
named; its actor loads Qwen2.5-VL alone."""

import hashlib

import pytest

from planner import intake
from planner.errors import BadInput
from tests.planner.intake.conftest import DATA

LMM = DATA / "scripts" / "lmm-r1" / "examples" / "scripts" / "lmm_r1"
ORM = DATA / "scripts" / "OpenRLHF-M" / "examples" / "scripts" / "train_rloo_qwenvl2_5_math.sh.sh"
# git's blob ids at dev 2e98315 (`git rev-parse dev:examples/scripts/lmm_r1/NAME`): main f917f18's too
DEV_BLOBS = {
    "train_sokoban.sh": "a4699fe49244d4a7001ea17d0b04155dff1dd501",
    "train_direct_rl_geo.sh": "2d53f9fe49a5cdfde04d0ee3f7751a47ba1c3788",
}
SERVER = "python -m openrlhf.models.remote_rm.math_verifier --dataset d.jsonl --prompt-template chatml &\n"
PPO = (
    "python3 -m openrlhf.cli.train_ppo_ray --pretrain {model} --advantage_estimator group_norm "
    "--n_samples_per_prompt 8 --bf16 {flags}\n"
)


def _settings(path, framework: str | None = None) -> dict:
    given = {"framework": framework} if framework else {}
    return {s.field: s for s in intake.read([str(path)], given=given).settings}


def _script(tmp_path, flags: str, server: bool = False, model: str = "Qwen/Qwen2.5-VL-7B-Instruct"):
    path = tmp_path / "run.sh"
    path.write_text((SERVER if server else "") + PPO.format(model=model, flags=flags))
    return path


def test_dev_ships_mains_scripts_byte_for_byte():
    def blob(p):
        data = p.read_bytes()
        return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()

    assert {name: blob(LMM / name) for name in DEV_BLOBS} == DEV_BLOBS


def test_ds_tensor_parallel_size_beside_an_lmm_r1_flag_names_dev(tmp_path):
    """--processor_kwargs names LMM-R1, --ds_tensor_parallel_size (dev's :275, v0.7.4's) its dev: its defaults cited
    there (--micro_train_batch_size 4 at :307); the image of 1,280 tokens on the 1,024 text tokens, 8 experience rows
    padded per micro rollout batch (:707-752) to max_model_len 2,048 and 1,024, as main pads them."""
    s = _settings(_script(tmp_path, "--processor_kwargs '{\"max_pixels\": 1003520}' --ds_tensor_parallel_size 1"))
    assert s["framework"].value == "openrlhf@lmm-r1-dev" and "train_ppo_ray.py:275" in s["framework"].source
    assert (
        s["micro_batch"].value == 4
        and "lmm-r1 dev@2e98315 openrlhf/cli/train_ppo_ray.py:307" in s["micro_batch"].source
    )
    rows = s["workload.roles.logprob_max_tokens_per_gpu"]
    assert rows.value == 8 * (min(1024 + 1280, 2048) + 1024) and "experience_maker.py:707-752" in rows.source
    main = _settings(_script(tmp_path, "--processor_kwargs '{\"max_pixels\": 1003520}'"))
    assert main["framework"].value == "openrlhf@lmm-r1" and "openrlhf@lmm-r1-dev" in main["framework"].source


def test_autotp_above_one_is_refused_in_one_line(tmp_path):
    with pytest.raises(BadInput, match="--ds_tensor_parallel_size 2: memplan plans no DeepSpeed AutoTP") as e:
        _settings(_script(tmp_path, "--freeze_prefix visual --ds_tensor_parallel_size 2"))
    assert "give --ds_tensor_parallel_size 1" in str(e.value) and "\n" not in str(e.value)


def test_openrlhf_ms_own_script_reads_its_pixel_cap_where_named():
    """Its example starts math_verifier and takes no fork flag: LMM-R1 assumed (the larger image, 16,384 tokens,
    past max_model_len 4,024), OpenRLHF-M named in the line; at openrlhf@openrlhf-m its 640 x 28 x 28 cap (:344),
    640 tokens: 4 rows of 1,024 + 640 + 3,000."""
    s = _settings(ORM)
    assert s["framework"].value == "openrlhf@lmm-r1" and "--framework openrlhf@openrlhf-m" in s["framework"].source
    assert s["workload.roles.logprob_max_tokens_per_gpu"].value == 4 * (4024 + 3000)
    m = _settings(ORM, "openrlhf@openrlhf-m")
    assert m["max_pixels"].value == 640 * 28 * 28 and "OpenRLHF-M 2bf6337" in m["max_pixels"].source
    assert ":344" in m["max_pixels"].source and m["micro_batch"].value == 2
    assert m["workload.roles.logprob_max_tokens_per_gpu"].value == 4 * (1024 + 640 + 3000)


@pytest.mark.parametrize(
    ("flags", "server", "release"),
    [
        ("--max_pixels 1003520 --freeze_prefix visual", True, "openrlhf@openrlhf-m"),
        ("--max_pixels 1003520", False, "openrlhf@mm-eureka"),
        ("--max_pixels 1003520 --enable_accuracy_filter", True, "openrlhf@mm-eureka"),
    ],
)
def test_a_shared_pixel_flag_beside_math_verifier_names_openrlhf_m(tmp_path, flags, server, release):
    s = _settings(_script(tmp_path, flags, server))
    # 1,280 tokens at that cap pass the 1,024-token prompt: planned at the prompt, the cap said in the source
    assert s["framework"].value == release and "max_pixels 1,003,520" in s["image_tokens"].source
    if release.endswith("openrlhf-m"):
        assert s["frozen"].value == "vision+projector" and "ppo_actor.py:319-327" in s["frozen"].source
    elif not server:
        assert "OpenRLHF-M takes it too" in s["framework"].source


def test_openrlhf_m_refuses_a_model_it_has_no_kit_for(tmp_path):
    path = _script(tmp_path, "--max_pixels 1003520", True, "Qwen/Qwen2-VL-7B-Instruct")
    with pytest.raises(BadInput, match="model_type 'qwen2_vl'.*qwen2_5_vl alone.*openrlhf@lmm-r1") as e:
        _settings(path)
    assert "\n" not in str(e.value)
