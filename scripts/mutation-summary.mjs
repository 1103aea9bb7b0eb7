// Summarises reports/mutation/mutation.json (written by `npm run test:mutation`) as Markdown: the score per file and
// every surviving or uncovered mutant with its line and replacement. The judgement of each survivor is written by
// hand in test/MUTATION.md.
import { readFileSync } from 'node:fs';

const report = JSON.parse(readFileSync(process.argv[2] ?? 'reports/mutation/mutation.json', 'utf8'));
const rows = [];
const survivors = [];
const totals = { detected: 0, undetected: 0, invalid: 0 };
for (const [path, file] of Object.entries(report.files).sort(([a], [b]) => a.localeCompare(b))) {
  const count = (...statuses) => file.mutants.filter((m) => statuses.includes(m.status)).length;
  const killed = count('Killed');
  const timeout = count('Timeout');
  const survived = count('Survived');
  const noCoverage = count('NoCoverage');
  const invalid = count('CompileError', 'RuntimeError');
  const detected = killed + timeout;
  const undetected = survived + noCoverage;
  totals.detected += detected;
  totals.undetected += undetected;
  totals.invalid += invalid;
  const score = ((detected / (detected + undetected)) * 100).toFixed(1);
  rows.push(
    `| \`${path.replace(/^libs\/idempotency\/src\//, '')}\` | ${score} % | ${killed} | ${timeout} | ${survived} | ${noCoverage} | ${invalid} |`,
  );
  const lines = file.source.split('\n');
  for (const m of file.mutants.filter((m) => m.status === 'Survived' || m.status === 'NoCoverage')) {
    const line = m.location.start.line;
    survivors.push(
      `| \`${path.replace(/^libs\/idempotency\/src\//, '')}:${line}\` | ${m.status} | ${m.mutatorName} | \`${lines[line - 1].trim().slice(0, 90).replace(/\|/g, '\\|')}\` → \`${String(
        m.replacement ?? '',
      )
        .replace(/\s+/g, ' ')
        .slice(0, 60)
        .replace(/\|/g, '\\|')}\` |`,
    );
  }
}
const total = ((totals.detected / (totals.detected + totals.undetected)) * 100).toFixed(1);
console.log(`| file | score | killed | timed out | survived | no coverage | compile/runtime error |
|---|---:|---:|---:|---:|---:|---:|
${rows.join('\n')}
| **all** | **${total} %** | | | | | ${totals.invalid} |

| where | status | mutator | original → replacement |
|---|---|---|---|
${survivors.join('\n')}`);
