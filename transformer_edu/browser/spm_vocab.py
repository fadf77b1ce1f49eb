"""A SentencePiece model as the JSON file ``static/spm.js`` reads in the browser.

``write_spm_vocab(model_path, out_path)`` reads the ``.model`` protobuf with the
``sentencepiece`` package's own ``sentencepiece_model_pb2`` and writes what encoding and
decoding need: pieces, scores, types, the normaliser spec (its precompiled charsmap, a
Darts double-array trie + NUL-ended strings, kept byte for byte) and the special ids.
Only what ``spm.js`` implements is accepted: a unigram model without user-defined
pieces, whitespace as a prefix, no denormaliser.
"""

from __future__ import annotations

import base64
import json
import struct
from pathlib import Path

FORMAT = "transformer_edu spm-vocab 1"  # spm.js refuses a file of another format
DEFAULT_UNK_SURFACE = " \u2047 "  # sentencepiece's kDefaultUnknownSymbol
NORMAL, USER_DEFINED = 1, 4  # ModelProto.SentencePiece.Type


def _model_proto(model: bytes):
    from sentencepiece import sentencepiece_model_pb2  # needs protobuf (onnx has it)

    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(model)
    return proto


def float32_text(x: float) -> float:
    """The shortest decimal that reads back as the same float32, after JavaScript's
    double parse then Float32Array's rounding (checked, not assumed)."""
    f32 = struct.unpack("<f", struct.pack("<f", x))[0]
    for digits in range(1, 18):
        candidate = float(f"{f32:.{digits}g}")
        if struct.unpack("<f", struct.pack("<f", candidate))[0] == f32:
            return candidate
    return f32  # the float32 itself, exactly as a double


def _check_supported(proto) -> None:
    trainer, norm = proto.trainer_spec, proto.normalizer_spec
    problems = []
    if trainer.model_type != trainer.UNIGRAM:
        problems.append(f"model_type={trainer.ModelType.Name(trainer.model_type)}")
    if trainer.treat_whitespace_as_suffix:
        problems.append("treat_whitespace_as_suffix=True")
    user = [p.piece for p in proto.pieces if p.type == USER_DEFINED]
    if user:
        problems.append(f"user-defined pieces {user[:5]}")
    if proto.denormalizer_spec.precompiled_charsmap:
        problems.append(f"a denormaliser ({proto.denormalizer_spec.name!r})")
    if norm.normalization_rule_tsv and not norm.precompiled_charsmap:
        problems.append("normalisation rules not compiled into a charsmap")
    if problems:
        raise ValueError(f"spm.js cannot run this SentencePiece model: {problems}")


def spm_vocab(model: bytes) -> dict:
    """The JSON object ``spm.js`` reads, from the bytes of a ``.model`` file."""
    proto = _model_proto(model)
    _check_supported(proto)
    trainer, norm = proto.trainer_spec, proto.normalizer_spec
    unk = trainer.unk_surface if trainer.HasField("unk_surface") else None
    return {
        "format": FORMAT,
        "pieces": [p.piece for p in proto.pieces],
        "scores": [float32_text(p.score) for p in proto.pieces],
        # one digit per piece, ModelProto.SentencePiece.Type: 1 normal, 2 unknown,
        # 3 control, 4 user defined, 5 unused, 6 byte
        "types": "".join(str(p.type) for p in proto.pieces),
        "unk_id": trainer.unk_id,
        "unk_surface": DEFAULT_UNK_SURFACE if unk is None else unk,
        "byte_fallback": trainer.byte_fallback,
        "normalizer": {
            "name": norm.name,
            "add_dummy_prefix": norm.add_dummy_prefix,
            "remove_extra_whitespaces": norm.remove_extra_whitespaces,
            "escape_whitespaces": norm.escape_whitespaces,
            # <trie size, uint32 LE><double-array units, uint32 LE><normalised strings>
            "precompiled_charsmap": base64.b64encode(
                norm.precompiled_charsmap
            ).decode(),
        },
    }


def write_spm_vocab(model_path: str | Path, out_path: str | Path) -> Path:
    """Write the vocabulary file of the ``.model`` at ``model_path``; returns its path."""
    vocab = spm_vocab(Path(model_path).read_bytes())
    out = Path(out_path)
    out.write_text(
        json.dumps(vocab, ensure_ascii=False, separators=(",", ":")), encoding="utf8"
    )
    return out
