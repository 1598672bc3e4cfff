"""The VLM rows of benchmarks/accuracy.py (--vlm; issue 33's acceptance): with images, the analytic peak against the
sim, and the sim against a real CPU step.

- analytic vs sim: one catalog model of each family, cut to 4 decoder layers (its tower whole, at its real depth), at
  two image sizes, micro-batch 2 of 4,096 tokens, the tower trained (bf16-pure, bf16 under torch AMP, bf16-pure with
  full checkpointing) and frozen (bf16-pure, --frozen vision), and the language model frozen (bf16-pure, --frozen
  language; bf16 under AMP, --frozen language+vision: the projector alone trained). Target: within 3%.
- sim vs real: each family's tiny model (tests/probes/tiny_vlms.py) in fp32 at two image sizes (samples of 1,536
  tokens, or 512 more than the images), the sim with CPU code paths against a real CPU step counted by the same
  tracker. Target: within 1%.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# LLM tokens per sample of the two image sizes (whole tiles for the fixed-size families; Llama-3.2-Vision: images)
SIZES = {
    "qwen2.5-vl-3b": (256, 576),
    "qwen3-vl-8b": (256, 576),
    "internvl2.5-8b": (256, 1024),
    "llava-1.5-7b": (576, 1152),
    "llava-v1.6-mistral-7b": (1176, 2928),
    "gemma-3-4b": (256, 512),
    "smolvlm-instruct": (324, 810),
    "llama-3.2-11b-vision": (1, 2),
}
KNOBS = [
    ("bf16-pure", "off", "none"),
    ("bf16", "off", "none"),
    ("bf16-pure", "full", "none"),
    ("bf16-pure", "off", "vision"),
    ("bf16-pure", "off", "language"),
    ("bf16", "off", "language+vision"),
]


def analytic_rows(names=None) -> list[dict]:
    from planner.config.spec import Knobs
    from planner.estimate.memory import breakdown
    from planner.estimate.setup import Setup
    from planner.model import catalog
    from planner.model.families import from_config
    from probes.sim import simulate
    from probes.step import Case
    from tests.probes.test_family_accuracy import _four_layers

    rows = []
    for name in names or SIZES:
        cfg = _four_layers(catalog.model_config(name))
        spec = from_config(cfg, name)
        for tokens in SIZES[name]:
            for precision, ckpt, frozen in KNOBS:
                k = Knobs(precision=precision, checkpointing=ckpt, frozen=frozen)
                sim = simulate(Case(cfg, k, 2, 1, 4096, image_tokens=tokens))
                a = breakdown(Setup(spec, k, 2, 1, 4096, image_tokens=sim.image_tokens), 80 * 2**30)
                rows.append(
                    {
                        "model": name,
                        "image_tokens": sim.image_tokens,
                        "precision": precision,
                        "checkpointing": ckpt,
                        "frozen": frozen,
                        "analytic": a.peak_allocated_bytes,
                        "sim": sim.peak_allocated_bytes,
                        "phase": sim.phase,
                        "analytic_vs_sim": round(a.peak_allocated_bytes / sim.peak_allocated_bytes - 1, 4),
                    }
                )
                r = rows[-1]
                print(
                    f"{name:22s} {r['image_tokens']:5d} {precision:9s} {ckpt:4s} frozen={frozen:15s} "
                    f"analytic/sim {r['analytic_vs_sim']:+.2%}",
                    flush=True,
                )
    return rows


def real_rows(names=None) -> list[dict]:
    from planner.config.spec import Knobs
    from probes.cpu import measure
    from probes.sim import simulate
    from probes.step import Case
    from tests.probes.tiny_vlms import TINY_SIZES, tiny_seq, tiny_vlm

    rows = []
    for name in names or TINY_SIZES:
        for tokens in TINY_SIZES[name]:
            case = Case(tiny_vlm(name), Knobs(precision="fp32"), 1, 1, tiny_seq(tokens), image_tokens=tokens)
            sim, real = simulate(case, paths="cpu"), measure(case)
            rows.append(
                {
                    "model": f"tiny {name}",
                    "image_tokens": sim.image_tokens,
                    "sim_cpu_paths": sim.peak_allocated_bytes,
                    "cpu_real": real["peak_allocated_bytes"],
                    "sim_vs_real": round(sim.peak_allocated_bytes / real["peak_allocated_bytes"] - 1, 5),
                }
            )
            print(f"tiny {name:22s} {sim.image_tokens:5d} sim/real {rows[-1]['sim_vs_real']:+.4%}", flush=True)
    return rows


def markdown(analytic: list[dict], real: list[dict]) -> list[str]:
    md = ["| model | image tokens | precision | ckpt | frozen | analytic MiB | sim MiB | phase | analytic/sim |"]
    md.append("|" + "---|" * 9)
    md += [
        f"| {r['model']} | {r['image_tokens']} | {r['precision']} | {r['checkpointing']} | {r['frozen']} | "
        f"{r['analytic'] / 2**20:.1f} | {r['sim'] / 2**20:.1f} | {r['phase']} | {r['analytic_vs_sim']:+.2%} |"
        for r in analytic
    ]
    md += ["", "| tiny model | image tokens | sim (cpu paths) MiB | cpu real MiB | sim/real |", "|" + "---|" * 5]
    md += [
        f"| {r['model']} | {r['image_tokens']} | {r['sim_cpu_paths'] / 2**20:.2f} | {r['cpu_real'] / 2**20:.2f} | "
        f"{r['sim_vs_real']:+.3%} |"
        for r in real
    ]
    return md
