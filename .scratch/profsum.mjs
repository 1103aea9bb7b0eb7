// Sums self time per frame of a .cpuprofile, per call (divided by CALLS); prints the diff of two profiles.
import { readFileSync } from 'node:fs';
function load(file, calls) {
  const { nodes, samples, timeDeltas } = JSON.parse(readFileSync(file, 'utf8'));
  const byId = new Map(nodes.map((n) => [n.id, n]));
  const self = new Map();
  samples.forEach((id, i) => {
    const { functionName, url, lineNumber } = byId.get(id).callFrame;
    const f = `${functionName || '(anon)'} ${url.replace(/^.*node_modules\//, '').replace(/^file:\/\/.*?\/(libs)\//, '$1/').replace(/^\/work\/main\//, '')}:${lineNumber + 1}`;
    self.set(f, (self.get(f) ?? 0) + (timeDeltas[i + 1] ?? 0) / calls);
  });
  return self;
}
const [a, b] = [load(process.argv[2], Number(process.argv[3])), load(process.argv[4], Number(process.argv[5]))];
const sum = (m) => [...m.values()].reduce((s, v) => s + v, 0);
console.log('a', sum(a).toFixed(1), 'b', sum(b).toFixed(1), 'µs/call');
const keys = new Set([...a.keys(), ...b.keys()]);
const rows = [...keys].map((k) => [k, (b.get(k) ?? 0) - (a.get(k) ?? 0), b.get(k) ?? 0, a.get(k) ?? 0]).sort((x, y) => y[1] - x[1]);
for (const [k, d, vb, va] of rows.slice(0, Number(process.env.TOP ?? 45))) console.log(d.toFixed(2).padStart(8), vb.toFixed(2).padStart(8), va.toFixed(2).padStart(8), k);
console.log('...most negative');
for (const [k, d, vb, va] of rows.slice(-12)) console.log(d.toFixed(2).padStart(8), vb.toFixed(2).padStart(8), va.toFixed(2).padStart(8), k);
