// Runs transformer_edu/browser/static/spm.js over a file of inputs, for tests/browser/test_spm_js.py.
// usage: node spm_js_run.mjs SPM_JS VOCAB_JSON JOB_JSON OUT_JSONL
// JOB_JSON: {"texts": [string, ...], "ids": [[int, ...], ...], "nfkc": bool}
// OUT_JSONL: one line per text, [pieces, ids, decode(ids), normalize(text)] (if
// "nfkc": [normalize(text), text.normalize("NFKC")] instead), then one line per id
// list: decode(ids), or {"error": the name of what decode threw}.
import { readFileSync, writeFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

const [spmJs, vocabPath, jobPath, outPath] = process.argv.slice(2);
const { SentencePiece } = await import(pathToFileURL(spmJs).href);
const sp = new SentencePiece(JSON.parse(readFileSync(vocabPath, "utf8")));
const job = JSON.parse(readFileSync(jobPath, "utf8"));
const lines = [];
for (const text of job.texts) {
  if (job.nfkc) {
    lines.push(JSON.stringify([sp.normalize(text), text.normalize("NFKC")]));
    continue;
  }
  const { pieces, ids } = sp.encode(text);
  lines.push(JSON.stringify([pieces, ids, sp.decode(ids), sp.normalize(text)]));
}
for (const ids of job.ids) {
  let decoded;
  try {
    decoded = sp.decode(ids);
  } catch (e) {
    decoded = { error: e.name };
  }
  lines.push(JSON.stringify(decoded));
}
writeFileSync(outPath, lines.join("\n") + "\n");
