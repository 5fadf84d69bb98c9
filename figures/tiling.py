"""FlashAttention's blocks over the GPU's memory hierarchy: HBM above, SRAM below."""

from __future__ import annotations

from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle

from .style import (
    INK,
    KEY_COLORS,
    MIN_FONT_PT,
    MUTED,
    PAGE_WIDTH,
    new_figure,
    styled,
)

#: One colour per role, from the house palette: queries, keys and values,
#: outputs, and the scores and weights that never leave the chip.
BLOCK_COLORS = {
    "Q": KEY_COLORS[0],
    "K": KEY_COLORS[1],
    "V": KEY_COLORS[1],
    "O": KEY_COLORS[2],
    "S": KEY_COLORS[3],
}
#: Left edge of each matrix's column, in axes units (0 to 100 across).
COLUMNS = {"Q": 6.5, "K": 30.0, "V": 53.5, "O": 75.5}
BAR_WIDTH = 8.0
#: The quiet fill of blocks that the current step does not touch.
IDLE_FILL = "#ececec"
#: Vertical layout, in axes units (0 at the bottom, 100 at the top).
HBM_BOX = (1.0, 57.0, 98.0, 42.0)  # x, y, width, height
SRAM_BOX = (1.0, 1.0, 98.0, 37.0)
BAR_TOP, BAR_BOTTOM = 90.0, 61.0
SRAM_BLOCK_Y = 28.0


def _box(ax, rect, title, *, title_at="top"):
    x, y, w, h = rect
    ax.add_patch(
        FancyBboxPatch(
            (x, y),
            w,
            h,
            boxstyle="round,pad=0,rounding_size=2",
            facecolor="none",
            edgecolor=MUTED,
            linewidth=1.2,
            clip_on=False,
        )
    )
    # SRAM's title sits at its bottom edge, clear of the arrows coming in.
    ty, va = (y + h - 2.2, "top") if title_at == "top" else (y + 2.2, "bottom")
    ax.text(x + 2, ty, title, ha="left", va=va, fontsize=9.5, color=INK)


def _rect(ax, rect, facecolor, edgecolor, *, linewidth=0.8, **kwargs):
    """A rectangle (x, y, width, height), drawn over the axes' edges (no clipping)."""
    x, y, w, h = rect
    ax.add_patch(
        Rectangle(
            (x, y),
            w,
            h,
            facecolor=facecolor,
            edgecolor=edgecolor,
            linewidth=linewidth,
            clip_on=False,
            **kwargs,
        )
    )


def _arrow(ax, start, end, color):
    ax.add_patch(
        FancyArrowPatch(
            start,
            end,
            arrowstyle="-|>,head_length=4,head_width=2.5",
            color=color,
            linewidth=1.6,
            shrinkA=0,
            shrinkB=0,
            clip_on=False,
        )
    )


