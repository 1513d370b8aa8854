/**
 * Resident memory of the processes under test, sampled once a second while
 * the suite runs: the peak sample and the last one per process.
 */
import { statusMb } from './proc';
import { round } from './measure';

export interface MemoryFigure {
  /** Highest sample, MB. */
  peakMb: number;
  /** Last sample while the process ran, MB. */
  lastMb: number;
  /** What was read: VmRSS of one process, or a sum defined by the source. */
  measure: string;
}

interface Source {
  measure: string;
  read: () => number | undefined;
}

export class MemorySampler {
  private readonly sources = new Map<string, Source>();
  private readonly figures = new Map<string, MemoryFigure>();
  private timer: NodeJS.Timeout | undefined;

  /** VmRSS of whatever process `pid()` names at each sample (none: not sampled). */
  trackPid(name: string, pid: () => number | undefined): void {
    this.track(name, 'VmRSS', () => statusMb(pid(), 'VmRSS'));
  }

  track(name: string, measure: string, read: () => number | undefined): void {
    this.sources.set(name, { measure, read });
  }

  start(intervalMs = 1_000): void {
    this.sample();
    this.timer = setInterval(() => this.sample(), intervalMs);
    this.timer.unref();
  }

  stop(): void {
    this.sample();
    clearInterval(this.timer);
  }

  /** Call before a process ends too, so its last figure is kept. */
  sample(): void {
    for (const [name, { measure, read }] of this.sources) {
      const mb = read();
      if (mb === undefined || mb === 0) continue;
      const known = this.figures.get(name);
      this.figures.set(name, { peakMb: round(Math.max(known?.peakMb ?? 0, mb), 1), lastMb: round(mb, 1), measure });
    }
  }

  results(): Record<string, MemoryFigure> {
    return Object.fromEntries(this.figures);
  }
}
