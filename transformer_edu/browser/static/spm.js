// SentencePiece in the browser: segment text and decode ids exactly as Python's
// `sentencepiece` 0.2.2 does with the same unigram model.
//
// An ES module with no imports; it runs in a page (an anywidget front end imports it)
// and in Node (the tests: tests/browser/test_spm_js.py).
//
// Input: the JSON object that transformer_edu/browser/spm_vocab.py writes from a
// `.model` file (`write_spm_vocab(model_path, out_path)`).
//
//   import { SentencePiece, loadSentencePiece } from "./spm.js";
//   const sp = new SentencePiece(vocabObject);          // or:
//   const sp = await loadSentencePiece(urlOfVocabJson);  // fetch + parse
//
//   sp.encode(text)    -> { pieces: string[], ids: number[] }
//                         = SentencePieceProcessor.encode(text, out_type=str / int)
//   sp.decode(ids)     -> string  = SentencePieceProcessor.decode(ids); throws a
//                         RangeError for an id outside 0 .. size-1 (Python raises too)
//   sp.normalize(text) -> string  = SentencePieceProcessor.normalize(text): the text
//                         the model segments (charsmap, whitespace rules, "▁")
//   sp.size            -> number of pieces; sp.idToPiece(id), sp.pieceToId(piece)
//                         (an unknown piece gives the unk id, as in Python)
//
// `text` is a JavaScript string. It becomes UTF-8 by TextEncoder, which writes an
// unpaired surrogate (a DOM string may hold one) as U+FFFD; Python's binding refuses
// such a string, so spm.js equals Python given the same text with U+FFFD there.
//
// How (each step as sentencepiece's C++ does it, on UTF-8 bytes):
// 1. normalise (normalizer.cc): at each position the longest key of the precompiled
//    charsmap (a Darts-clone double-array trie) is replaced by its string; leading,
//    trailing and repeated spaces are dropped; "▁" is put first and for each space.
//    String.prototype.normalize("NFKC") is not this: the charsmap deletes control
//    characters, maps 14 other spaces (tab, newline, U+200B, U+FEFF, ...) to " ",
//    keeps "～" (U+FF5E), and maps only sequences of up to four characters, where
//    NFKC reorders and composes any run of combining marks.
// 2. segment (unigram_model.cc, EncodeOptimized): Viterbi over the pieces, scores
//    added in float32, a tie kept by the path found first; a character no piece
//    covers is unknown (score: lowest piece score - 10).
// 3. byte fallback (sentencepiece_processor.cc): an unknown character becomes the
//    pieces <0xXX> of its UTF-8 bytes.
// 4. decode: "▁" -> " " (those that would start the text dropped), byte pieces
//    joined into characters (each byte that forms none -> U+FFFD, not TextDecoder's
//    rule), a U+FEFF kept, control pieces -> "", <unk> -> " ⁇ ".
//
// Only what this model needs: unigram, no user-defined pieces, no denormaliser
// (spm_vocab.py refuses other models; the constructor refuses their files).

const FORMAT = "transformer_edu spm-vocab 1";
const TYPE = { NORMAL: 1, UNKNOWN: 2, CONTROL: 3, USER_DEFINED: 4, UNUSED: 5, BYTE: 6 };
const UNK_PENALTY = 10; // kUnkPenalty
const MAX_TRIE_RESULTS = 32; // Normalizer::kMaxTrieResultsSize
const SPACE = 0x20;
const SPACE_SYMBOL = [0xe2, 0x96, 0x81]; // "▁" U+2581 in UTF-8
const REPLACEMENT = [0xef, 0xbf, 0xbd]; // U+FFFD in UTF-8

const utf8Encoder = new TextEncoder();
const utf8Decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }); // keeps U+FEFF

function base64Bytes(text) {
  const binary = atob(text);
  const out = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) out[i] = binary.charCodeAt(i);
  return out;
}

