// The translators of chapters 10 (the toy model) and 12 (the shipped Tatoeba model) as
// one anywidget front end (an ES module held in the widget's state). In the book's
// static page it runs the exported ONNX graphs with onnxruntime-web (WASM) from the
// book's own _static folder; in Jupyter or Colab, where there is no _static, it asks
// the Python model in the kernel through the widget's custom messages. Both give the
// same view (transformer_edu/browser/translator_widget.py describes it): each
// sentence's pieces, every decoding step with its top-5 next tokens, the translation,
// beam search's finished hypotheses and the cross-attention of every layer and head.
//
// The loops below are the package's, written again: greedyDecode is
// decoding.greedy_decode, beamSearch decoding.beam_search (the paper's length
// penalty), graphStep's cache reordering decoding.reorder_cache, splitSentences /
// sentenceProblem / planText tatoeba.data.split_sentences / sentence_problem and
// plan_text, segment toy.data.segment (browser/onnx_export.py has the same loops in
// Python, for the tests).

const ORT_DIR = "_static/vendor/onnxruntime-web/";
const ORT_MODULE = "ort.wasm.bundle.min.js";
const ORT_WASM = "ort-wasm-simd-threaded.wasm";
const META_FILE = "translator.json";
const TRAILING = "。．.？?！!"; // toy.data._TRAILING: final punctuation segment() drops
const KERNEL_TIMEOUT_MS = 120000;

// --- the page's words, in the page's language --------------------------------------

const WORDS = {
  en: {
    translate: "Translate", try: "try", input: "Japanese text", beam: "beam size",
    greedy: "1 (greedy)", alpha: "length penalty α", translation: "translation",
    reads: "encoder reads", unknownChip: "unknown: read as <unk>",
    unknownNote: (w) => `unknown (read as <unk>): ${w}`,
    step: "step", given: "given", next: "→ next", top: "top-5 next tokens",
    maps: "cross-attention of each output token (rows) over the source (columns)",
    layerHead: (l, h) => `layer ${l}, head ${h}`,
    beams: (n) => `beam search: the ${n} best finished hypotheses, score = log P / lp`,
    sentence: (i, n) => `sentence ${i} of ${n}`,
    cannot: (e) => `cannot translate: ${e}`,
    kept: "kept as it is (not Japanese)",
    failed: (e) => `the model failed: ${e}`,
    busy: "translating…",
    took: (ms, where) => `translated ${where} in ${ms} ms`,
    inBrowser: "in your browser",
    kernelReady: "the Python model in the kernel translates",
    kernelWait: "no kernel answered: run the notebook's cells first",
    loading: "loading the model into your browser…",
    loaded: (ms) => `model loaded in ${ms} ms`,
    lazy: (mb, gz) => `The model loads into your browser when you first translate: ${mb} MB (${gz} MB compressed by a server that gzips).`,
    fileUrl: "The in-browser translator needs the book served over HTTP (browsers "
      + "block its model from file://): run `python -m http.server -d _build/html` "
      + "and open http://localhost:8000/.",
    noLoad: (e) => `the in-browser model did not load: ${e}`,
    empty: "the sentence is empty",
    emptyText: "the text is empty",
    allUnknown: (w) => `every word is unknown to the model: ${w}`,
    tooManyTokens: (n, m) => `the sentence has ${n} tokens, more than the model's max_len=${m}`,
    notJapanese: (s) => `“${s}” is not Japanese: the model translates Japanese (kana and kanji) into English`,
    nothing: (s) => `“${s}” has nothing to translate: no kana or kanji, only punctuation, symbols or emoji`,
    tooLong: (n, m) => `a sentence has ${n} characters; the model was trained on sentences of at most ${m} (split it at 。, ！ or ？)`,
  },
  ja: {
    translate: "翻訳", try: "例", input: "日本語の文", beam: "ビーム幅",
    greedy: "1（貪欲）", alpha: "長さペナルティ α", translation: "翻訳",
    reads: "エンコーダが読むもの", unknownChip: "未知語：<unk> として読む",
    unknownNote: (w) => `未知語（<unk> として読む）：${w}`,
    step: "ステップ", given: "入力", next: "→ 次", top: "次のトークンの上位 5 個",
    maps: "各出力トークン（行）がソース（列）に向けるクロスアテンション",
    layerHead: (l, h) => `層 ${l}、ヘッド ${h}`,
    beams: (n) => `ビームサーチ：終わった仮説の上位 ${n} 個（スコア = log P / lp）`,
    sentence: (i, n) => `${n} 文中 ${i} 文目`,
    cannot: (e) => `翻訳できない：${e}`,
    kept: "日本語ではないのでそのまま残す",
    failed: (e) => `モデルが失敗した：${e}`,
    busy: "翻訳中…",
    took: (ms, where) => `${where}で ${ms} ms で翻訳した`,
    inBrowser: "ブラウザ内",
    kernelReady: "カーネルの Python モデルが翻訳する",
    kernelWait: "カーネルが応答しない：先にノートブックのセルを実行すること",
    loading: "モデルをブラウザに読み込み中…",
    loaded: (ms) => `モデルを ${ms} ms で読み込んだ`,
    lazy: (mb, gz) => `モデルは最初に翻訳するときにブラウザへ読み込まれる：${mb} MB（gzip 圧縮するサーバーなら ${gz} MB）。`,
    fileUrl: "ブラウザ内の翻訳器には、本を HTTP で配信する必要がある（ブラウザは "
      + "file:// からモデルを読み込ませない）：`python -m http.server -d _build/html` "
      + "を実行して http://localhost:8000/ を開くこと。",
    noLoad: (e) => `ブラウザ内のモデルを読み込めなかった：${e}`,
    empty: "文が空である",
    emptyText: "テキストが空である",
    allUnknown: (w) => `すべての語がモデルにとって未知語である：${w}`,
    tooManyTokens: (n, m) => `文が ${n} トークンあり、モデルの max_len=${m} を超える`,
    notJapanese: (s) => `「${s}」は日本語ではない：このモデルは日本語（かなと漢字）を英語に訳す`,
    nothing: (s) => `「${s}」には訳すものがない：かなも漢字もなく、句読点・記号・絵文字だけである`,
    tooLong: (n, m) => `${n} 文字の文がある。モデルが学習した文は最長 ${m} 文字である（。！？で区切ること）`,
  },
};

