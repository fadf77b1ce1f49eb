"""The architecture, drawn: one plotly figure of the whole encoder-decoder.

Hover a block for the shapes it takes and gives for one sentence pair; click its name
for the chapter that builds it. ``viz.architecture_figure`` is this module's
``architecture_figure``; the intro and chapter 8 draw it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go

# The chapter that builds each part (pages of the book, relative to chapters/).
CHAPTER_PAGES = {
    "embeddings": "02_tokens_and_embeddings",
    "positional": "03_positional_encoding",
    "attention": "04_scaled_dot_product_attention",
    "multi-head": "05_multi_head_attention",
    "masking": "06_masking",
    "block": "07_residual_norm_ffn",
    "stacks": "08_encoder_decoder",
    "decoding": "10_decoding_and_attention",
}
_CHAPTER_NUMBERS = {key: int(page[:2]) for key, page in CHAPTER_PAGES.items()}

# fill colours by kind of block; the masked self-attention gets a red dashed border
_COLOURS = {
    "embedding": "#f8d7e0",
    "attention": "#fde3c3",
    "norm": "#f6f0bf",
    "ffn": "#cfe4f6",
    "generator": "#e2d6f1",
    "softmax": "#d5eed5",
    "token": "#ffffff",
    "stack": "#f3f3f3",
}
_INK = "#333333"
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef]")
_LINK = "#1a55a8"
_HOVERLABEL = {"bgcolor": "#ffffff", "bordercolor": "#333333", "align": "left"}
_CAUSAL = "#c62828"


def _dims(values: Sequence[Any]) -> str:
    return "(" + ", ".join(str(v) for v in values) + ")"


class _Drawing:
    """Shapes, arrows, labels and hover targets of one diagram, in data units."""

    def __init__(self, link_prefix: str) -> None:
        self.shapes: list[dict[str, Any]] = []
        self.annotations: list[dict[str, Any]] = []
        self.traces: list[go.Scatter] = []
        self.link_prefix = link_prefix

    def link(self, chapter: str, text: str) -> str:
        href = f"{self.link_prefix}{CHAPTER_PAGES[chapter]}.html"
        return f'<a href="{href}" target="_self" style="color:{_LINK}">{text}</a>'

    def rect(self, x0, y0, x1, y1, fill, line=_INK, width=1.0, dash="solid"):
        self.shapes.append(
            {
                "type": "rect",
                "x0": x0,
                "y0": y0,
                "x1": x1,
                "y1": y1,
                "fillcolor": fill,
                "line": {"color": line, "width": width, "dash": dash},
                "layer": "below",
            }
        )

    def path(self, points, color=_INK, width=1.2, dash="solid"):
        d = "M " + " L ".join(f"{x},{y}" for x, y in points)
        self.shapes.append(
            {
                "type": "path",
                "path": d,
                "line": {"color": color, "width": width, "dash": dash},
                "layer": "below",
            }
        )

    def arrow(self, start, end, color=_INK, width=1.2):
        """A straight arrow; bent ones are a ``path`` then an arrow for the last leg."""
        self.annotations.append(
            {
                "x": end[0],
                "y": end[1],
                "ax": start[0],
                "ay": start[1],
                "xref": "x",
                "yref": "y",
                "axref": "x",
                "ayref": "y",
                "text": "",
                "showarrow": True,
                "arrowhead": 2,
                "arrowsize": 1.1,
                "arrowwidth": width,
                "arrowcolor": color,
                "standoff": 0,
            }
        )

    def text(self, x, y, text, size=12, anchor="center", color=_INK, **kw):
        if "hovertext" in kw:
            kw["hoverlabel"] = {"bgcolor": "#ffffff", "bordercolor": "#333333"}
        self.annotations.append(
            {
                "x": x,
                "y": y,
                "xref": "x",
                "yref": "y",
                "text": text,
                "showarrow": False,
                "xanchor": anchor,
                "font": {"size": size, "color": color},
                **kw,
            }
        )

    def hover(self, name, x0, y0, x1, y1, lines: Sequence[str]) -> str:
        """An invisible filled rectangle whose hover label is ``lines``; returns the
        label, for the annotations on top (a link catches the mouse: it needs its own).
        """
        text = "<br>".join([f"<b>{name}</b>", *lines])
        self.traces.append(
            go.Scatter(
                x=[x0, x1, x1, x0, x0],
                y=[y0, y0, y1, y1, y0],
                mode="lines",
                fill="toself",
                fillcolor="rgba(0,0,0,0)",
                line={"width": 0, "color": "rgba(0,0,0,0)"},
                hoveron="fills",
                hoverinfo="text",
                text=text,
                name=name,
                showlegend=False,
            )
        )
        return text

    def block(self, name, x0, y0, x1, y1, fill, label, lines, **rect_kw):
        self.rect(x0, y0, x1, y1, fill, **rect_kw)
        text = self.hover(name, x0, y0, x1, y1, lines)
        self.text((x0 + x1) / 2, (y0 + y1) / 2, label, hovertext=text)


def architecture_figure(
    d_model: int = 512,
    n_heads: int = 8,
    d_ff: int = 2048,
    n_layers: int = 6,
    *,
    src_tokens: Sequence[str] = ("私", "は", "太郎", "です"),
    tgt_tokens: Sequence[str] = ("⟨bos⟩", "I", "am"),
    out_tokens: Sequence[str] = ("I", "am", "Taro"),
    vocab_size: int | None = None,
    link_prefix: str = "",
    title: str | None = None,
    height: int = 960,
) -> go.Figure:
    """The encoder–decoder Transformer (post-LN, as in the paper), drawn with plotly.

    Hovering a block shows its tensor shapes for one sentence pair (B = 1, S source
    and T target tokens); each block's name links to the chapter that builds it, at
    ``link_prefix + "NN_name.html"`` ("chapters/" from the book's root page, "" from
    a chapter). The defaults are the paper's base sizes.
    """
    if d_model % n_heads:
        raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
    if len(out_tokens) != len(tgt_tokens):
        raise ValueError(
            f"out_tokens has {len(out_tokens)} tokens for {len(tgt_tokens)} decoder "
            "inputs: the decoder predicts one token per position"
        )
    B, S, T, D, H = 1, len(src_tokens), len(tgt_tokens), d_model, n_heads
    V = "V" if vocab_size is None else vocab_size
    src, tgt = _dims((B, S, D)), _dims((B, T, D))
    fig_title = title or (
        f"The encoder–decoder Transformer: {''.join(src_tokens)} → "
        f"{' '.join(out_tokens)}<br><span style='font-size:12px'>D = {D}, H = {H}, "
        f"d_ff = {d_ff}, N = {n_layers} layers per stack</span>"
    )
    dr = _Drawing(link_prefix)

    def attention_label(chapter, name, second, second_colour=_INK):
        return (
            dr.link(chapter, name)
            + f'<br><span style="font-size:10px;color:{second_colour}">{second}</span>'
        )

    sdpa = dr.link("attention", "softmax(QKᵀ/√d<sub>k</sub>)V")

    # columns: encoder centred at xe, decoder at xd; residual lines at xre / xrd
    xe, xd, half = 26.0, 72.0, 14.0
    xre, xrd = xe - half - 4.5, xd + half + 4.5

    def tokens(x, y, words, name, lines):
        # a CJK character is about twice as wide as a Latin one
        widths = [2.2 + sum(2.8 if _CJK.match(c) else 1.5 for c in w) for w in words]
        total = sum(widths) + 0.8 * (len(words) - 1)
        left = x - total / 2
        for w, width in zip(words, widths, strict=True):
            dr.rect(left, y - 2, left + width, y + 2, _COLOURS["token"])
            dr.text(left + width / 2, y, w, size=13)
            left += width + 0.8
        dr.hover(name, x - total / 2, y - 2, x + total / 2, y + 2, lines)

    def inputs(x, words, side, name_embed):
        n = len(words)
        shape = _dims((B, n, D))
        letter = "S" if side == "source" else "T"
        tokens(
            x, 2.5, words, f"{side.capitalize()} tokens",
            [f"token ids {_dims((B, n))}   (B, {letter})"],
        )  # fmt: skip
        dr.arrow((x, 4.5), (x, 9))
        dr.block(
            name_embed, x - half, 9, x + half, 15, _COLOURS["embedding"],
            dr.link("embeddings", name_embed),
            [
                f"ids {_dims((B, n))} → {shape}   (B, {letter}, D)",
                f"a learned table ({V}, {D}), rows scaled by √D",
                f"chapter {_CHAPTER_NUMBERS['embeddings']}",
            ],
        )  # fmt: skip
        dr.arrow((x, 15), (x, 19.6))
        # ⊕: the positional encoding is added, not concatenated
        pe_text = dr.hover(
            f"Positional encoding ({side})", x - 9, 18.8, x + 6.5, 23.2,
            [
                f"{shape} + PE[:{n}] ({n}, {D}) → {shape}",
                "sinusoids, no parameters; then dropout",
                f"chapter {_CHAPTER_NUMBERS['positional']}",
            ],
        )  # fmt: skip
        dr.traces.append(
            go.Scatter(
                x=[x], y=[21], mode="markers", hoverinfo="skip", showlegend=False,
                marker={"symbol": "circle-cross-open", "size": 20, "color": _INK,
                        "line": {"width": 1.5}},
            )
        )  # fmt: skip
        dr.text(x - 2.2, 21, dr.link("positional", "Positional<br>encoding"),
                anchor="right", size=11, hovertext=pe_text)  # fmt: skip
        # a small sine wave beside the label says "sinusoidal"
        wave = [(x + 2.6 + 0.5 * k, 21 + 1.2 * np.sin(k * np.pi / 3)) for k in range(9)]
        dr.path(wave, color="#7a7a7a", width=1)

    def residual(x_main, y_from, x_side, y_to, x_edge):
        dr.path([(x_main, y_from), (x_side, y_from), (x_side, y_to)], width=1.1)
        dr.arrow((x_side, y_to), (x_edge, y_to), width=1.1)
        dr.traces.append(
            go.Scatter(
                x=[x_main], y=[y_from], mode="markers", hoverinfo="skip",
                marker={"size": 5, "color": _INK}, showlegend=False,
            )
        )  # fmt: skip

    def add_norm(x, y0, shape, letters, where):
        dr.block(
            f"Add & Norm ({where})", x - half, y0, x + half, y0 + 4, _COLOURS["norm"],
            dr.link("block", "Add & Norm"),
            [
                f"LayerNorm(x + sublayer(x)): {shape} → {shape}   {letters}",
                f"normalises each token's {D} features (post-LN, as in the paper)",
                f"chapter {_CHAPTER_NUMBERS['block']}",
            ],
        )  # fmt: skip

    def ffn(x, y0, n, letter, side):
        shape = _dims((B, n, D))
        dr.block(
            f"Feed-forward ({side})", x - half, y0, x + half, y0 + 6, _COLOURS["ffn"],
            dr.link("block", "Feed-forward"),
            [
                f"{shape} → {_dims((B, n, d_ff))} → ReLU → {shape}",
                f"(B, {letter}, D) → (B, {letter}, d_ff) → (B, {letter}, D),"
                " each token on its own",
                f"chapter {_CHAPTER_NUMBERS['block']}",
            ],
        )  # fmt: skip

    def stack_frame(x, y0, y1, side):
        x0, x1 = x - half - 2.5, x + half + 2.5
        dr.rect(x0, y0, x1, y1, _COLOURS["stack"], line="#9a9a9a", dash="dot")
        bx = x0 - 3 if side == "left" else x1 + 3
        tick = 1.2 if side == "left" else -1.2
        dr.path([(bx + tick, y0), (bx, y0), (bx, y1), (bx + tick, y1)], width=1.5)
        name = "Encoder" if side == "left" else "Decoder"
        stack_text = dr.hover(
            f"{name} stack: {n_layers} layers",
            bx - 4 if side == "left" else bx, y0,
            bx if side == "left" else bx + 4, y1,
            [
                f"{n_layers} identical layers, each with its own weights",
                f"each maps {src if side == 'left' else tgt} to the same shape",
                f"chapter {_CHAPTER_NUMBERS['stacks']}",
            ],
        )  # fmt: skip
        dr.text(bx - 0.8 if side == "left" else bx + 0.8, (y0 + y1) / 2,
                dr.link("stacks", f"<b>{n_layers}×</b>"), size=16,
                anchor="right" if side == "left" else "left",
                hovertext=stack_text)  # fmt: skip
        # above the frame's outer corner, clear of the lines
        dr.text(x0, y1 + 1.9, dr.link("stacks", f"<b>{name}</b>"), anchor="left",
                size=13, hovertext=stack_text)  # fmt: skip

    # --- encoder -------------------------------------------------------------
    inputs(xe, src_tokens, "source", "Input embedding")
    stack_frame(xe, 27, 75, "left")
    dr.arrow((xe, 22.4), (xe, 33))
    residual(xe, 30, xre, 47, xe - half)
    dr.block(
        "Multi-head self-attention", xe - half, 33, xe + half, 41,
        _COLOURS["attention"],
        attention_label("multi-head", "Multi-head<br>self-attention", sdpa),
        [
            f"{src} → {src}   (B, S, D)",
            f"weights {_dims((B, H, S, S))}   (B, H, S, S)",
            f"Q = K = V = x; {H} heads of size D/H = {D // H}",
            f"chapters {_CHAPTER_NUMBERS['attention']}–"
            f"{_CHAPTER_NUMBERS['multi-head']}",
        ],
    )  # fmt: skip
    dr.arrow((xe, 41), (xe, 45))
    add_norm(xe, 45, src, "(B, S, D)", "encoder, after self-attention")
    dr.arrow((xe, 49), (xe, 55))
    residual(xe, 51.5, xre, 67, xe - half)
    ffn(xe, 55, S, "S", "encoder")
    dr.arrow((xe, 61), (xe, 65))
    add_norm(xe, 65, src, "(B, S, D)", "encoder, after the FFN")

    # --- the memory: encoder output → every decoder layer's cross-attention ----
    x_gap, y_mem, y_cross = (xe + xd) / 2 + 0.5, 80.0, 59.0
    dr.path([(xe, 69), (xe, y_mem), (x_gap, y_mem), (x_gap, y_cross)], width=1.8)
    dr.arrow((x_gap, y_cross), (xd - half, y_cross), width=1.8)
    dr.text((xe + x_gap) / 2, y_mem + 2, f"memory {src}", size=12)
    dr.text(x_gap + 0.6, y_cross + 1.6, "K, V", size=10, anchor="left")
    dr.hover(
        "Memory (the encoder's output)", xe - 2, y_mem - 1, x_gap + 1, y_mem + 3.5,
        [
            f"{src}   (B, S, D): one vector per source token",
            f"computed once, read by the cross-attention of all {n_layers} "
            "decoder layers",
            f"chapter {_CHAPTER_NUMBERS['stacks']}",
        ],
    )  # fmt: skip

    # --- decoder -------------------------------------------------------------
    inputs(xd, tgt_tokens, "target", "Output embedding")
    stack_frame(xd, 27, 97, "right")
    dr.arrow((xd, 22.4), (xd, 33))
    residual(xd, 30, xrd, 47, xd + half)
    dr.block(
        "Masked multi-head self-attention", xd - half, 33, xd + half, 41,
        _COLOURS["attention"],
        attention_label(
            "masking", "Masked multi-head<br>self-attention",
            "causal: position t sees ≤ t", _CAUSAL,
        ),
        [
            f"{tgt} → {tgt}   (B, T, D)",
            f"weights {_dims((B, H, T, T))}   (B, H, T, T)",
            f"causal mask ({T}, {T}): no token sees a later one",
            f"chapter {_CHAPTER_NUMBERS['masking']}",
        ],
        line=_CAUSAL, width=2.0, dash="dash",
    )  # fmt: skip
    # the causal mask itself, beside the block: row = query, column = key
    cell_w, cell_h, gx, gy = 1.5, 1.8, x_gap - 1, 40.2
    for i in range(T):
        for j in range(T):
            dr.rect(
                gx + j * cell_w, gy - (i + 1) * cell_h,
                gx + (j + 1) * cell_w, gy - i * cell_h,
                _CAUSAL if j <= i else "#ffffff", line="#999999", width=0.5,
            )  # fmt: skip
    dr.text(
        gx + T * cell_w / 2,
        gy - T * cell_h - 2.4,
        "causal<br>mask",
        size=10,
        color=_CAUSAL,
    )
    dr.arrow((xd, 41), (xd, 45))
    add_norm(xd, 45, tgt, "(B, T, D)", "decoder, after masked self-attention")
    dr.arrow((xd, 49), (xd, 55))
    residual(xd, 51.5, xrd, 69, xd + half)
    dr.text(xd + 1, 53.2, "Q", size=10, anchor="left")
    dr.block(
        "Multi-head cross-attention", xd - half, 55, xd + half, 63,
        _COLOURS["attention"],
        attention_label(
            "multi-head", "Multi-head<br>cross-attention",
            "Q: decoder · K, V: memory",
        ),
        [
            f"Q {tgt}, K = V = memory {src} → {tgt}",
            f"weights {_dims((B, H, T, S))}   (B, H, T, S)",
            "each target position reads every source token",
            f"chapters {_CHAPTER_NUMBERS['attention']}–"
            f"{_CHAPTER_NUMBERS['multi-head']}",
        ],
    )  # fmt: skip
    dr.arrow((xd, 63), (xd, 67))
    add_norm(xd, 67, tgt, "(B, T, D)", "decoder, after cross-attention")
    dr.arrow((xd, 71), (xd, 77))
    residual(xd, 73.5, xrd, 89, xd + half)
    ffn(xd, 77, T, "T", "decoder")
    dr.arrow((xd, 83), (xd, 87))
    add_norm(xd, 87, tgt, "(B, T, D)", "decoder, after the FFN")

    # --- generator, softmax, the predicted tokens -------------------------------
    dr.arrow((xd, 91), (xd, 101))
    logits = _dims((B, T, V))
    dr.block(
        "Linear (generator)", xd - half, 101, xd + half, 106, _COLOURS["generator"],
        dr.link("decoding", "Linear (generator)"),
        [
            f"{tgt} → {logits}   (B, T, V): a score per target word",
            f"chapter {_CHAPTER_NUMBERS['decoding']}",
        ],
    )  # fmt: skip
    dr.arrow((xd, 106), (xd, 109))
    dr.block(
        "Softmax", xd - half, 109, xd + half, 114, _COLOURS["softmax"],
        dr.link("decoding", "Softmax"),
        [
            f"{logits} → {logits}: each position's row sums to 1",
            f"chapter {_CHAPTER_NUMBERS['decoding']}",
        ],
    )  # fmt: skip
    dr.arrow((xd, 114), (xd, 117.5))
    tokens(
        xd, 119.5, out_tokens, "Predicted next tokens",
        [
            f"argmax over the vocabulary: {logits} → ids {_dims((B, T))}   (B, T)",
            f"position t predicts token t + 1: {' '.join(tgt_tokens)} → "
            f"{' '.join(out_tokens)}",
            "at translation time each new word is fed back, until ⟨eos⟩ "
            f"(chapter {_CHAPTER_NUMBERS['decoding']})",
        ],
    )  # fmt: skip

    dr.text(
        -3, 104,
        "Hover over a block: its tensor shapes<br>"
        f"(B = {B}, S = {S} source, T = {T} target tokens).<br>"
        "Click a blue name: the chapter that builds it.",
        anchor="left", size=12, align="left",
    )  # fmt: skip
    fig = go.Figure(data=dr.traces)
    fig.update_layout(
        title={"text": fig_title, "font": {"size": 14}},
        shapes=dr.shapes,
        annotations=dr.annotations,
        xaxis={"range": [-4, 104], "visible": False, "fixedrange": True},
        yaxis={"range": [-1, 123], "visible": False, "fixedrange": True},
        height=height,
        margin={"l": 10, "r": 10, "t": 64, "b": 10},
        plot_bgcolor="white",
        dragmode=False,
        hovermode="closest",
        hoverlabel=_HOVERLABEL,
        showlegend=False,
    )
    return fig