// Number of bytes of the UTF-8 character whose first byte is `b` (OneCharLen).
function oneCharLen(b) {
  return [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4][b >> 4];
}

const isTrail = (b) => (b & 0xc0) === 0x80;
const isValidCodepoint = (c) => c < 0xd800 || (c >= 0xe000 && c <= 0x10ffff);

// string_util::IsValidDecodeUTF8 on bytes[pos .. end): the length of the well-formed
// UTF-8 character at pos, or 0 if there is none (sentencepiece then takes one byte).
function utf8Length(bytes, pos, end) {
  const len = end - pos;
  const b0 = bytes[pos];
  if (b0 < 0x80) return 1;
  if (len >= 2 && (b0 & 0xe0) === 0xc0) {
    const b1 = bytes[pos + 1];
    const cp = ((b0 & 0x1f) << 6) | (b1 & 0x3f);
    return isTrail(b1) && cp >= 0x80 && isValidCodepoint(cp) ? 2 : 0;
  }
  if (len >= 3 && (b0 & 0xf0) === 0xe0) {
    const [b1, b2] = [bytes[pos + 1], bytes[pos + 2]];
    const cp = ((b0 & 0x0f) << 12) | ((b1 & 0x3f) << 6) | (b2 & 0x3f);
    return isTrail(b1) && isTrail(b2) && cp >= 0x800 && isValidCodepoint(cp) ? 3 : 0;
  }
  if (len >= 4 && (b0 & 0xf8) === 0xf0) {
    const [b1, b2, b3] = [bytes[pos + 1], bytes[pos + 2], bytes[pos + 3]];
    const cp = ((b0 & 0x07) << 18) | ((b1 & 0x3f) << 12) | ((b2 & 0x3f) << 6) | (b3 & 0x3f);
    const ok = isTrail(b1) && isTrail(b2) && isTrail(b3);
    return ok && cp >= 0x10000 && isValidCodepoint(cp) ? 4 : 0;
  }
  return 0;
}

// A growing byte buffer (the normalised text).
class Bytes {
  constructor(capacity) {
    this.data = new Uint8Array(Math.max(16, capacity));
    this.length = 0;
  }

  push(source, start, end) {
    if (this.length + end - start > this.data.length) {
      const data = new Uint8Array(2 * (this.length + end - start));
      data.set(this.data.subarray(0, this.length));
      this.data = data;
    }
    for (let i = start; i < end; i++) this.data[this.length++] = source[i];
  }

  endsWith(pattern) {
    const n = pattern.length;
    if (this.length < n) return false;
    for (let i = 0; i < n; i++) if (this.data[this.length - n + i] !== pattern[i]) return false;
    return true;
  }

  view() {
    return this.data.subarray(0, this.length);
  }
}

// The precompiled charsmap: <trie size: uint32 LE><Darts units: uint32 LE><strings>.
class CharsMap {
  constructor(blob) {
    const view = new DataView(blob.buffer, blob.byteOffset, blob.byteLength);
    if (blob.length <= 4) throw new Error("precompiled_charsmap: blob is broken");
    const trieSize = view.getUint32(0, true);
    if (trieSize >= blob.length) throw new Error("precompiled_charsmap: trie exceeds blob");
    this.units = new Uint32Array(trieSize / 4);
    for (let i = 0; i < this.units.length; i++) this.units[i] = view.getUint32(4 + 4 * i, true);
    this.strings = blob.subarray(4 + trieSize);
  }

  // Darts::DoubleArray::commonPrefixSearch: the longest key that starts
  // bytes[pos .. end), among the first MAX_TRIE_RESULTS found: its length (0 if none),
  // and the offset of its string in this.value.
  longestPrefix(bytes, pos, end) {
    const units = this.units;
    const offset = (u) => (u >>> 10) << ((u & (1 << 9)) >>> 6);
    let node = offset(units[0]);
    let found = 0;
    let bestLength = 0;
    for (let i = pos; i < end; i++) {
      const c = bytes[i];
      node ^= c;
      const unit = units[node];
      if (unit === undefined || (unit & 0x800000ff) >>> 0 !== c) break;
      node ^= offset(unit);
      if ((unit >>> 8) & 1) {
        if (found < MAX_TRIE_RESULTS && i + 1 - pos > bestLength) {
          bestLength = i + 1 - pos;
          this.value = units[node] & 0x7fffffff;
        }
        found++;
      }
    }
    return bestLength;
  }