function words() {
  const lang = (document.documentElement.lang || "en").slice(0, 2);
  return WORDS[lang] || WORDS.en;
}

// --- what a reader types: the same rules as transformer_edu.tatoeba.data -------------------

const SENTENCE = /[^。!?]*[。!?]+|[^。!?]+/g;
const LINE_BREAKS = /\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]/;
const JAPANESE = /[\u3005-\u3007\u3041-\u3096\u309d-\u309f\u30a1-\u30fa\u30fc-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u{20000}-\u{3134f}]/u;
const LATIN = /[A-Za-z]/;
// Python's str.split() with no argument: its whitespace, for tatoeba.data.normalise
const PY_SPACE = /[\t\n\v\f\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+/;

/** The code points JAPANESE matches (for the tests: the package's are the same). */
export function japaneseCodePoints() {
  const out = [];
  for (let c = 0; c < 0x110000; c++) if (JAPANESE.test(String.fromCodePoint(c))) out.push(c);
  return out;
}

/** tatoeba.data.normalise: NFKC and single spaces. */
export function normalise(text) {
  return text.normalize("NFKC").split(PY_SPACE).filter((w) => w).join(" ");
}

/** tatoeba.data.split_sentences: line breaks, then after 。 ! ?; each normalised. */
export function splitSentences(text) {
  const out = [];
  for (const raw of text.split(LINE_BREAKS)) {
    const line = normalise(raw);
    for (const m of line.match(SENTENCE) || []) {
      const s = m.trim();
      if (s) out.push(s);
    }
  }
  return out;
}

/** tatoeba.data.sentence_problem, as {key, args} (the page words it in its language). */
export function sentenceProblem(sentence, maxChars) {
  if (!JAPANESE.test(sentence)) {
    return LATIN.test(sentence) ? ["notJapanese", sentence] : ["nothing", sentence];
  }
  const n = Array.from(sentence).length; // code points, as Python's len()
  if (n > maxChars) return ["tooLong", n, maxChars];
  return null;
}

/** tatoeba.data.plan_text: [{source, translate, error}] or {error} if empty. */
export function planText(text, maxChars) {
  const sentences = splitSentences(text);
  if (!sentences.length) return { error: ["emptyText"] };
  const anyJapanese = sentences.some((s) => JAPANESE.test(s));
  return {
    plan: sentences.map((s) => {
      const problem = sentenceProblem(s, maxChars);
      const keep = anyJapanese && !JAPANESE.test(s);
      return { source: s, translate: problem === null, error: keep ? null : problem };
    }),
  };
}

// --- the toy's segmentation: the same as transformer_edu.toy.data.segment -----------------

/** Words by longest match over `lexicon`; spaces separate chunks (toy.data.segment). */
export function segment(text, lexicon) {
  const known = lexicon instanceof Set ? lexicon : new Set(lexicon);
  let longest = 1;
  for (const w of known) longest = Math.max(longest, Array.from(w).length);
  let s = text.trim();
  while (s && TRAILING.includes(s[s.length - 1])) s = s.slice(0, -1);
  s = s.trim();
  const tokens = [];
  for (const chunk of s.split(/\s+/)) {
    if (!chunk) continue;
    // code points, as Python indexes a str (an emoji is one character)
    const chars = Array.from(chunk);
    let unknown = "";
    let i = 0;
    while (i < chars.length) {
      let match = null;
      for (let n = Math.min(longest, chars.length - i); n > 0; n--) {
        const piece = chars.slice(i, i + n).join("");
        if (known.has(piece)) {
          match = piece;
          break;
        }
      }
      if (match === null) {
        unknown += chars[i];
        i += 1;
        continue;
      }
      if (unknown) tokens.push(unknown);
      unknown = "";
      tokens.push(match);
      i += Array.from(match).length;
    }
    if (unknown) tokens.push(unknown);
  }
  return tokens;
}

/** toy.data.detokenize_en: tokens back to text, punctuation attached. */
function detokenize(tokens) {
  let out = "";
  for (const t of tokens) out += "?!.,".includes(t) || !out ? t : " " + t;
  return out;
}

// --- decoding over a step function: greedy_decode and beam_search ----------------------
// step(prefixes, parents) resolves to {logp: Float32Array (K·V), V, attn: Float32Array
// (K·L·H·S), L, H, S}: each prefix's next-token log-probabilities and the newest
// position's cross-attention. parents[i] is the row of the previous call that prefix i
// extends (null at the first call): a step with a KV cache (graphStep) moves its
// cached keys and values there and runs only each prefix's newest token.

/** decoding.length_penalty: ((5 + |Y|) / 6) ** α (Wu et al. 2016; the paper: 0.6). */
export function lengthPenalty(length, alpha) {
  return ((5 + length) / 6) ** alpha;
}

/** The k largest entries of `a` (indices), largest first; ties: lower index first. */
function topIndices(a, k) {
  const best = [];
  for (let i = 0; i < a.length; i++) {
    const v = a[i];
    if (best.length === k && v <= a[best[k - 1]]) continue;
    let j = best.length === k ? k - 1 : best.length;
    while (j > 0 && a[best[j - 1]] < v) {
      best[j] = best[j - 1];
      j--;
    }
    best[j] = i;
    if (best.length > k) best.length = k;
  }
  return best;
}

function stepView(out, row, prefix, itos, topK) {
  const { V, L, H, S } = out;
  const logp = out.logp.subarray(row * V, (row + 1) * V);
  const top = topIndices(logp, topK);
  const attn = [];
  for (let l = 0; l < L; l++) {
    const heads = [];
    for (let h = 0; h < H; h++) {
      const at = ((row * L + l) * H + h) * S;
      heads.push(Array.from(out.attn.subarray(at, at + S)));
    }
    attn.push(heads);
  }
  return {
    prefix: prefix.map((i) => itos[i]),
    top: top.map((i) => [itos[i], Math.exp(logp[i])]),
    top_ids: top,
    attn,
  };
}

/** Greedy decoding with each step's view (decoding.greedy_decode, trace=True). */
export async function greedyDecode(step, { bos, eos, maxLen, itos, topK }) {
  const ys = [bos];
  const steps = [];
  for (let k = 0; k < maxLen; k++) {
    const out = await step([ys], k === 0 ? null : [0]);
    let best = 0; // argmax: the first of equal maxima, as torch.argmax
    for (let i = 1; i < out.V; i++) if (out.logp[i] > out.logp[best]) best = i;
    steps.push({ ...stepView(out, 0, ys, itos, topK), chosen: itos[best], chosen_id: best });
    ys.push(best);
    if (best === eos) break;
  }
  return { ids: ys.slice(1), steps };
}

/** decoding.beam_search, rule for rule: the 2K best extensions; those among the first
 * K that end in EOS finish, the first K that do not stay live; a live prefix that can
 * no longer beat the best finished one is dropped. Returns the finished hypotheses
 * [[ids (EOS included), score]...], best first, and the steps of the best: each
 * step's view of the row its prefix had then (the beam's own outputs, no rerun). */
export async function beamSearch(step, { bos, eos, beamSize, alpha, maxLen, itos, topK }) {
  let ys = [[bos]];
  let scores = [0];
  let trails = [[]]; // per live prefix: [step output, row] of each of its steps
  let parents = null;
  const finished = [];
  const lpMax = lengthPenalty(maxLen, alpha); // the largest penalty an output gets
  let bestDone = -Infinity;
  let stopped = false;
  for (let n = 0; n < maxLen; n++) {
    const out = await step(ys, parents);
    const { V } = out;
    const total = new Float32Array(ys.length * V); // float32, as PyTorch adds them
    for (let r = 0; r < ys.length; r++) {
      for (let j = 0; j < V; j++) total[r * V + j] = scores[r] + out.logp[r * V + j];
    }
    let keep = [];
    topIndices(total, Math.min(2 * beamSize, total.length)).forEach((i, rank) => {
      const r = Math.floor(i / V);
      const t = i % V;
      const s = total[i];
      if (t === eos && rank < beamSize) {
        const hyp = [...ys[r].slice(1), t];
        const score = s / lengthPenalty(hyp.length, alpha);
        finished.push([hyp, score, [...trails[r], [out, r]]]);
        bestDone = Math.max(bestDone, score);
      } else if (t !== eos && keep.length < beamSize) {
        keep.push([r, t, s]);
      }
    });
    keep = keep.filter((kp) => kp[2] / lpMax > bestDone); // can still win
    if (!keep.length) {
      stopped = true;
      break;
    }
    trails = keep.map(([r]) => [...trails[r], [out, r]]);
    ys = keep.map(([r, t]) => [...ys[r], t]);
    scores = keep.map((kp) => kp[2]);
    parents = keep.map(([r]) => r);
  }
  if (!stopped) {
    ys.forEach((y, r) => finished.push([y.slice(1), scores[r] / lengthPenalty(y.length - 1, alpha), trails[r]]));
  }
  finished.sort((a, b) => b[1] - a[1]);
  const [ids, , trail] = finished[0];
  const steps = trail.map(([out, r], j) => ({
    ...stepView(out, r, [bos, ...ids.slice(0, j)], itos, topK),
    chosen: itos[ids[j]],
    chosen_id: ids[j],
  }));
  return { hyps: finished.map(([h, score]) => [h, score]), steps };
}

// --- the model in the page: onnxruntime-web on the exported graphs ----------------

async function fetchBytes(url) {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`);
  return new Uint8Array(await response.arrayBuffer());
}

async function fetchJson(url) {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`);
  return response.json();
}