@styled
def tiling_figure(hbm_gb=(40, 80), sram_kb=192, blocks=6, query_block=1, key_block=3):
    """One step of FlashAttention-2's loops, drawn over HBM and on-chip SRAM.

    Above, HBM holds ``Q``, ``K``, ``V`` and ``O`` whole, each cut into
    ``blocks`` blocks of rows. Below, the SRAM of one streaming multiprocessor
    holds one query block (loaded once for the outer loop), one key block and
    one value block (streamed by the inner loop), the running output block with
    its statistics ``m`` and ``ℓ``, and the block of scores ``S`` and weights
    ``P`` they produce, which is never written back. The output block goes
    back to HBM once, with its log-sum-exp ``lse = m + log ℓ``.

    Every text is at least :data:`figures.style.MIN_FONT_PT` and nothing is
    a super- or subscript, so the figure reads on a 390 px phone.

    Parameters
    ----------
    hbm_gb : (int, int)
        The GPU's HBM size range, for the label (the A100's by default).
    sram_kb : int
        SRAM per streaming multiprocessor, for the label.
    blocks : int
        Blocks per matrix.
    query_block, key_block : int
        Which blocks (from the top, 0-based) the step shows.

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> fig = tiling_figure(hbm_gb=(40, 80), sram_kb=192)
    >>> texts = fig.axes[0].texts
    >>> [t.get_text() for t in texts][:2]
    ['HBM, off chip: 40–80 GB', 'outer loop: i, inner loop: j']
    >>> min(t.get_fontsize() for t in texts) >= MIN_FONT_PT
    True
    """
    if not 0 <= query_block < blocks or not 0 <= key_block < blocks:
        raise ValueError(
            f"query_block and key_block must lie in [0, blocks), got "
            f"query_block={query_block}, key_block={key_block}, blocks={blocks}"
        )
    fig, ax = new_figure(PAGE_WIDTH, 3.9)
    ax.set_xlim(0, 100)
    ax.set_ylim(0, 100)
    ax.axis("off")
    _box(ax, HBM_BOX, f"HBM, off chip: {hbm_gb[0]}–{hbm_gb[1]} GB")
    x, y, w, h = HBM_BOX
    ax.text(
        x + w - 2, y + h - 2.2, "outer loop: i, inner loop: j",
        ha="right", va="top", fontsize=MIN_FONT_PT, color=INK,
    )  # fmt: skip
    _box(
        ax,
        SRAM_BOX,
        f"SRAM, on chip: {sram_kb} KB per multiprocessor",
        title_at="bottom",
    )

    block_h = (BAR_TOP - BAR_BOTTOM) / blocks
    lit = {"Q": query_block, "K": key_block, "V": key_block, "O": query_block}
    for name, x in COLUMNS.items():
        ax.text(
            x - 1.2, BAR_TOP - block_h / 2, name,
            ha="right", va="center", fontsize=11, fontweight="bold", color=INK,
        )  # fmt: skip
        # One rectangle per matrix and one path for its block edges keep the
        # SVG small; the lit block is drawn over them.
        _rect(ax, (x, BAR_BOTTOM, BAR_WIDTH, BAR_TOP - BAR_BOTTOM), IDLE_FILL, MUTED)
        edges_y = [BAR_BOTTOM + t * block_h for t in range(1, blocks)]
        ax.plot(
            [v for _ in edges_y for v in (x, x + BAR_WIDTH, None)],
            [v for y in edges_y for v in (y, y, None)],
            color=MUTED,
            linewidth=0.8,
            clip_on=False,
        )
        lit_y = BAR_TOP - (lit[name] + 1) * block_h
        _rect(ax, (x, lit_y, BAR_WIDTH, block_h), BLOCK_COLORS[name], INK)
        y_lit = BAR_TOP - (lit[name] + 0.5) * block_h
        block_label = "block i" if name in ("Q", "O") else "block j"
        ax.text(
            x + BAR_WIDTH + 1.2, y_lit, block_label, va="center", fontsize=MIN_FONT_PT
        )

        # The same block on chip, straight below, and the arrow between them.
        _rect(ax, (x, SRAM_BLOCK_Y, BAR_WIDTH, block_h), BLOCK_COLORS[name], INK)
        hbm_end, chip_end = BAR_BOTTOM - 0.5, SRAM_BLOCK_Y + block_h + 0.5
        centre = x + BAR_WIDTH / 2
        if name == "O":
            _arrow(ax, (centre, chip_end), (centre, hbm_end), INK)
        else:
            _arrow(ax, (centre, hbm_end), (centre, chip_end), INK)
        # The output goes back once, with the log-sum-exp that the backward
        # pass reads (FlashAttention-2's Algorithm 1, its last write).
        how = {"Q": "load once", "K": "load each j", "V": "load each j"}.get(
            name, "write once,\nwith the\nlog-sum-exp"
        )
        ax.text(
            centre + 1.5, 46.5, how,
            va="center", fontsize=MIN_FONT_PT, color=INK, linespacing=1.15,
        )  # fmt: skip

    ax.text(
        COLUMNS["O"] + BAR_WIDTH + 1.2, SRAM_BLOCK_Y + block_h / 2, "m, ℓ",
        va="center", fontsize=MIN_FONT_PT, color=INK,
    )  # fmt: skip
    # The scores and weights of blocks (i, j): made, used and dropped on chip.
    s_x, s_w = COLUMNS["K"], COLUMNS["V"] + BAR_WIDTH - COLUMNS["K"]
    s_color = BLOCK_COLORS["S"]
    _rect(ax, (s_x, 11.0, s_w, 11.5), s_color, s_color, linewidth=1.2, alpha=0.25)
    ax.text(
        s_x + s_w / 2, 16.75, "S and P of blocks i, j:\nnever written to HBM",
        ha="center", va="center", fontsize=MIN_FONT_PT, color=INK, linespacing=1.15,
    )  # fmt: skip
    return fig
