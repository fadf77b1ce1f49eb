"""Checkers for the classroom exercises, and a zoo of real bugs they catch.

A checker runs a learner's function (or class) on several cases against the package's
reference and answers in plain words: which case failed, expected against got, and a
hint that names the likely mistake. It never raises for a wrong answer, and an
exception inside the learner's code is reported, not raised::

    from transformer_edu.exercises import check_causal_mask

    def my_causal_mask(T):
        return torch.ones(T, T, dtype=torch.bool).tril()

    check_causal_mask(my_causal_mask)  # prints the verdict, returns a CheckResult

Conventions the learner's code follows (the package's own):

- masks are boolean with **True = "may attend"**, broadcastable to (B, H, T_q, T_k);
- ``fn(q, k, v, mask=None)`` may return ``out`` or ``(out, weights)``;
- a multi-head attention class ``MyMHA(d_model, n_heads)`` keeps its projections in
  four ``nn.Linear(d_model, d_model)`` named ``w_q, w_k, w_v, w_o`` (or the package's
  ``q_proj, k_proj, v_proj, out_proj``); the checker writes its own weights into them.

While the learner's code runs, a checker watches for calls to the references of its
exercise: the package's own implementations (``causal_mask`` for
``check_causal_mask``) and PyTorch's (``nn.LayerNorm``, ``F.layer_norm``,
``torch.layer_norm`` and ``torch.ops.aten.native_layer_norm`` for
``check_layer_norm``). Such a call fails the check with a message that names it,
however it was reached: an alias, a subclass, a method, ``functools.partial``.
``allow_references()`` lifts that, for testing a checker against the package itself.

``BUG_ZOO`` maps a name to a small wrong implementation (:class:`Bug`), the checker
that catches it and a word its hint contains. ``CHECKERS`` maps checker names to
checkers. ``use_attention(model, fn)`` plugs an attention function into a model.

One module per chapter holds its checkers, the mistakes they recognise and that
chapter's bugs (chapter 11's "build it yourself" exercises: ``assembly``, the
feed-forward network and what the three share, ``use_layers`` among it; ``blocks``, the
encoder and decoder layers; ``whole_model``); ``harness`` is what they share, ``zoo``
the registry.
"""

from collections.abc import Callable

from .assembly import check_feed_forward, load_package_weights, use_layers
from .attention import (
    attention_mask_flipped,
    attention_mask_too_late,
    attention_neg_inf,
    attention_no_scaling,
    attention_scale_multiplied,
    attention_softmax_query_axis,
    attention_undefined_names,
    check_scaled_dot_product_attention,
    use_attention,
)
from .bleu import bleu_sentence_mean, check_corpus_bleu
from .blocks import (
    DecoderLayerCrossFromX,
    DecoderLayerParts,
    EncoderLayerNormInBranch,
    EncoderLayerParts,
    check_decoder_layer,
    check_encoder_layer,
)
from .decoding import (
    BOS,
    EOS,
    beam_rank_by_last_token,
    cache_step_not_reordered,
    check_beam_search,
    check_cached_beam_step,
    check_greedy_decode,
    check_length_penalty,
    greedy_first_position,
    length_penalty_no_offset,
)
from .embedding import check_token_embedding
from .harness import CALLED_REFERENCE, CheckResult, allow_references
from .heads import (
    MHAProjectionsInAList,
    MHAViewWithoutTranspose,
    check_combine_heads,
    check_multi_head_attention,
    check_split_heads,
    combine_heads_reshape_only,
    split_heads_view_only,
)
from .masks import (
    causal_mask_no_diagonal,
    causal_mask_torch_polarity,
    causal_mask_upper,
    check_causal_mask,
    check_padding_mask,
    check_transformer_masks,
    masks_causal_unused,
    masks_cross_from_target,
    padding_mask_pad_zero,
)
from .norm import (
    check_layer_norm,
    layer_norm_eps_outside,
    layer_norm_unbiased,
    layer_norm_wrong_axis,
)
from .positional import (
    add_pe_seq_first,
    check_add_positional_encoding,
    check_positional_encoding,
    pe_angles_zeroed,
    pe_exponent_i,
    pe_sin_cos_swapped,
)
from .sampling import check_top_p, top_p_drops_crossing_token
from .scaling import (
    check_training_flops,
    training_flops_both_stacks,
    training_flops_forward_only,
)
from .scores import check_score_function
from .training import (
    check_label_smoothing,
    check_noam_lr,
    check_train_loop,
    reference_loop,
    train_loop_no_zero_grad,
)
from .whole_model import TransformerNoScale, TransformerParts, check_transformer_forward
from .zoo import BUG_ZOO, Bug