/** Load onnxruntime-web, the two graphs, the JSON (and the SentencePiece module and
 * vocabulary of the Tatoeba model) from the book's _static. */
export async function loadBrowserModel(root, modelDir, meta) {
  const t0 = performance.now();
  const dir = `${root}_static/${modelDir}/`;
  const ort = await import(root + ORT_DIR + ORT_MODULE);
  // one thread: a plain static server gives no SharedArrayBuffer (cross-origin
  // isolation)
  ort.env.wasm.numThreads = 1;
  ort.env.wasm.proxy = false;
  ort.env.logLevel = "error";
  meta = meta || (await fetchJson(dir + META_FILE));
  const wasm = await fetchBytes(root + ORT_DIR + ORT_WASM);
  // handing the bytes over avoids a streaming compile that needs application/wasm;
  // no wasmPaths, so the bundle uses its own WASM glue instead of fetching one
  ort.env.wasm.wasmBinary = wasm.buffer;
  const [encBytes, decBytes] = await Promise.all([
    fetchBytes(dir + meta.encoder),
    fetchBytes(dir + meta.decoder),
  ]);
  const options = { executionProviders: ["wasm"], graphOptimizationLevel: "all" };
  const encoder = await ort.InferenceSession.create(encBytes, options);
  const decoder = await ort.InferenceSession.create(decBytes, options);
  let bytes = wasm.byteLength + encBytes.byteLength + decBytes.byteLength;
  const m = { ort, encoder, decoder, meta };
  if (meta.kind === "tatoeba") {
    const [{ SentencePiece }, vocab] = await Promise.all([
      import(`${dir}spm.js`),
      fetchJson(dir + meta.spm),
    ]);
    m.sp = new SentencePiece(vocab);
    m.itos = m.sp.pieces;
  } else {
    m.itos = meta.tgt_itos;
    m.lexicon = new Set(meta.lexicon);
    m.stoi = new Map(meta.src_itos.map((t, i) => [t, i]));
  }
  m.bytes = bytes;
  m.loadMs = performance.now() - t0;
  return m;
}

