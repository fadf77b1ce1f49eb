"""transformer_edu: the encoder-decoder Transformer, built to be read.

Mask polarity everywhere in this package: boolean, True = "may attend".
"""

from .attention import (
    GroupedQueryAttention,
    MultiHeadAttention,
    scaled_dot_product_attention,
)
from .config import TransformerConfig
from .embeddings import (
    LearnedPositionalEncoding,
    NoPositionalEncoding,
    SinusoidalPositionalEncoding,
    TokenEmbedding,
    sinusoidal_table,
)
from .feed_forward import GatedFeedForward, PositionwiseFeedForward
from .layers import DecoderLayer, EncoderLayer
from .masks import (
    causal_mask,
    combine_masks,
    from_torch_mask,
    key_padding_from_torch,
    padding_mask,
    target_mask,
    to_torch_mask,
)
from .model import (
    Decoder,
    Encoder,
    Generator,
    Transformer,
    count_parameters,
    make_model,
)
from .moe import MixtureOfExperts
from .norm import LayerNorm, RMSNorm

__version__ = "0.1.0"

__all__ = [
    "Decoder", "DecoderLayer", "Encoder", "EncoderLayer", "GatedFeedForward",
    "Generator", "GroupedQueryAttention", "LayerNorm", "LearnedPositionalEncoding",
    "MixtureOfExperts", "MultiHeadAttention", "NoPositionalEncoding",
    "PositionwiseFeedForward", "RMSNorm", "SinusoidalPositionalEncoding",
    "TokenEmbedding", "Transformer", "TransformerConfig", "causal_mask",
    "combine_masks", "count_parameters", "from_torch_mask", "key_padding_from_torch",
    "make_model", "padding_mask", "scaled_dot_product_attention", "sinusoidal_table",
    "target_mask", "to_torch_mask",
]  # fmt: skip

from . import data, decoding, seq2seq, training  # noqa: E402
from .data import Pair, Vocab, build_vocabs, load_corpus, segment  # noqa: E402
from .decoder_only import DecoderOnlyTranslator, make_decoder_only  # noqa: E402
from .decoding import beam_search, greedy_decode, translate  # noqa: E402
from .seq2seq import Seq2Seq  # noqa: E402
from .training import TrainConfig, train, train_toy_model  # noqa: E402

__all__ += [
    "DecoderOnlyTranslator", "Pair", "Seq2Seq", "TrainConfig", "Vocab", "beam_search",
    "build_vocabs", "data", "decoding", "greedy_decode", "load_corpus",
    "make_decoder_only", "segment", "seq2seq", "train",
    "train_toy_model", "training", "translate",
]  # fmt: skip