  // The end of the NUL-ended string that starts at strings[value].
  stringEnd(value) {
    let end = value;
    while (this.strings[end] !== 0) end++;
    return end;
  }
}

// Pieces as a byte trie. Built with one Map (node, byte) -> child, then packed:
// node n's children are labels/targets[first[n] .. first[n + 1]), sorted by byte.
class PieceTrie {
  constructor(entries) {
    const children = new Map();
    const ids = [-1];
    for (const [bytes, id] of entries) {
      let node = 0;
      for (const b of bytes) {
        const key = node * 256 + b;
        let child = children.get(key);
        if (child === undefined) {
          child = ids.length;
          ids.push(-1);
          children.set(key, child);
        }
        node = child;
      }
      ids[node] = id;
    }
    const keys = [...children.keys()].sort((a, b) => a - b); // by node, then byte
    this.ids = Int32Array.from(ids);
    this.first = new Int32Array(ids.length + 1);
    this.labels = new Uint8Array(keys.length);
    this.targets = new Int32Array(keys.length);
    keys.forEach((key, i) => {
      this.first[Math.floor(key / 256) + 1]++;
      this.labels[i] = key % 256;
      this.targets[i] = children.get(key);
    });
    for (let n = 0; n < ids.length; n++) this.first[n + 1] += this.first[n];
  }

  // The child of `node` by byte `b`, or -1 (binary search among its children).
  child(node, b) {
    let lo = this.first[node];
    let hi = this.first[node + 1];
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.labels[mid] < b) lo = mid + 1;
      else hi = mid;
    }
    return lo < this.first[node + 1] && this.labels[lo] === b ? this.targets[lo] : -1;
  }
}

export class SentencePiece {
  constructor(vocab) {
    if (vocab.format !== FORMAT) {
      throw new Error(`spm.js: vocabulary format ${JSON.stringify(vocab.format)}, expected ${JSON.stringify(FORMAT)}`);
    }
    const n = vocab.pieces.length;
    if (vocab.scores.length !== n || vocab.types.length !== n) {
      throw new Error(`spm.js: ${n} pieces but ${vocab.scores.length} scores and ${vocab.types.length} types`);
    }
    if (vocab.types.includes(String(TYPE.USER_DEFINED))) {
      throw new Error("spm.js: user-defined pieces are not supported");
    }
    this.pieces = vocab.pieces;
    this.scores = Float32Array.from(vocab.scores); // float32, as in the model
    this.types = Uint8Array.from(vocab.types, Number);
    this.unkId = vocab.unk_id;
    this.unkSurface = vocab.unk_surface;
    this.byteFallback = vocab.byte_fallback;
    const norm = vocab.normalizer;
    this.addDummyPrefix = norm.add_dummy_prefix;
    this.removeExtraWhitespaces = norm.remove_extra_whitespaces;
    this.escapeWhitespaces = norm.escape_whitespaces;
    const blob = base64Bytes(norm.precompiled_charsmap);
    this.charsMap = blob.length ? new CharsMap(blob) : null;

    this.pieceIds = new Map(); // every piece -> id (PieceToId)
    this.pieceBytes = []; // id -> UTF-8 bytes
    this.byteIds = new Int32Array(256).fill(-1); // byte -> id of <0xXX>
    const matched = []; // normal (and unused) pieces: what Viterbi matches
    let minScore = Infinity;
    for (let id = 0; id < n; id++) {
      const piece = this.pieces[id];
      const type = this.types[id];
      this.pieceIds.set(piece, id);
      this.pieceBytes.push(utf8Encoder.encode(piece));
      if (type === TYPE.NORMAL || type === TYPE.UNUSED) matched.push([this.pieceBytes[id], id]);
      if (type === TYPE.NORMAL) minScore = Math.min(minScore, this.scores[id]);
      if (type === TYPE.BYTE) this.byteIds[parseInt(piece.slice(3, 5), 16)] = id;
    }
    this.trie = new PieceTrie(matched);
    this.unkScore = Math.fround(minScore - UNK_PENALTY);
  }