function int64(ort, rows) {
  const flat = BigInt64Array.from(rows.flat(), BigInt);
  return new ort.Tensor("int64", flat, [rows.length, rows[0].length]);
}

/** Rows `rows` of a cached (L, K, H, P, Dh) tensor, as a new (L, rows.length, H, P, Dh)
 * one: each surviving prefix takes its parent's keys or values. */
function takeRows(ort, t, rows) {
  const [L, K, H, P, Dh] = t.dims;
  const block = H * P * Dh; // one row of one layer
  const out = new Float32Array(L * rows.length * block);
  for (let l = 0; l < L; l++) {
    rows.forEach((r, i) => {
      const from = (l * K + r) * block;
      out.set(t.data.subarray(from, from + block), (l * rows.length + i) * block);
    });
  }
  return new ort.Tensor("float32", out, [L, rows.length, H, P, Dh]);
}

/** step() over the decoder graph for one encoded source: the encoder runs once (and
 * gives every layer's cross-attention keys and values); each step feeds the prefixes'
 * newest tokens with the self-attention keys and values of their parents. */
async function graphStep(m, srcIds) {
  const { ort } = m;
  const enc = await m.encoder.run({ src: int64(ort, [srcIds]) });
  const [L, , H, S, Dh] = enc.memory_keys.dims;
  const empty = new ort.Tensor("float32", new Float32Array(0), [L, 1, H, 0, Dh]);
  let past = [empty, empty]; // keys, values: (L, K, H, P, Dh)
  return async (prefixes, parents) => {
    let [keys, values] = past;
    const same = parents && parents.length === keys.dims[1] && parents.every((r, i) => r === i);
    if (parents && !same) [keys, values] = [takeRows(ort, keys, parents), takeRows(ort, values, parents)];
    const out = await m.decoder.run({
      tokens: int64(ort, prefixes.map((y) => [y[y.length - 1]])),
      past_keys: keys,
      past_values: values,
      memory_keys: enc.memory_keys,
      memory_values: enc.memory_values,
      src_mask: enc.src_mask,
    });
    past = [out.present_keys, out.present_values];
    const [, V] = out.log_probs.dims;
    return { logp: out.log_probs.data, V, attn: out.cross_attention.data, L, H, S };
  };
}

