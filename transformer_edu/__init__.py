"""transformer_edu: the encoder-decoder Transformer, built to be read.

Where things are: ``model/`` the paper's model; ``modern/`` what came after it
(chapter 13); ``toy/`` and ``tatoeba/`` the two tasks (data, training, checkpoints,
trained weights); ``decoding`` greedy and beam search; ``metrics`` BLEU and chrF;
``viz/`` the figures; ``exercises/`` the checkers of chapter 11 and ``grading/`` the
class grader; ``browser/`` what the pages run without a kernel; ``bench/`` the
benchmarks; ``cli`` the command line; ``devices``, ``doctor`` and ``seeds``.

Mask polarity everywhere in this package: boolean, True = "may attend".
"""

from .model.attention import (
    GroupedQueryAttention,
    MultiHeadAttention,
    scaled_dot_product_attention,
)
from .model.config import TransformerConfig
from .model.embeddings import (
    LearnedPositionalEncoding,
    NoPositionalEncoding,
    SinusoidalPositionalEncoding,
    TokenEmbedding,
    sinusoidal_table,
)
from .model.feed_forward import GatedFeedForward, PositionwiseFeedForward
from .model.layers import DecoderLayer, EncoderLayer
from .model.masks import (
    causal_mask,
    combine_masks,
    from_torch_mask,
    key_padding_from_torch,
    padding_mask,
    target_mask,
    to_torch_mask,
)
from .model.norm import LayerNorm, RMSNorm
from .model.transformer import (
    Decoder,
    Encoder,
    Generator,
    Transformer,
    count_parameters,
    make_model,
)
from .modern.moe import MixtureOfExperts

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

from . import decoding  # noqa: E402
from .decoding import beam_search, greedy_decode, translate  # noqa: E402
from .model import seq2seq  # noqa: E402
from .model.seq2seq import Seq2Seq  # noqa: E402
from .modern.decoder_only import DecoderOnlyTranslator, make_decoder_only  # noqa: E402
from .toy import data, training  # noqa: E402
from .toy.data import Pair, Vocab, build_vocabs, load_corpus, segment  # noqa: E402
from .toy.training import TrainConfig, train, train_toy_model  # noqa: E402

__all__ += [
    "DecoderOnlyTranslator", "Pair", "Seq2Seq", "TrainConfig", "Vocab", "beam_search",
    "build_vocabs", "data", "decoding", "greedy_decode", "load_corpus",
    "make_decoder_only", "segment", "seq2seq", "train",
    "train_toy_model", "training", "translate",
]  # fmt: skip