CHECKERS: dict[str, Callable[..., CheckResult]] = {
    f.__name__: f
    for f in (
        check_score_function,
        check_token_embedding,
        check_positional_encoding,
        check_add_positional_encoding,
        check_scaled_dot_product_attention,
        check_split_heads,
        check_combine_heads,
        check_multi_head_attention,
        check_causal_mask,
        check_padding_mask,
        check_layer_norm,
        check_feed_forward,
        check_encoder_layer,
        check_transformer_masks,
        check_decoder_layer,
        check_transformer_forward,
        check_label_smoothing,
        check_noam_lr,
        check_train_loop,
        check_greedy_decode,
        check_training_flops,
        check_length_penalty,
        check_beam_search,
        check_cached_beam_step,
        check_top_p,
        check_corpus_bleu,
    )
}

__all__ = [
    "BOS", "BUG_ZOO", "CALLED_REFERENCE", "CHECKERS", "DecoderLayerParts", "EOS",
    "Bug", "CheckResult", "EncoderLayerParts", "TransformerParts",
    "allow_references", "load_package_weights", "reference_loop", "use_attention",
    "use_layers",
    # the checkers, in chapter order
    "check_score_function", "check_token_embedding", "check_positional_encoding",
    "check_add_positional_encoding", "check_scaled_dot_product_attention",
    "check_split_heads", "check_combine_heads", "check_multi_head_attention",
    "check_causal_mask", "check_padding_mask", "check_layer_norm",
    "check_feed_forward", "check_encoder_layer", "check_transformer_masks",
    "check_decoder_layer", "check_transformer_forward", "check_label_smoothing",
    "check_noam_lr", "check_train_loop", "check_greedy_decode",
    "check_training_flops", "check_length_penalty", "check_beam_search",
    "check_cached_beam_step", "check_top_p", "check_corpus_bleu",
    # the bugs of the zoo (also in BUG_ZOO[name].implementation)
    "DecoderLayerCrossFromX", "EncoderLayerNormInBranch", "MHAProjectionsInAList",
    "TransformerNoScale", "MHAViewWithoutTranspose", "add_pe_seq_first",
    "attention_mask_flipped", "attention_mask_too_late", "attention_neg_inf",
    "attention_no_scaling", "attention_scale_multiplied",
    "attention_softmax_query_axis", "attention_undefined_names",
    "beam_rank_by_last_token", "bleu_sentence_mean", "cache_step_not_reordered",
    "causal_mask_no_diagonal", "causal_mask_torch_polarity", "causal_mask_upper",
    "combine_heads_reshape_only", "greedy_first_position", "layer_norm_eps_outside",
    "layer_norm_unbiased", "layer_norm_wrong_axis", "length_penalty_no_offset",
    "masks_causal_unused", "masks_cross_from_target", "padding_mask_pad_zero",
    "pe_angles_zeroed", "pe_exponent_i", "pe_sin_cos_swapped",
    "split_heads_view_only", "top_p_drops_crossing_token",
    "train_loop_no_zero_grad", "training_flops_both_stacks",
    "training_flops_forward_only",
]  # fmt: skip