async function decodeOne(m, srcIds, { beam, alpha, maxLen }) {
  const step = await graphStep(m, srcIds);
  const opts = { bos: m.meta.bos_id, eos: m.meta.eos_id, itos: m.itos, topK: m.meta.top_k };
  if (beam <= 1) {
    const { ids, steps } = await greedyDecode(step, { ...opts, maxLen });
    return { ids, steps };
  }
  const { hyps, steps } = await beamSearch(step, { ...opts, beamSize: beam, alpha, maxLen });
  return { ids: hyps[0][0], hyps, steps };
}

function untilEos(ids, eos) {
  const at = ids.indexOf(eos);
  return at < 0 ? ids : ids.slice(0, at);
}

/** The toy: one sentence, segmented over the lexicon (translate()'s checks). */
async function translateToy(m, text, beam) {
  const W = words();
  const { meta } = m;
  const tokens = segment(text, m.lexicon);
  const sentence = { source: text };
  if (!tokens.length) return { sentences: [{ ...sentence, error: W.empty }], text: "" };
  const unknown = [...new Set(tokens.filter((t) => !m.stoi.has(t)))];
  if (tokens.every((t) => !m.stoi.has(t))) {
    return { sentences: [{ ...sentence, error: W.allUnknown(unknown.join(" ")) }], text: "" };
  }
  if (meta.max_len !== null && tokens.length > meta.max_len) {
    return { sentences: [{ ...sentence, error: W.tooManyTokens(tokens.length, meta.max_len) }], text: "" };
  }
  const ids = tokens.map((t) => (m.stoi.has(t) ? m.stoi.get(t) : meta.unk_id));
  const out = await decodeOne(m, ids, { beam, alpha: 0, maxLen: meta.max_output });
  const toText = (o) => detokenize(untilEos(o, meta.eos_id).map((i) => meta.tgt_itos[i]));
  Object.assign(sentence, { pieces: tokens, unknown, text: toText(out.ids), steps: out.steps, error: null });
  if (out.hyps) sentence.beams = out.hyps.map(([h, s]) => [toText(h), s]);
  return { sentences: [sentence], text: sentence.text };
}