  get size() {
    return this.pieces.length;
  }

  idToPiece(id) {
    this.checkId(id);
    return this.pieces[id];
  }

  pieceToId(piece) {
    const id = this.pieceIds.get(piece);
    return id === undefined ? this.unkId : id;
  }

  checkId(id) {
    if (!Number.isInteger(id) || id < 0 || id >= this.pieces.length) {
      throw new RangeError(`Invalid id: ${id} (the vocabulary has ids 0..${this.pieces.length - 1})`);
    }
  }

  // Normalizer::NormalizePrefix at input[pos]: returns the bytes it consumes and
  // leaves what they become in this.prefix[this.prefixStart .. this.prefixEnd).
  normalizePrefix(input, pos) {
    const end = input.length;
    if (this.charsMap) {
      const length = this.charsMap.longestPrefix(input, pos, end);
      if (length > 0) {
        const value = this.charsMap.value;
        this.prefix = this.charsMap.strings;
        this.prefixStart = value;
        this.prefixEnd = this.charsMap.stringEnd(value);
        return length;
      }
    }
    const length = utf8Length(input, pos, end);
    if (length === 0) {
      // not UTF-8: U+FFFD for one byte
      [this.prefix, this.prefixStart, this.prefixEnd] = [REPLACEMENT, 0, REPLACEMENT.length];
      return 1;
    }
    [this.prefix, this.prefixStart, this.prefixEnd] = [input, pos, pos + length];
    return length;
  }

  // Normalizer::Normalize on UTF-8 bytes -> UTF-8 bytes.
  normalizeBytes(input) {
    const out = new Bytes(input.length + 8);
    let pos = 0;
    const end = input.length;
    if (this.removeExtraWhitespaces) {
      // leading spaces, as the charsmap writes them
      while (pos < end) {
        const consumed = this.normalizePrefix(input, pos);
        const isSpace = this.prefixEnd - this.prefixStart === 1 && this.prefix[this.prefixStart] === SPACE;
        if (!isSpace) break;
        pos += consumed;
      }
    }
    if (pos >= end) return out.view();
    const space = this.escapeWhitespaces ? SPACE_SYMBOL : [SPACE];
    if (this.addDummyPrefix) out.push(space, 0, space.length);
    let isPrevSpace = this.removeExtraWhitespaces;
    while (pos < end) {
      const consumed = this.normalizePrefix(input, pos);
      const sp = this.prefix;
      let start = this.prefixStart;
      const stop = this.prefixEnd;
      while (isPrevSpace && start < stop && sp[start] === SPACE) start++;
      if (start < stop) {
        for (let i = start; i < stop; i++) {
          if (this.escapeWhitespaces && sp[i] === SPACE) out.push(SPACE_SYMBOL, 0, 3);
          else out.push(sp, i, i + 1);
        }
        isPrevSpace = sp[stop - 1] === SPACE;
      }
      pos += consumed;
      if (!this.removeExtraWhitespaces) isPrevSpace = false;
    }
    if (this.removeExtraWhitespaces) {
      while (out.endsWith(space)) out.length -= space.length;
    }
    return out.view();
  }

  normalize(text) {
    return utf8Decoder.decode(this.normalizeBytes(utf8Encoder.encode(text)));
  }

