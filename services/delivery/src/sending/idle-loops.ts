interface Waiting {
  resolve(): void;
  timer?: NodeJS.Timeout;
}

/**
 * The idle loops of one kind (loading, sending). Only the one that went idle
 * first, the scout, looks for work again on its own, every `pollMs`; the
 * others wait to be woken, so that an idle process polls Postgres once per
 * kind of loop rather than once per loop. A loop that finds work wakes
 * another (there may be more), and a woken scout hands its turn on to the
 * next idle loop.
 */
export class IdleLoops {
  private readonly waiting: Waiting[] = [];

  constructor(private readonly pollMs: number) {}

  /** Resolves when woken, or after `pollMs` for the scout. */
  wait(): Promise<void> {
    return new Promise((resolve) => {
      this.waiting.push({ resolve });
      this.armScout();
    });
  }

  /** Ends the wait of one idle loop, if any is idle. */
  wakeOne(): void {
    const [first] = this.waiting;
    if (first) this.end(first);
  }

  /** Ends every wait: the loops stop. */
  wakeAll(): void {
    for (const waiting of [...this.waiting]) this.end(waiting);
  }

  private end(waiting: Waiting): void {
    clearTimeout(waiting.timer);
    this.waiting.splice(this.waiting.indexOf(waiting), 1);
    waiting.resolve();
    this.armScout();
  }

  private armScout(): void {
    const [scout] = this.waiting;
    if (scout && scout.timer === undefined) scout.timer = setTimeout(() => this.end(scout), this.pollMs);
  }
}
