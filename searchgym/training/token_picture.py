"""A picture of one episode's token record: which ids are trained and which are masked.

:func:`draw_record` lays a :class:`~searchgym.agents.trajectory.Trajectory` out token by
token, each in a box: the prompt and every observation shaded (``loss_mask`` 0), the ids
the model sampled left white (``loss_mask`` 1). Long masked spans are shortened to their
first and last tokens. :func:`tool_episode_picture` draws the synthwiki oracle's
Search-R1 episode played through tool calls, recorded with SmolLM2's tokenizer and the
hermes template (docs/tool-tokens.png)::

    python -m searchgym.training.token_picture docs/tool-tokens.png
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

#: Fill of each kind of span.
COLORS = {"prompt": "#d9d9d9", "generated": "#ffffff", "observation": "#9ecae1"}
LABELS = {
    "prompt": "prompt: system turn with the tools, the question (loss_mask 0)",
    "generated": "generated: the ids the model sampled, through <|im_end|> (loss_mask 1)",
    "observation": "observation: the tool results and the next assistant header (loss_mask 0)",
}


def _spans(trajectory: Any) -> list[tuple[str, tuple[int, ...]]]:
    spans = [("prompt", tuple(trajectory.prompt_ids))]
    spans += [("generated" if s.generated else "observation", tuple(s.token_ids)) for s in trajectory.segments]
    return spans


def _shown(text: str) -> str:
    return text.replace("\n", "\u21b5").replace(" ", "\u00b7")


def draw_record(trajectory: Any, tokenizer: Any, path: str | Path, *, title: str, keep: int = 10, width: int = 150) -> Path:
    """Draw ``trajectory`` token by token into ``path`` (PNG); masked spans longer than
    ``2 * keep`` tokens show their first and last ``keep``; ``width`` characters a line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch, Rectangle

    rows: list[list[tuple[str, str]]] = [[]]  # per line: (kind, shown text) boxes
    used = 0

    def put(kind: str, text: str, *, newline_after: bool = False) -> None:
        nonlocal used
        if used + len(text) > width and rows[-1]:
            rows.append([])
            used = 0
        rows[-1].append((kind, text))
        used += len(text) + 1
        if newline_after:
            rows.append([])
            used = 0

    for kind, ids in _spans(trajectory):
        pieces = [tokenizer.decode([i]) for i in ids]
        if kind != "generated" and len(pieces) > 2 * keep:
            head, tail = pieces[:keep], pieces[-keep:]
            for p in head:
                put(kind, _shown(p), newline_after="\n" in p)
            put("gap", f" \u2026 {len(pieces) - 2 * keep:,} tokens \u2026 ")
            pieces = tail
        for p in pieces:
            put(kind, _shown(p), newline_after="\n" in p)
    rows = [r for r in rows if r]

    char_w, line_h = 0.0056, 1.0
    fig_h = 0.26 * len(rows) + 1.3
    fig, ax = plt.subplots(figsize=(13, fig_h))
    ax.set_xlim(0, 1)
    ax.set_ylim(len(rows) * line_h + 0.2, -0.2)
    ax.axis("off")
    for y, row in enumerate(rows):
        x = 0.0
        for kind, text in row:
            w = char_w * len(text)
            if kind == "gap":
                ax.text(x, y + 0.5, text, fontsize=7, family="monospace", va="center", style="italic", color="#555555")
            else:
                ax.add_patch(Rectangle((x, y + 0.08), w, 0.84, facecolor=COLORS[kind], edgecolor="#888888", linewidth=0.4))
                ax.text(x + char_w * 0.02, y + 0.5, text, fontsize=7, family="monospace", va="center")
            x += w + char_w
    counts = {k: sum(len(ids) for kind, ids in _spans(trajectory) if kind == k) for k in COLORS}
    ax.legend(
        handles=[Patch(facecolor=COLORS[k], edgecolor="#888888", label=f"{LABELS[k]}: {counts[k]:,} tokens") for k in COLORS],
        loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=1, fontsize=8, frameon=False,
    )
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def tool_episode_picture(path: str | Path, *, template: str = "hermes") -> Path:
    """The oracle's tool-call episode of the first two-hop synthwiki train question of a
    1,000-passage world (Search-R1, top-2 documents), recorded with SmolLM2's tokenizer and
    ``template``, drawn by :func:`draw_record`."""
    import gymnasium as gym

    from searchgym.agents.driver import Task, run_episodes
    from searchgym.agents.oracle import SynthWikiOracle
    from searchgym.envs import search_env
    from searchgym.lm.chat_templates import install_chat_template, template_by_name
    from searchgym.lm.models import smollm2_tokenizer
    from searchgym.training.sft import TeacherAgent

    tokenizer = smollm2_tokenizer()
    install_chat_template(tokenizer, template)
    options = {"action_format": "tools", "tool_parser": template_by_name(template).tool_parser, "top_k": 2,
               "corpus_options": {"seed": 7, "num_passages": 1000}}
    env = gym.make("searchgym/SearchR1-v0", **options)
    example = next(ex for ex in search_env(env).examples if ex.metadata.get("hops") == 2)
    agent = TeacherAgent(SynthWikiOracle.for_env(env), tokenizer, search_env(env).protocol)
    (result,) = run_episodes([env], agent, [Task(example.id, 0)], keep_trajectories=True)
    record = result.trajectory
    same = "equals" if record.render_mismatch is None else f"differs from ({record.render_mismatch})"
    title = (f"One Search-R1 episode through tool calls, as the trainer sees it: SmolLM2's tokenizer, the {template} template, "
             f"{len(record):,} tokens\n(the synthwiki oracle's turns; the record {same} a fresh render of the whole conversation)")
    return draw_record(record, tokenizer, path, title=title)


if __name__ == "__main__":
    print(tool_episode_picture(sys.argv[1] if len(sys.argv) > 1 else "docs/tool-tokens.png"))
