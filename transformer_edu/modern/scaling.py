"""A training run's compute, counted as the scaling laws count it (chapter 13).

C ≈ 6 N D (Kaplan et al., 2020): a forward pass costs about 2 FLOPs per parameter a
token passes through (a multiply and an add), the backward pass twice that. N leaves
out the embeddings and the output layer, and the attention scores' own products (small
for short sentences), as Kaplan et al. do. In an encoder–decoder a source token
passes through the encoder only and a target token through the decoder only.
"""

from __future__ import annotations


def layer_params(d_model: int, d_ff: int, cross_attention: bool) -> int:
    """Parameters of one layer of the book's model: an encoder layer, or with
    ``cross_attention`` a decoder layer (biases and LayerNorms included)."""
    attention = 4 * (d_model * d_model + d_model)  # W_q, W_k, W_v, W_o and biases
    ffn = d_model * d_ff + d_ff + d_ff * d_model + d_model  # W₁, b₁, W₂, b₂
    norm = 2 * d_model  # γ and β
    if cross_attention:
        return 2 * attention + ffn + 3 * norm
    return attention + ffn + 2 * norm


def non_embedding_params(d_model: int, n_layers: int, d_ff: int) -> tuple[int, int]:
    """(encoder, decoder) parameters of the post-LN encoder–decoder with ``n_layers``
    layers in each stack: everything but the embeddings and the generator."""
    return (
        n_layers * layer_params(d_model, d_ff, cross_attention=False),
        n_layers * layer_params(d_model, d_ff, cross_attention=True),
    )


def training_flops(
    d_model: int, n_layers: int, d_ff: int, src_tokens: float, tgt_tokens: float
) -> float:
    """C ≈ 6 · (N_encoder · source tokens + N_decoder · target tokens)."""
    n_encoder, n_decoder = non_embedding_params(d_model, n_layers, d_ff)
    return 6.0 * (n_encoder * src_tokens + n_decoder * tgt_tokens)
