// The toy translator of chapter 10 as an anywidget front end (an ES module held in
// the widget's state). In the book's static page it runs the exported ONNX graphs
// with onnxruntime-web (WASM) from the book's own _static folder; in Jupyter or
// Colab, where there is no _static, it asks the Python model in the kernel through
// the widget's custom messages. Both give the same view: the segmentation, each
// greedy step with its top-5 next tokens, the translation and the cross-attention.

const ORT_DIR = "_static/vendor/onnxruntime-web/";
const ORT_MODULE = "ort.wasm.bundle.min.js";
const ORT_WASM = "ort-wasm-simd-threaded.wasm";
const MODEL_DIR = "_static/translator/";
const META_FILE = "translator.json";
const TRAILING = "。．.？?！!"; // data._TRAILING: final punctuation segment() drops
const KERNEL_TIMEOUT_MS = 60000;

// --- segmentation: the same as transformer_edu.data.segment -----------------------

/** Words by longest match over `lexicon`; spaces separate chunks (data.segment). */
export function segment(text, lexicon) {
  const words = lexicon instanceof Set ? lexicon : new Set(lexicon);
  let longest = 1;
  for (const w of words) longest = Math.max(longest, Array.from(w).length);
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
        if (words.has(piece)) {
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

/** data.detokenize_en: tokens back to text, punctuation attached. */
function detokenize(tokens) {
  let out = "";
  for (const t of tokens) out += "?!.,".includes(t) || !out ? t : " " + t;
  return out;
}

/** The checks translate() makes, with its messages; null when the input is fine. */
function inputProblem(tokens, known, maxLen) {
  if (!tokens.length) return "the sentence is empty";
  if (tokens.every((t) => !known.has(t))) {
    const unknown = [...new Set(tokens)];
    return `every word is unknown to the model: ${unknown.join(" ")}`;
  }
  if (maxLen !== null && tokens.length > maxLen) {
    return `the sentence has ${tokens.length} tokens, more than the model's max_len=${maxLen}`;
  }
  return null;
}

// --- the model in the page: onnxruntime-web on the exported graphs ----------------

async function fetchBytes(url) {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`);
  return new Uint8Array(await response.arrayBuffer());
}

/** Load onnxruntime-web, the two graphs and the JSON from the book's _static. */
export async function loadBrowserModel(root) {
  const t0 = performance.now();
  const ort = await import(root + ORT_DIR + ORT_MODULE);
  // one thread: a plain static server gives no SharedArrayBuffer (cross-origin
  // isolation); the toy model needs no more
  ort.env.wasm.numThreads = 1;
  ort.env.wasm.proxy = false;
  ort.env.logLevel = "error";
  const [wasm, meta] = await Promise.all([
    fetchBytes(root + ORT_DIR + ORT_WASM),
    fetch(root + MODEL_DIR + META_FILE).then((r) => {
      if (!r.ok) throw new Error(`${META_FILE}: HTTP ${r.status}`);
      return r.json();
    }),
  ]);
  // handing the bytes over avoids a streaming compile that needs application/wasm;
  // no wasmPaths, so the bundle uses its own WASM glue instead of fetching one
  ort.env.wasm.wasmBinary = wasm.buffer;
  const [encBytes, decBytes] = await Promise.all([
    fetchBytes(root + MODEL_DIR + meta.encoder),
    fetchBytes(root + MODEL_DIR + meta.decoder),
  ]);
  const options = { executionProviders: ["wasm"], graphOptimizationLevel: "all" };
  const encoder = await ort.InferenceSession.create(encBytes, options);
  const decoder = await ort.InferenceSession.create(decBytes, options);
  const bytes = wasm.byteLength + encBytes.byteLength + decBytes.byteLength;
  return {
    ort, encoder, decoder, meta, bytes,
    lexicon: new Set(meta.lexicon),
    stoi: new Map(meta.src_itos.map((t, i) => [t, i])),
    loadMs: performance.now() - t0,
  };
}

/** Greedy decoding with a trace, as translate(..., trace=True). */
export async function translateInBrowser(m, text) {
  const t0 = performance.now();
  const { ort, meta } = m;
  const tokens = segment(text, m.lexicon);
  const problem = inputProblem(tokens, m.stoi, meta.max_len);
  if (problem) return { error: problem, tokens };
  const ids = tokens.map((t) => (m.stoi.has(t) ? m.stoi.get(t) : meta.unk_id));
  const src = new ort.Tensor("int64", BigInt64Array.from(ids, BigInt), [1, ids.length]);
  const { memory, src_mask } = await m.encoder.run({ src });
  const ys = [meta.bos_id];
  const steps = [];
  for (let k = 0; k < meta.max_output; k++) {
    const tgt = new ort.Tensor("int64", BigInt64Array.from(ys, BigInt), [1, ys.length]);
    const out = await m.decoder.run({ tgt, memory, src_mask });
    const logp = out.log_probs.data; // (V,)
    const order = Array.from(logp.keys()).sort((a, b) => logp[b] - logp[a] || a - b);
    const top = order.slice(0, meta.top_k);
    const [L, H, S] = out.cross_attention.dims;
    const w = out.cross_attention.data;
    const attn = [];
    for (let l = 0; l < L; l++) {
      const heads = [];
      for (let h = 0; h < H; h++) {
        heads.push(Array.from(w.subarray((l * H + h) * S, (l * H + h + 1) * S)));
      }
      attn.push(heads);
    }
    steps.push({
      prefix: ys.map((i) => meta.tgt_itos[i]),
      top: top.map((i) => [meta.tgt_itos[i], Math.exp(logp[i])]),
      top_ids: top,
      chosen: meta.tgt_itos[top[0]],
      chosen_id: top[0],
      attn,
    });
    ys.push(top[0]);
    if (top[0] === meta.eos_id) break;
  }
  const output = ys.slice(1).map((i) => meta.tgt_itos[i]);
  const eos = meta.tgt_itos[meta.eos_id];
  const words = output.includes(eos) ? output.slice(0, output.indexOf(eos)) : output;
  return {
    tokens,
    unknown: [...new Set(tokens.filter((t) => !m.stoi.has(t)))],
    steps,
    text: detokenize(words),
    ms: performance.now() - t0,
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

function showSegmentation(result) {
  const unknown = new Set(result.unknown || []);
  const chips = result.tokens.map((t) =>
    unknown.has(t)
      ? h("span", { class: "tedu-tok tedu-unknown", title: "unknown: read as <unk>" }, t)
      : h("span", { class: "tedu-tok" }, t),
  );
  const line = h("div", { class: "tedu-seg" }, h("span", { class: "tedu-label" },
    "encoder reads"), ...chips);
  if (unknown.size) {
    line.append(h("span", { class: "tedu-note" },
      `unknown (read as <unk>): ${[...unknown].join(", ")}`));
  }
  return line;
}

function showSteps(result) {
  const rows = result.steps.map((s, k) => {
    const top = h("div", { class: "tedu-top" });
    s.top.forEach(([tok, p], j) => {
      const bar = h("span", { class: "tedu-bar", style: `width:${(p * 100).toFixed(1)}%` });
      top.append(h("div", { class: j === 0 ? "tedu-cand tedu-chosen" : "tedu-cand",
        title: `p = ${p.toFixed(6)}` }, h("span", { class: "tedu-cand-tok" }, tok),
        h("span", { class: "tedu-cand-bar" }, bar),
        h("span", { class: "tedu-cand-p" }, p.toFixed(3))));
    });
    return h("tr", {}, h("td", {}, String(k + 1)), h("td", { class: "tedu-prefix" },
      s.prefix.join(" ")), h("td", { class: "tedu-chosen-tok" }, s.chosen),
      h("td", {}, top));
  });
  return h("table", { class: "tedu-steps" }, h("thead", {}, h("tr", {},
    h("th", {}, "step"), h("th", {}, "given"), h("th", {}, "→ next"),
    h("th", {}, "top-5 next tokens"))), h("tbody", {}, ...rows));
}

function showAttention(result) {
  const L = result.steps[0].attn.length;
  const H = result.steps[0].attn[0].length;
  const grid = h("div", { class: "tedu-maps" });
  for (let l = 0; l < L; l++) {
    for (let hd = 0; hd < H; hd++) {
      const head = h("tr", {}, h("th", {}), ...result.tokens.map((t) => h("th", {}, t)));
      const rows = result.steps.map((s) => h("tr", {}, h("th", {}, s.chosen),
        ...s.attn[l][hd].map((w, j) => h("td", {
          style: `background:rgba(31,119,180,${w.toFixed(3)})`,
          title: `${s.chosen} → ${result.tokens[j]}: ${w.toFixed(3)}`,
        }))));
      grid.append(h("figure", { class: "tedu-map" },
        h("figcaption", {}, `layer ${l + 1}, head ${hd + 1}`),
        h("table", {}, h("thead", {}, head), h("tbody", {}, ...rows))));
    }
  }
  return h("div", {}, h("div", { class: "tedu-label" },
    "cross-attention of each greedy step (rows) over the source (columns)"), grid);
}

function showResult(out, result) {
  out.replaceChildren();
  if (result.error) {
    out.append(h("div", { class: "tedu-error", role: "alert" },
      `cannot translate: ${result.error}`));
    return;
  }
  out.append(
    h("div", { class: "tedu-text" }, h("span", { class: "tedu-label" }, "translation"),
      h("strong", {}, result.text)),
    showSegmentation(result),
    showSteps(result),
    showAttention(result),
  );
}

// --- where the model runs -----------------------------------------------------------

/** The book's root URL in a Sphinx page (data-content_root), else null. */
function bookRoot() {
  const root = document.documentElement.dataset.content_root;
  return root === undefined ? null : new URL(root, document.baseURI).href;
}

function kernelTranslator(model) {
  let next = 0;
  const waiting = new Map();
  model.on("msg:custom", (msg) => {
    const done = waiting.get(msg.id);
    if (msg.type === "result" && done) {
      waiting.delete(msg.id);
      done(msg.result);
    }
  });
  return (text) =>
    new Promise((resolve) => {
      const id = ++next;
      const timer = setTimeout(() => {
        waiting.delete(id);
        resolve({ error: "no kernel answered: run the notebook's cells first" });
      }, KERNEL_TIMEOUT_MS);
      waiting.set(id, (r) => {
        clearTimeout(timer);
        resolve(r);
      });
      model.send({ type: "translate", id, text });
    });
}

async function render({ model, el }) {
  // the book serves its Japanese font on first use; text drawn in form controls
  // before it arrives keeps its empty boxes, so wait for it (elsewhere: no such font)
  if (document.fonts) await document.fonts.load('16px "IPAexGothic"', "私").catch(() => {});
  const input = h("input", { type: "text", class: "tedu-input", lang: "ja",
    "aria-label": "Japanese sentence" });
  input.value = model.get("text");
  const button = h("button", { type: "button", class: "tedu-go" }, "Translate");
  const examples = h("div", { class: "tedu-examples" }, h("span", { class: "tedu-label" },
    "try"));
  for (const ex of model.get("examples")) {
    const b = h("button", { type: "button", class: "tedu-example" }, ex);
    b.addEventListener("click", () => {
      input.value = ex;
      run();
    });
    examples.append(b);
  }
  const status = h("div", { class: "tedu-status", role: "status" });
  const out = h("div", { class: "tedu-out" });
  const root = h("div", { class: "tedu-translator", lang: "en" },
    h("div", { class: "tedu-row" }, input, button), examples, status, out);
  el.append(root);

  let translate = null; // text -> Promise(result)
  let queue = Promise.resolve();
  const setState = (state, message) => {
    root.dataset.state = state;
    status.textContent = message;
  };
  function run() {
    if (!translate) return Promise.resolve();
    const text = input.value;
    queue = queue.then(async () => {
      setState("busy", "translating…");
      let result;
      try {
        result = await translate(text);
      } catch (e) {
        result = { error: `the model failed: ${e.message || e}` };
      }
      root.result = result; // for the book's browser test and benchmark
      showResult(out, result);
      setState(result.error ? "error" : "done", result.ms === undefined ? ""
        : `translated in your browser in ${result.ms.toFixed(1)} ms`);
    });
    return queue;
  }
  button.addEventListener("click", run);
  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter") run();
  });
  root.translateText = (text) => {
    input.value = text;
    return run().then(() => root.result);
  };
  root.segment = (text) => segment(text, root.model ? root.model.lexicon : []);

  const bookUrl = bookRoot();
  if (bookUrl === null) {
    translate = kernelTranslator(model);
    setState("ready", "the Python model in the kernel translates");
    run();
  } else if (location.protocol === "file:") {
    setState("unavailable", "The in-browser translator needs the book served over "
      + "HTTP (browsers block its model from file://): run `python -m http.server "
      + "-d _build/html` and open http://localhost:8000/.");
  } else {
    setState("loading", "loading the model into your browser…");
    loadBrowserModel(bookUrl).then((m) => {
      root.model = m;
      translate = (text) => translateInBrowser(m, text);
      setState("ready", `model loaded in ${m.loadMs.toFixed(0)} ms`);
      run();
    }, (e) => {
      setState("unavailable", `the in-browser model did not load: ${e.message || e}`);
    });
  }
}

export default { render };
