/**
 * Runs a process's dist/main.js (BENCH_HEAP_PROBE_MAIN) and tells what its
 * JavaScript heap held, which VmHWM cannot: VmHWM also counts the garbage V8
 * lets pile up before a full collection, so it grows with a run's length even
 * when nothing is retained (bench/README.md, "Sending").
 *
 * It watches the process's own garbage collections (no collection of its own
 * until asked, so CPU figures stay the process's) and, on SIGUSR2, forces a
 * full collection and writes to BENCH_HEAP_PROBE_FILE, as JSON (MB):
 *   heapAfterGcMb    heap used right after that forced full collection,
 *   livePeakMb       the most heap used right after any of the process's full collections,
 *   heapTotalPeakMb  the most heap V8 had reserved at any collection.
 * With BENCH_SENDING_CPU_PROFILE_DIR set it also profiles the process's CPU from its start, and on SIGUSR2 writes
 * the profile there first (delivery-<pid>.cpuprofile, for Chrome's DevTools or any .cpuprofile reader).
 */
import fs from 'node:fs';
import { Session } from 'node:inspector';
import path from 'node:path';
import { PerformanceObserver, constants } from 'node:perf_hooks';
import v8 from 'node:v8';
import vm from 'node:vm';

export interface HeapFigures {
  heapAfterGcMb: number;
  livePeakMb: number;
  heapTotalPeakMb: number;
}

const MB = 1024 * 1024;
const main = process.env.BENCH_HEAP_PROBE_MAIN;
const file = process.env.BENCH_HEAP_PROBE_FILE;
if (!main || !file) throw new Error('heap-probe: BENCH_HEAP_PROBE_MAIN and BENCH_HEAP_PROBE_FILE must be set');

v8.setFlagsFromString('--expose-gc');
const collect = vm.runInNewContext('gc') as () => void;

let livePeak = 0;
let heapTotalPeak = 0;
new PerformanceObserver((list) => {
  const { used_heap_size: used, total_heap_size: total } = v8.getHeapStatistics();
  heapTotalPeak = Math.max(heapTotalPeak, total);
  const full = list
    .getEntries()
    .some((entry) => (entry as { detail?: { kind?: number } }).detail?.kind === constants.NODE_PERFORMANCE_GC_MAJOR);
  if (full) livePeak = Math.max(livePeak, used);
}).observe({ entryTypes: ['gc'] });

const profileDir = process.env.BENCH_SENDING_CPU_PROFILE_DIR;
const profiler = profileDir ? new Session() : undefined;
if (profiler) {
  profiler.connect();
  profiler.post('Profiler.enable', () => profiler.post('Profiler.start'));
}

process.on('SIGUSR2', () => {
  if (profiler && profileDir) {
    profiler.post('Profiler.stop', (error, result) => {
      if (!error) fs.writeFileSync(path.join(profileDir, `delivery-${process.pid}.cpuprofile`), JSON.stringify(result.profile));
    });
  }
  collect();
  const figures: HeapFigures = {
    heapAfterGcMb: v8.getHeapStatistics().used_heap_size / MB,
    livePeakMb: livePeak / MB,
    heapTotalPeakMb: heapTotalPeak / MB,
  };
  fs.writeFileSync(file, JSON.stringify(figures));
});

// eslint-disable-next-line @typescript-eslint/no-require-imports -- the process under test, loaded after the probe is in place
require(main);