/** The Tatoeba model: a text of any length, sentence by sentence (tatoeba_view). */
async function translateTatoeba(m, text, beam, alpha) {
  const W = words();
  const { meta } = m;
  const planned = planText(text, meta.max_chars);
  if (planned.error) return { sentences: [{ source: text, error: W[planned.error[0]] }], text: "" };
  const sentences = [];
  for (const p of planned.plan) {
    const s = { source: p.source, error: p.error ? W[p.error[0]](...p.error.slice(1)) : null };
    if (p.translate) {
      const { pieces, ids } = m.sp.encode(p.source);
      const out = await decodeOne(m, ids, { beam, alpha, maxLen: ids.length + meta.extra_output });
      const toText = (o) => m.sp.decode(untilEos(o, meta.eos_id));
      Object.assign(s, { pieces, unknown: [], text: toText(out.ids), steps: out.steps });
      if (out.hyps) s.beams = out.hyps.map(([h, sc]) => [toText(h), sc]);
    } else if (!p.error) {
      Object.assign(s, { pieces: [], unknown: [], text: p.source, steps: [] });
    }
    sentences.push(s);
  }
  const english = sentences.filter((s) => s.text !== undefined).map((s) => s.text).join(" ");
  return { sentences, text: english };
}

// --- the view ---------------------------------------------------------------------

function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") el.className = v;
    else if (k === "style") el.style.cssText = v;
    else el.setAttribute(k, v);
  }
  for (const c of children) el.append(c);
  return el;
}

function showPieces(s, W) {
  const unknown = new Set(s.unknown || []);
  const chips = s.pieces.map((t) =>
    unknown.has(t)
      ? h("span", { class: "tedu-tok tedu-unknown", title: W.unknownChip, lang: "ja" }, t)
      : h("span", { class: "tedu-tok", lang: "ja" }, t),
  );
  const line = h("div", { class: "tedu-seg" }, h("span", { class: "tedu-label" }, W.reads), ...chips);
  if (unknown.size) line.append(h("span", { class: "tedu-note" }, W.unknownNote([...unknown].join(", "))));
  return line;
}

function showSteps(s, W) {
  const rows = s.steps.map((st, k) => {
    const top = h("div", { class: "tedu-top" });
    st.top.forEach(([tok, p], j) => {
      const bar = h("span", { class: "tedu-bar", style: `width:${(p * 100).toFixed(1)}%` });
      top.append(h("div", { class: st.top_ids[j] === st.chosen_id ? "tedu-cand tedu-chosen" : "tedu-cand",
        title: `p = ${p.toFixed(6)}` }, h("span", { class: "tedu-cand-tok" }, tok),
        h("span", { class: "tedu-cand-bar" }, bar),
        h("span", { class: "tedu-cand-p" }, p.toFixed(3))));
    });
    return h("tr", {}, h("td", {}, String(k + 1)), h("td", { class: "tedu-prefix" },
      st.prefix.join(" ")), h("td", { class: "tedu-chosen-tok" }, st.chosen), h("td", {}, top));
  });
  return h("table", { class: "tedu-steps" }, h("thead", {}, h("tr", {},
    h("th", {}, W.step), h("th", {}, W.given), h("th", {}, W.next),
    h("th", {}, W.top))), h("tbody", {}, ...rows));
}

function showAttention(s, W) {
  const L = s.steps[0].attn.length;
  const H = s.steps[0].attn[0].length;
  const grid = h("div", { class: "tedu-maps" });
  for (let l = 0; l < L; l++) {
    for (let hd = 0; hd < H; hd++) {
      const head = h("tr", {}, h("th", {}), ...s.pieces.map((t) => h("th", { lang: "ja" }, t)));
      const rows = s.steps.map((st) => h("tr", {}, h("th", {}, st.chosen),
        ...st.attn[l][hd].map((w, j) => h("td", {
          // darker = more weight (a lightness scale, readable without colour)
          style: `background:rgba(8,48,107,${w.toFixed(3)})`,
          title: `${st.chosen} → ${s.pieces[j]}: ${w.toFixed(3)}`,
        }))));
      grid.append(h("figure", { class: "tedu-map" },
        h("figcaption", {}, W.layerHead(l + 1, hd + 1)),
        h("table", {}, h("thead", {}, head), h("tbody", {}, ...rows))));
    }
  }
  return h("div", {}, h("div", { class: "tedu-label" }, W.maps), grid);
}

