"""`--plot FILE` for suggest and check: the web page's two charts drawn with matplotlib (imported
only here): each plan's memory terms stacked against the card's capacity and capacity minus the
margin, and the predicted memory against micro-batch for one plan's knobs."""

from __future__ import annotations

from planner.config.spec import Goal, Hardware, Plan
from planner.search.estimates import make_plan
from planner.search.search import divisors

GIB = 2**30
TERMS = (
    ("params_bytes", "parameters", "#4e79a7"),
    ("grads_bytes", "gradients", "#f28e2b"),
    ("optimizer_bytes", "optimizer", "#e15759"),
    ("activations_bytes", "activations", "#76b7b2"),
    ("temp_bytes", "temporaries", "#59a14f"),
    ("overhead_bytes", "overhead", "#bab0ac"),
)
MAX_CURVE_POINTS = 12


def curve_points(model, hw: Hardware, goal: Goal, ref: Plan) -> list[tuple[int, int]]:
    """(micro-batch, predicted device total) over the divisors of the per-rank batch, analytic."""
    per_rank = goal.global_batch // hw.world_size
    return [
        (mb, make_plan(model, hw, goal, ref.knobs, mb).memory.device_total_bytes)
        for mb in divisors(per_rank)[:MAX_CURVE_POINTS]
    ]


def write(path: str, plans: list[Plan], ref: Plan, model, hw: Hardware, goal: Goal) -> None:
    """The two charts: `plans` as stacked bars, and the memory curve for `ref`'s knobs."""
    try:
        import matplotlib
    except ImportError:
        from planner.errors import BadInput

        raise BadInput("--plot needs matplotlib (pip install 'memplan[plot]')") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    title = f"{model.name} on {hw.world_size} x {hw.gpu.name}, global batch {goal.global_batch}"
    curve = curve_points(model, hw, goal, ref)
    curve_label = f"{ref.precision}, checkpointing {ref.checkpointing}, {ref.sharding}, offload {ref.offload}"
    cap = hw.gpu.capacity_bytes / GIB
    usable = cap * (1 - goal.margin)
    fig, (bars, line) = plt.subplots(1, 2, figsize=(14, 5.5), dpi=100)
    bottom = [0.0] * len(plans)
    labels = [f"#{i + 1}" for i in range(len(plans))]
    for key, name, color in TERMS:
        vals = [getattr(p.memory, key) / GIB for p in plans]
        bars.bar(labels, vals, bottom=bottom, color=color, label=name)
        bottom = [b + v for b, v in zip(bottom, vals)]
    for ax in (bars, line):
        ax.axhline(cap, color="#b3261e", linestyle="--", label=f"capacity {cap:.1f} GiB")
        ax.axhline(usable, color="#9a6700", linestyle=":", label=f"capacity - margin {usable:.1f} GiB")
        ax.set_ylabel("GiB per GPU")
    bars.set_title("memory per GPU by term")
    bars.legend(fontsize=8, loc="best")
    if curve:
        xs, ys = [c[0] for c in curve], [c[1] / GIB for c in curve]
        line.plot(xs, ys, marker="o", color="#0550ae", label="predicted total")
        over = [(x, y) for x, y in zip(xs, ys) if y > usable]
        if over:
            line.scatter(*zip(*over), color="#b3261e", zorder=3, label="does not fit")
        line.set_xscale("log", base=2)
        line.set_xticks(xs, [str(x) for x in xs])
    line.set_xlabel("micro-batch per GPU")
    line.set_title(curve_label, fontsize=10)
    line.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def histogram(path: str, totals, text, summary: dict, title: str) -> None:
    """`planner scan --plot`: tokens per row (text, and text + image where rows have images), with the
    p50, p99 and max lines."""
    try:
        import matplotlib
    except ImportError:
        from planner.errors import BadInput

        raise BadInput("--plot needs matplotlib (pip install 'memplan[plot]')") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 5), dpi=100)
    n = min(80, max(10, len(totals) // 20))
    top = max(totals) or 1
    bins = [top * i / n for i in range(n + 1)]  # one set of edges for both, from 0
    ax.hist(list(totals), bins=bins, color="#4e79a7", alpha=0.8, label="tokens per row (text + image)")
    if summary["images"]:
        ax.hist(list(text), bins=bins, color="#f28e2b", alpha=0.6, label="text tokens per row")
    d = summary["tokens"]
    for key, color in (("p50", "#59a14f"), ("p99", "#e15759"), ("max", "#b00000")):
        ax.axvline(d[key], color=color, linewidth=2, label=f"{key} {d[key]:,}")
    ax.set_xlabel("tokens")
    ax.set_ylabel("rows")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
