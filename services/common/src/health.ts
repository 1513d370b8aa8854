import { readinessMetrics } from './metrics';

/**
 * Readiness: a named set of dependency checks, each with a short timeout, so a
 * hung dependency shows as "down" instead of hanging the probe.
 */
export type DependencyState = 'up' | 'down';

export interface ReadinessReport {
  ready: boolean;
  dependencies: Record<string, DependencyState>;
}

export type DependencyCheck = () => Promise<unknown>;

export class Readiness {
  private readonly checks = new Map<string, DependencyCheck>();
  private draining = false;

  constructor(private readonly timeoutMs = 1_500) {}

  add(name: string, check: DependencyCheck): this {
    this.checks.set(name, check);
    return this;
  }

  /** From now on the process reports not ready, so load balancers stop sending work. */
  markDraining(): void {
    this.draining = true;
  }

  async check(): Promise<ReadinessReport> {
    const entries = await Promise.all([...this.checks].map(async ([name, check]) => [name, await this.probe(check)] as const));
    const dependencies = Object.fromEntries(entries);
    const ready = !this.draining && entries.every(([, state]) => state === 'up');
    readinessMetrics.ready.set(ready ? 1 : 0);
    for (const [name, state] of entries) readinessMetrics.dependencyUp.set({ dependency: name }, state === 'up' ? 1 : 0);
    return { ready, dependencies };
  }

  /** State of one named dependency; undefined when there is no such check. */
  async checkOne(name: string): Promise<DependencyState | undefined> {
    const check = this.checks.get(name);
    return check && this.probe(check);
  }

  private async probe(check: DependencyCheck): Promise<DependencyState> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<DependencyState>((resolve) => {
      timer = setTimeout(() => resolve('down'), this.timeoutMs);
    });
    try {
      return await Promise.race([check().then((): DependencyState => 'up'), timeout]);
    } catch {
      return 'down';
    } finally {
      clearTimeout(timer);
    }
  }
}
