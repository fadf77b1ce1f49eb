// Calls exported functions of an ES module of the package, for the Python tests.
// usage: node js_call.mjs MODULE_JS JOB_JSON OUT_JSON
// JOB_JSON: [[function name, [args...]], ...]; OUT_JSON: their results, in order
// ({"error": message} for a call that threw). A stub `document` lets a widget module
// load (its render() is never called here).
import { readFileSync, writeFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

globalThis.document = { documentElement: { lang: "en", dataset: {} } };
const [modulePath, jobPath, outPath] = process.argv.slice(2);
const mod = await import(pathToFileURL(modulePath).href);
const job = JSON.parse(readFileSync(jobPath, "utf8"));
const out = [];
for (const [name, args] of job) {
  try {
    out.push(await mod[name](...args));
  } catch (e) {
    out.push({ error: String(e && e.message ? e.message : e) });
  }
}
writeFileSync(outPath, JSON.stringify(out));
