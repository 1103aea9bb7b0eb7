// The figures of `npm run bench`: medians and ranges over rounds, and how they are printed. Used by bench.mjs,
// sections.mjs, module-work.mjs and profile.mjs.
export const f0 = (n) => n.toFixed(0);
export const f2 = (n) => n.toFixed(2);

export const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};

/** A figure over rounds: its median and its range. */
export const spreadOf = (values) => ({ median: median(values), min: Math.min(...values), max: Math.max(...values) });

/** Per-round ratios of one route's figure to another's in a scenario, as median [min–max]. */
export const perRound = (result, ours, other, figure) =>
  spreadOf(result.runs[ours].map((run, i) => run[figure] / result.runs[other][i][figure]));

/** `median [min–max]`, to two decimals. */
export const show = ({ median: m, min, max }) => `${f2(m)} [${f2(min)}–${f2(max)}]`;