function showBeams(s, W) {
  const list = h("ol", { class: "tedu-beams" });
  for (const [text, score] of s.beams.slice(0, 5)) {
    list.append(h("li", {}, h("span", { lang: "en" }, text), h("span", { class: "tedu-cand-p" }, ` ${score.toFixed(3)}`)));
  }
  return h("div", {}, h("div", { class: "tedu-label" }, W.beams(Math.min(5, s.beams.length))), list);
}

function showSentence(s, W) {
  const box = h("div", { class: "tedu-sentence" });
  if (s.error) {
    box.append(h("div", { class: "tedu-error", role: "alert" }, W.cannot(s.error)));
    return box;
  }
  if (!s.steps || !s.steps.length) {
    box.append(h("div", { class: "tedu-note" }, `${s.source}: ${W.kept}`));
    return box;
  }
  box.append(showPieces(s, W), showSteps(s, W));
  if (s.beams) box.append(showBeams(s, W));
  box.append(showAttention(s, W));
  return box;
}

function showResult(out, result, W) {
  out.replaceChildren();
  const ss = result.sentences;
  const good = ss.filter((s) => !s.error);
  if (good.length) {
    out.append(h("div", { class: "tedu-text" }, h("span", { class: "tedu-label" }, W.translation),
      h("strong", { lang: "en" }, result.text)));
  }
  if (ss.length === 1) {
    out.append(showSentence(ss[0], W));
    return;
  }
  // several sentences: one tab each, the first open
  const tabs = h("div", { class: "tedu-tabs", role: "tablist" });
  const panel = h("div", { class: "tedu-panel", role: "tabpanel" });
  ss.forEach((s, i) => {
    const tab = h("button", { type: "button", role: "tab", class: "tedu-tab", lang: "ja",
      "aria-selected": String(i === 0), title: W.sentence(i + 1, ss.length) }, s.source);
    tab.addEventListener("click", () => {
      tabs.querySelectorAll("button").forEach((b) => b.setAttribute("aria-selected", String(b === tab)));
      panel.replaceChildren(showSentence(s, W));
    });
    tabs.append(tab);
  });
  panel.append(showSentence(ss[0], W));
  out.append(tabs, panel);
}

// --- where the model runs -----------------------------------------------------------

/** The book's root URL in a Sphinx page (data-content_root), else null. */
function bookRoot() {
  const root = document.documentElement.dataset.content_root;
  return root === undefined ? null : new URL(root, document.baseURI).href;
}

function kernelTranslator(model, W) {
  let next = 0;
  const waiting = new Map();
  model.on("msg:custom", (msg) => {
    const done = waiting.get(msg.id);
    if (msg.type === "result" && done) {
      waiting.delete(msg.id);
      done(msg.result);
    }
  });
  return (text, beam, alpha) =>
    new Promise((resolve) => {
      const id = ++next;
      const timer = setTimeout(() => {
        waiting.delete(id);
        resolve({ sentences: [{ source: text, error: W.kernelWait }], text: "" });
      }, KERNEL_TIMEOUT_MS);
      waiting.set(id, (r) => {
        clearTimeout(timer);
        resolve(r);
      });
      model.send({ type: "translate", id, text, beam, alpha });
    });
}

function control(label, input) {
  return h("label", { class: "tedu-control" }, h("span", { class: "tedu-label" }, label), input);
}