  // Model::EncodeOptimized: [start, end, id] of each piece of the best path.
  viterbi(bytes) {
    const size = bytes.length;
    const bestScore = new Float32Array(size + 1);
    const startsAt = new Int32Array(size + 1).fill(-1);
    const bestId = new Int32Array(size + 1).fill(-1);
    const trie = this.trie;
    const update = (target, score, start, id) => {
      const candidate = Math.fround(score + bestScore[start]);
      if (startsAt[target] === -1 || candidate > bestScore[target]) {
        bestScore[target] = candidate;
        startsAt[target] = start;
        bestId[target] = id;
      }
    };
    for (let start = 0; start < size; ) {
      const mblen = Math.min(oneCharLen(bytes[start]), size - start);
      let hasSingleNode = false;
      let node = 0;
      for (let keyPos = start; keyPos < size; keyPos++) {
        node = trie.child(node, bytes[keyPos]);
        if (node < 0) break;
        const id = trie.ids[node];
        if (id < 0 || this.types[id] === TYPE.UNUSED) continue;
        update(keyPos + 1, this.scores[id], start, id);
        if (keyPos + 1 - start === mblen) hasSingleNode = true;
      }
      if (!hasSingleNode) update(start + mblen, this.unkScore, start, this.unkId);
      start += mblen;
    }
    const path = [];
    for (let end = size; end > 0; end = startsAt[end]) path.push([startsAt[end], end, bestId[end]]);
    return path.reverse();
  }

  encode(text) {
    const normalized = this.normalizeBytes(utf8Encoder.encode(text));
    const pieces = [];
    const ids = [];
    let prevUnk = false;
    for (const [start, end, id] of this.viterbi(normalized)) {
      const isUnk = id === this.unkId;
      if (isUnk && this.byteFallback) {
        for (let i = start; i < end; i++) {
          const byteId = this.byteIds[normalized[i]];
          ids.push(byteId < 0 ? this.unkId : byteId);
          pieces.push(`<0x${normalized[i].toString(16).toUpperCase().padStart(2, "0")}>`);
        }
      } else if (isUnk && prevUnk) {
        // a run of unknown characters is one <unk> piece
        pieces[pieces.length - 1] += utf8Decoder.decode(normalized.subarray(start, end));
      } else {
        ids.push(id);
        pieces.push(isUnk ? utf8Decoder.decode(normalized.subarray(start, end)) : this.pieces[id]);
      }
      prevUnk = isUnk;
    }
    return { pieces, ids };
  }

  decode(ids) {
    ids.forEach((id) => this.checkId(id));
    let text = "";
    let isBosWs = true; // the first "▁" of the text is the dummy prefix: drop it
    let bosWsSeen = false;
    let bytes = []; // a run of byte pieces
    const flushBytes = () => {
      const end = bytes.length;
      for (let pos = 0; pos < end; ) {
        const length = utf8Length(bytes, pos, end);
        text += length ? utf8Decoder.decode(Uint8Array.from(bytes.slice(pos, pos + length))) : "\ufffd";
        pos += length || 1;
      }
      bytes = [];
    };
    const stripsBosWs = this.addDummyPrefix || this.removeExtraWhitespaces;
    for (const id of ids) {
      const type = this.types[id];
      if (type === TYPE.BYTE) {
        bytes.push(parseInt(this.pieces[id].slice(3, 5), 16));
        continue;
      }
      flushBytes();
      if (bosWsSeen || text.length > 0) isBosWs = false;
      bosWsSeen = false;
      if (type === TYPE.CONTROL) continue;
      if (type === TYPE.UNKNOWN) {
        text += this.unkSurface;
        continue;
      }
      let piece = this.pieces[id];
      if (isBosWs && stripsBosWs && piece.startsWith("\u2581")) {
        piece = piece.slice(1);
        bosWsSeen = !this.removeExtraWhitespaces;
      }
      text += piece.replaceAll("\u2581", " ");
    }
    flushBytes();
    return text;
  }
}

export async function loadSentencePiece(url) {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`spm.js: ${url}: HTTP ${response.status}`);
  return new SentencePiece(await response.json());
}
