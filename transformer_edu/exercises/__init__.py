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
checkers, in the order the grader checks their exercises. ``use_attention(model,
fn)`` plugs an attention function into a model.

One module per chapter holds its checkers, the mistakes they recognise and that
chapter's bugs (chapter 11's "build it yourself" exercises: ``assembly``, the
feed-forward network and what the three share, ``use_layers`` among it; ``blocks``, the
encoder and decoder layers; ``whole_model``); ``harness`` is what they share.
Each checker is registered by the decorator above it (``registry``): the exercise of
chapter 11 it grades, the name the student defines, its points; ``CHECKERS`` and the
grader's table of exercises are read from the registry, and each checker is
importable from here under its name. ``zoo`` registers the bugs the same way.
"""

# the chapters' modules: importing each one registers its checkers and its bugs
from . import (  # noqa: F401
    assembly,
    attention,
    bleu,
    blocks,
    decoding,
    embedding,
    heads,
    masks,
    norm,
    positional,
    sampling,
    scaling,
    scores,
    training,
    whole_model,
)
from .assembly import load_package_weights, use_layers
from .attention import use_attention
from .blocks import DecoderLayerParts, EncoderLayerParts
from .decoding import BOS, EOS
from .harness import CALLED_REFERENCE, CheckResult, allow_references
from .registry import CHECKERS
from .training import reference_loop
from .whole_model import TransformerParts
from .zoo import BUG_ZOO, Bug

# each checker and each bug of the zoo under its own name (check_causal_mask, …;
# attention_no_scaling, …): the registry and the zoo filled themselves as the modules
# above were imported, so neither list is written out here
_BUGS = {bug.implementation.__name__: bug.implementation for bug in BUG_ZOO.values()}
_clash = (set(CHECKERS) & set(_BUGS)) | ((set(CHECKERS) | set(_BUGS)) & set(globals()))
assert not _clash, f"names taken twice: {sorted(_clash)}"
globals().update(CHECKERS)
globals().update(_BUGS)

__all__ = [
    "BOS", "BUG_ZOO", "CALLED_REFERENCE", "CHECKERS", "DecoderLayerParts", "EOS",
    "Bug", "CheckResult", "EncoderLayerParts", "TransformerParts",
    "allow_references", "load_package_weights", "reference_loop", "use_attention",
    "use_layers",
    *CHECKERS,  # the checkers, in the order the grader checks their exercises
    *_BUGS,  # the bugs of the zoo (also in BUG_ZOO[name].implementation)
]  # fmt: skip