async function render({ model, el }) {
  // the book serves its Japanese font on first use; text drawn in form controls
  // before it arrives keeps its empty boxes, so wait for it (elsewhere: no such font)
  if (document.fonts) await document.fonts.load('16px "IPAexGothic"', "私").catch(() => {});
  const W = words();
  const tatoeba = model.get("kind") === "tatoeba";
  const input = tatoeba
    ? h("textarea", { class: "tedu-input", lang: "ja", rows: "2", "aria-label": W.input })
    : h("input", { type: "text", class: "tedu-input", lang: "ja", "aria-label": W.input });
  input.value = model.get("text");
  const button = h("button", { type: "button", class: "tedu-go" }, W.translate);
  const beam = h("select", { class: "tedu-beam" });
  for (let k = 1; k <= model.get("max_beam"); k++) {
    beam.append(h("option", { value: String(k) }, k === 1 ? W.greedy : String(k)));
  }
  beam.value = String(model.get("beam"));
  const controls = h("div", { class: "tedu-row tedu-controls" }, control(W.beam, beam));
  // 0 to 2 in steps of 0.05: every alpha of the dev sweep (scripts/sweep_tatoeba_decoding.py)
  const alpha = h("input", { type: "range", min: "0", max: "2", step: "0.05", class: "tedu-alpha" });
  const alphaShown = h("output", { class: "tedu-alpha-value" });
  alpha.value = String(model.get("alpha"));
  alphaShown.textContent = Number(alpha.value).toFixed(2);
  if (tatoeba) controls.append(control(W.alpha, alpha), alphaShown);
  const examples = h("div", { class: "tedu-examples" }, h("span", { class: "tedu-label" }, W.try));
  for (const ex of model.get("examples")) {
    const b = h("button", { type: "button", class: "tedu-example", lang: "ja" }, ex);
    b.addEventListener("click", () => {
      input.value = ex;
      run();
    });
    examples.append(b);
  }
  const status = h("div", { class: "tedu-status", role: "status" });
  const out = h("div", { class: "tedu-out" });
  const root = h("div", { class: "tedu-translator" },
    h("div", { class: "tedu-row" }, input, button), controls, examples, status, out);
  el.append(root);

  let translate = null; // (text, beam, alpha) -> Promise(result)
  let load = null; // () -> Promise: loads the model on first use (lazy)
  let queue = Promise.resolve();
  let where = "";
  const setState = (state, message) => {
    root.dataset.state = state;
    status.textContent = message;
  };
  function run() {
    queue = queue.then(async () => {
      if (!translate && load) await load();
      if (!translate) return;
      setState("busy", W.busy);
      const t0 = performance.now();
      let result;
      try {
        result = await translate(input.value, Number(beam.value), Number(alpha.value));
      } catch (e) {
        result = { sentences: [{ source: input.value, error: W.failed(e.message || e) }], text: "" };
      }
      result.ms = performance.now() - t0;
      root.result = result; // for the book's browser test and benchmark
      showResult(out, result, W);
      const failed = result.sentences.every((s) => s.error);
      setState(failed ? "error" : "done", W.took(result.ms.toFixed(1), where));
    });
    return queue;
  }
  button.addEventListener("click", run);
  beam.addEventListener("change", run);
  alpha.addEventListener("input", () => {
    alphaShown.textContent = Number(alpha.value).toFixed(2);
  });
  alpha.addEventListener("change", run);
  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey) {
      e.preventDefault();
      run();
    }
  });
  // for the book's tests and benchmark: translate with these settings
  root.translateText = (text, beamSize = 1, a = Number(alpha.value)) => {
    input.value = text;
    beam.value = String(beamSize);
    alpha.value = String(a);
    return run().then(() => root.result);
  };

  const bookUrl = bookRoot();
  if (bookUrl === null) {
    translate = kernelTranslator(model, W);
    where = "";
    setState("ready", W.kernelReady);
    run();
    return;
  }
  if (location.protocol === "file:") {
    setState("unavailable", W.fileUrl);
    return;
  }
  const modelDir = model.get("model_dir");
  load = async () => {
    load = null;
    setState("loading", W.loading);
    try {
      const m = await loadBrowserModel(bookUrl, modelDir, root.meta);
      root.model = m;
      translate = m.meta.kind === "tatoeba"
        ? (text, b, a) => translateTatoeba(m, text, b, a)
        : (text, b) => translateToy(m, text, b);
      where = W.inBrowser;
      setState("ready", W.loaded(m.loadMs.toFixed(0)));
    } catch (e) {
      setState("unavailable", W.noLoad(e.message || e));
    }
  };
  if (model.get("lazy")) {
    // only the small JSON now (its file sizes); the runtime and graphs on first use
    try {
      root.meta = await fetchJson(`${bookUrl}_static/${modelDir}/${META_FILE}`);
      const b = root.meta.bytes;
      const total = Object.values(b).reduce((x, y) => x + y, 0) + root.meta.runtime_bytes;
      const gz = Object.values(root.meta.gzip_bytes).reduce((x, y) => x + y, 0);
      setState("idle", W.lazy((total / 1e6).toFixed(1), (gz / 1e6).toFixed(1)));
    } catch (e) {
      setState("unavailable", W.noLoad(e.message || e));
      load = null;
    }
    return;
  }
  run();
}

export default { render };
