// Chapter 13's tiny GPT sampling in the page (transformer_edu/browser/sampler_widget.py
// describes it): a prompt, temperature, top-k, top-p and a seed. In the book's static
// page the model (ONNX bytes in the widget's state) runs with onnxruntime-web, loaded
// from the book's _static when the reader first moves a control; in Jupyter or Colab
// the kernel answers. Both draw with decoding.next_token_probs's rules (here in
// float64) and the same random numbers (Mulberry32), so a seed gives the same samples.

const ORT_DIR = "_static/vendor/onnxruntime-web/";
const ORT_MODULE = "ort.wasm.bundle.min.js";
const ORT_WASM = "ort-wasm-simd-threaded.wasm";
const PUNCTUATION = ["?", "!", ".", ","]; // toy.data._PUNCTUATION
const PY_SPACE = /[\t\n\v\f\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+/;
const TOP_WORDS = 10;
const N_SAMPLES = 5;
const MAX_NEW = 20;
const TOP_KS = [0, 1, 2, 3, 5, 10, 20];

const WORDS = {
  en: {
    prompt: "prompt", temperature: "temperature τ (0: greedy)", topK: "top-k",
    topP: "top-p", seed: "seed", off: "off", next: "next word after the prompt",
    samples: (n) => (n === 1 ? "greedy continuation" : `${n} continuations`),
    unknown: (w) => `not in the vocabulary (read as <unk>): ${w}`,
    loading: "loading the model into your browser…",
    kernel: "the Python model in the kernel samples",
    inBrowser: (ms) => `sampled in your browser in ${ms} ms`,
    built: "computed when the book was built; move a control to sample in your browser",
    fileUrl: "Sampling in the page needs the book served over HTTP (browsers block "
      + "its runtime from file://): run `python -m http.server -d _build/html`.",
    failed: (e) => `the model did not run: ${e}`,
  },
  ja: {
    prompt: "プロンプト", temperature: "温度 τ（0：貪欲）", topK: "top-k",
    topP: "top-p", seed: "シード", off: "なし", next: "プロンプトの次の語",
    samples: (n) => (n === 1 ? "貪欲な続き" : `続き ${n} 通り`),
    unknown: (w) => `語彙にない語（<unk> として読む）：${w}`,
    loading: "モデルをブラウザに読み込み中…",
    kernel: "カーネルの Python モデルがサンプリングする",
    inBrowser: (ms) => `ブラウザ内で ${ms} ms でサンプリングした`,
    built: "本のビルド時に計算した結果である。操作するとブラウザ内でサンプリングする",
    fileUrl: "ページ内のサンプリングには、本を HTTP で配信する必要がある（ブラウザは "
      + "file:// からランタイムを読み込ませない）：`python -m http.server -d _build/html` "
      + "を実行すること。",
    failed: (e) => `モデルを実行できなかった：${e}`,
  },
};

function words() {
  const lang = (document.documentElement.lang || "en").slice(0, 2);
  return WORDS[lang] || WORDS.en;
}

/** Mulberry32, as sampler_widget.Mulberry32: uniform() in [0, 1). */
export function mulberry32(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The first `n` numbers of mulberry32(seed) (for the tests). */
export function mulberryStream(seed, n) {
  const next = mulberry32(seed);
  return Array.from({ length: n }, next);
}

/** toy.data.tokenize_en: words split on whitespace, ? ! . , tokens of their own. */
export function tokenizeEn(text) {
  for (const mark of PUNCTUATION) text = text.split(mark).join(` ${mark} `);
  return text.split(PY_SPACE).filter((w) => w);
}

/** toy.data.detokenize_en. */
function detokenize(tokens) {
  let out = "";
  for (const t of tokens) out += PUNCTUATION.includes(t) || !out ? t : " " + t;
  return out;
}

function softmax(z) {
  let m = -Infinity;
  for (const v of z) if (v > m) m = v;
  const e = z.map((v) => (v === -Infinity ? 0 : Math.exp(v - m)));
  const s = e.reduce((a, b) => a + b, 0);
  return e.map((v) => v / s);
}

/** decoding.next_token_probs for one row (float64): τ, top-k, top-p. */
export function nextTokenProbs(logits, temperature, topK, topP) {
  let z = Array.from(logits, (v) => v / temperature);
  if (topK) {
    const kth = [...z].sort((a, b) => b - a)[Math.min(topK, z.length) - 1];
    z = z.map((v) => (v < kth ? -Infinity : v));
  }
  if (topP < 1) {
    const p = softmax(z);
    // descending by probability; ties keep index order (torch.sort's order on ties is
    // not specified; tied probabilities are equally kept or dropped in practice)
    const order = p.map((_, i) => i).sort((a, b) => p[b] - p[a] || a - b);
    let before = 0;
    for (const i of order) {
      const outside = before >= topP; // the mass before this token already reaches p
      before += p[i];
      if (outside) z[i] = -Infinity;
    }
  }
  return softmax(z);
}

/** sampler_widget.sample_index: inverse transform sampling. */
export function sampleIndex(probs, u) {
  let total = 0;
  let last = 0;
  for (let i = 0; i < probs.length; i++) {
    if (probs[i] > 0) {
      total += probs[i];
      last = i;
      if (u < total) return i;
    }
  }
  return last;
}

function argmax(a) {
  let best = 0;
  for (let i = 1; i < a.length; i++) if (a[i] > a[best]) best = i;
  return best;
}

/** sampler_widget.sample: continuations (ids, EOS included). */
export async function sample(nextLogits, prompt, { n, temperature, topK, topP, seed, never, eos, maxNew }) {
  const rng = mulberry32(seed);
  const out = [];
  for (let s = 0; s < (temperature === 0 ? 1 : n); s++) {
    const ids = [...prompt];
    for (let k = 0; k < maxNew; k++) {
      const logits = Array.from(await nextLogits(ids));
      for (const i of never) logits[i] = -Infinity;
      const nxt = temperature === 0
        ? argmax(logits)
        : sampleIndex(nextTokenProbs(logits, temperature, topK, topP), rng());
      ids.push(nxt);
      if (nxt === eos) break;
    }
    out.push(ids.slice(prompt.length));
  }
  return out;
}

/** sampler_widget.sampler_view, in the page. */
async function view(m, s) {
  const words = tokenizeEn(s.prompt);
  const stoi = m.stoi;
  const ids = [m.bos, ...words.map((w) => (stoi.has(w) ? stoi.get(w) : m.unk))].slice(-m.maxLen);
  const nextLogits = (prefix) => m.run(prefix.slice(-m.maxLen));
  const logits = Array.from(await nextLogits(ids));
  for (const i of m.never) logits[i] = -Infinity;
  let next;
  if (s.temperature === 0) {
    next = [[argmax(logits), 1]];
  } else {
    const p = nextTokenProbs(logits, s.temperature, s.top_k, s.top_p);
    next = p.map((q, i) => [i, q]).sort((a, b) => b[1] - a[1] || a[0] - b[0])
      .slice(0, TOP_WORDS).filter(([, q]) => q > 0);
  }
  const samples = await sample(nextLogits, ids, {
    n: N_SAMPLES, temperature: s.temperature, topK: s.top_k, topP: s.top_p, seed: s.seed,
    never: m.never, eos: m.eos, maxNew: MAX_NEW,
  });
  const decode = (row) => {
    const cut = row.indexOf(m.eos);
    return detokenize((cut < 0 ? row : row.slice(0, cut))
      .filter((i) => i > m.eos).map((i) => m.itos[i]));
  };
  return {
    tokens: words,
    unknown: [...new Set(words.filter((w) => !stoi.has(w)))],
    next: next.map(([i, q]) => [m.itos[i], q]),
    samples: samples.map(decode),
  };
}

function base64Bytes(text) {
  const bin = atob(text);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

async function loadModel(root, model) {
  const ort = await import(root + ORT_DIR + ORT_MODULE);
  ort.env.wasm.numThreads = 1;
  ort.env.wasm.proxy = false;
  ort.env.logLevel = "error";
  const response = await fetch(root + ORT_DIR + ORT_WASM);
  if (!response.ok) throw new Error(`${ORT_WASM}: HTTP ${response.status}`);
  ort.env.wasm.wasmBinary = await response.arrayBuffer();
  const session = await ort.InferenceSession.create(base64Bytes(model.get("onnx")),
    { executionProviders: ["wasm"], graphOptimizationLevel: "all" });
  const itos = model.get("itos");
  return {
    itos, stoi: new Map(itos.map((w, i) => [w, i])), never: model.get("never"),
    bos: model.get("bos"), eos: model.get("eos"), unk: model.get("unk"),
    maxLen: model.get("max_len"),
    run: async (ids) => {
      const tokens = new ort.Tensor("int64", BigInt64Array.from(ids, BigInt), [1, ids.length]);
      return (await session.run({ tokens })).logits.data;
    },
  };
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

function control(label, input, shown) {
  const l = h("label", { class: "tedu-control" }, h("span", { class: "tedu-label" }, label), input);
  if (shown) l.append(shown);
  return l;
}

function showResult(out, r, W) {
  out.replaceChildren();
  if (r.unknown && r.unknown.length) out.append(h("div", { class: "tedu-note" }, W.unknown(r.unknown.join(", "))));
  const bars = h("div", { class: "tedu-next" });
  for (const [word, p] of r.next) {
    bars.append(h("div", { class: "tedu-cand", title: `p = ${p.toFixed(6)}` },
      h("span", { class: "tedu-cand-tok", lang: "en" }, word),
      h("span", { class: "tedu-cand-bar" }, h("span", { class: "tedu-bar", style: `width:${(p * 100).toFixed(1)}%` })),
      h("span", { class: "tedu-cand-p" }, p.toFixed(3))));
  }
  const list = h("ol", { class: "tedu-samples", lang: "en" });
  for (const s of r.samples) list.append(h("li", {}, s));
  out.append(h("div", { class: "tedu-label" }, W.next), bars,
    h("div", { class: "tedu-label" }, W.samples(r.samples.length)), list);
}

function kernelSampler(model) {
  let next = 0;
  const waiting = new Map();
  model.on("msg:custom", (msg) => {
    const done = waiting.get(msg.id);
    if (msg.type === "result" && done) {
      waiting.delete(msg.id);
      done(msg.result);
    }
  });
  return (settings) => new Promise((resolve) => {
    const id = ++next;
    waiting.set(id, resolve);
    model.send({ type: "sample", id, ...settings });
  });
}

function render({ model, el }) {
  const W = words();
  const prompt = h("input", { type: "text", class: "tedu-input", lang: "en" });
  prompt.value = model.get("prompt");
  const temperature = h("input", { type: "range", min: "0", max: "2", step: "0.1" });
  temperature.value = String(model.get("temperature"));
  const tShown = h("output", {});
  const topK = h("select", {});
  for (const k of TOP_KS) topK.append(h("option", { value: String(k) }, k ? String(k) : W.off));
  topK.value = String(model.get("top_k"));
  const topP = h("input", { type: "range", min: "0.05", max: "1", step: "0.05" });
  topP.value = String(model.get("top_p"));
  const pShown = h("output", {});
  const seed = h("input", { type: "number", min: "0", max: "999", step: "1", class: "tedu-seed" });
  seed.value = String(model.get("seed"));
  const status = h("div", { class: "tedu-status", role: "status" });
  const out = h("div", { class: "tedu-out" });
  const shown = () => {
    tShown.textContent = Number(temperature.value).toFixed(1);
    pShown.textContent = Number(topP.value).toFixed(2);
  };
  shown();
  const root = h("div", { class: "tedu-sampler" },
    h("div", { class: "tedu-row" }, control(W.prompt, prompt)),
    h("div", { class: "tedu-row tedu-controls" }, control(W.temperature, temperature, tShown),
      control(W.topK, topK), control(W.topP, topP, pShown), control(W.seed, seed)),
    status, out);
  el.append(root);
  const settings = () => ({
    prompt: prompt.value, temperature: Number(temperature.value), top_k: Number(topK.value),
    top_p: Number(topP.value), seed: Math.max(0, Math.floor(Number(seed.value) || 0)),
  });
  showResult(out, model.get("initial"), W);

  const root_ = document.documentElement.dataset.content_root;
  const bookUrl = root_ === undefined ? null : new URL(root_, document.baseURI).href;
  let compute = null;
  let loading = null;
  if (bookUrl === null) {
    compute = kernelSampler(model);
    status.textContent = W.kernel;
  } else if (location.protocol === "file:") {
    root.dataset.state = "unavailable";
    status.textContent = W.fileUrl;
  } else {
    root.dataset.state = "idle";
    status.textContent = W.built;
    loading = () => {
      loading = null;
      status.textContent = W.loading;
      return loadModel(bookUrl, model).then((m) => {
        root.model = m;
        compute = (s) => view(m, s);
      }, (e) => {
        root.dataset.state = "unavailable";
        status.textContent = W.failed(e.message || e);
      });
    };
  }
  let queue = Promise.resolve();
  const run = () => {
    queue = queue.then(async () => {
      if (!compute && loading) {
        root.dataset.state = "loading";
        await loading();
      }
      if (!compute) return;
      root.dataset.state = "busy";
      const t0 = performance.now();
      const r = await compute(settings());
      root.result = r;
      showResult(out, r, W);
      root.dataset.state = "done";
      if (bookUrl !== null) status.textContent = W.inBrowser((performance.now() - t0).toFixed(0));
    }).catch((e) => {
      root.dataset.state = "error";
      status.textContent = W.failed(e.message || e);
    });
    return queue;
  };
  root.sampleWith = (s) => {
    prompt.value = s.prompt;
    temperature.value = String(s.temperature);
    topK.value = String(s.top_k);
    topP.value = String(s.top_p);
    seed.value = String(s.seed);
    shown();
    return run().then(() => root.result);
  };
  for (const c of [temperature, topP]) c.addEventListener("input", shown);
  for (const c of [temperature, topK, topP, seed]) c.addEventListener("change", run);
  prompt.addEventListener("change", run);
  for (const c of [prompt, seed]) {
    c.addEventListener("keydown", (e) => {
      if (e.key === "Enter") run();
    });
  }
}

export default { render };
