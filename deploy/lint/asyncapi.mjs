// Checks an AsyncAPI document with the AsyncAPI Initiative's own parser
// (@asyncapi/parser: the specification's JSON Schema plus its Spectral
// rules). Prints every diagnostic; exits 1 when one is an error or a
// warning, 2 when the document cannot be read.
//
//   node deploy/lint/asyncapi.mjs docs/asyncapi.yaml
import { Parser, fromFile } from '@asyncapi/parser';

const severities = ['error', 'warning', 'info', 'hint'];

const file = process.argv[2];
if (!file) {
  console.error('usage: node asyncapi.mjs FILE');
  process.exit(2);
}
let result;
try {
  result = await fromFile(new Parser(), file).parse();
} catch (err) {
  console.error(`${file}: ${err.message}`);
  process.exit(2);
}
let failed = !result.document;
for (const d of result.diagnostics) {
  const severity = severities[d.severity] ?? String(d.severity);
  const line = d.range ? `${d.range.start.line + 1}:${d.range.start.character + 1}` : '-';
  console.log(`${file}:${line} ${severity} ${d.code} at ${d.path.join('.') || '(root)'}: ${d.message}`);
  if (d.severity <= 1) {
    failed = true;
  }
}
console.log(failed ? `${file}: invalid` : `${file}: valid`);
process.exit(failed ? 1 : 0);
