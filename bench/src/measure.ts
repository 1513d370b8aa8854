/** Small statistics helpers shared by the benchmarks. */

/** Nearest-rank percentile of an ascending array. */
export function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

export function round(value: number, digits = 2): number {
  return Math.round(value * 10 ** digits) / 10 ** digits;
}

/** Latencies in ms, ascending, summarized. */
export function summarize(sorted: readonly number[]): { p50Ms: number; p99Ms: number; maxMs: number } {
  return { p50Ms: round(percentile(sorted, 50)), p99Ms: round(percentile(sorted, 99)), maxMs: round(sorted[sorted.length - 1]) };
}

/** Progress goes to stderr, so stdout holds only the suite's report. */
export function log(scope: string, line: string): void {
  process.stderr.write(`[${scope}] ${line}\n`);
}

/**
 * Sends every item, `concurrency` at a time, each again until `send` says it
 * was accepted (a 503 is retried, as a provider retries); resolves to the
 * number of refused attempts.
 */
export async function sendAll<T>(items: readonly T[], concurrency: number, send: (item: T) => Promise<boolean>): Promise<number> {
  let next = 0;
  let refused = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < items.length) {
        const item = items[next++];
        while (!(await send(item))) refused++;
      }
    }),
  );
  return refused;
}
