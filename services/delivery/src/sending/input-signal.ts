/**
 * What a client of a line protocol (smtp-client.ts, pop3.ts) waits on
 * between reads: more input from its socket, or the failure that ends the
 * session. One reader waits at a time.
 */
export class InputSignal {
  private failure: Error | undefined;
  private wake: (() => void) | undefined;

  get failed(): boolean {
    return this.failure !== undefined;
  }

  throwIfFailed(): void {
    if (this.failure) throw this.failure;
  }

  /** Resolves at the next input or failure; throws at once when the session already failed. */
  async next(): Promise<void> {
    this.throwIfFailed();
    await new Promise<void>((resolve) => (this.wake = resolve));
  }

  /** Input came: the waiting reader looks at it. */
  signal(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }

  /** The session is over: the first failure is the one every later read throws. */
  fail(error: Error): void {
    this.failure ??= error;
    this.signal();
  }
}
