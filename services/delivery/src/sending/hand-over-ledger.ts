import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '@mail/common';
import { handOverKey, type HandOverAnswer, type HandOverStart, type SendingStore } from '../store/sending';

const RETRY_MS = 500;
/** The longest a commit waits for the answers of the messages still on their connections. */
const WAVE_WAIT_MS = 5;

interface Waiting {
  resolve(mayGo: boolean): void;
  reject(error: Error): void;
}

/**
 * Group commit of the hand-overs. Each connection's lane asks to start a
 * message (commit it `sending`) and, once the server answered, records the
 * answer; both wait for the next commit, which takes everything asked since
 * the last one in one statement (SendingStore.recordHandOvers). A lane
 * records its answer before it starts its next message, so the answer is
 * committed no later than that start: only messages on a connection are
 * ever `sending`. Commits go in waves: while messages are still on their
 * connections, a commit waits for their answers (waveWaitMs at most), and
 * then starts once the current turn of the event loop is over
 * (setImmediate), so that each lane's answer and its next start, asked in
 * one turn, go in it; never before the commit before it ended. The lanes
 * then share one commit a wave instead of each paying for its own: a
 * statement costs Postgres more than the few rows it writes.
 */
export class HandOverLedger {
  private answers: { answer: HandOverAnswer; committed: () => void }[] = [];
  private starts: { start: HandOverStart; waiting: Waiting }[] = [];
  private committing = false;
  private scheduled = false;
  /** Messages that may go and whose answer is not recorded yet: on their connections. */
  private onConnections = 0;
  private waveTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly store: SendingStore,
    private readonly workerId: string,
    private readonly logger: Logger,
    private readonly waveWaitMs = WAVE_WAIT_MS,
  ) {}

  /** Resolves to whether the message may go: this worker still holds its recipient and the run still sends. */
  start(start: HandOverStart): Promise<boolean> {
    return new Promise((resolve, reject) => {
      this.starts.push({ start, waiting: { resolve, reject } });
      this.schedule();
    });
  }

  /** Resolves once the answer is committed. A server's answer is never dropped: a failed commit is tried again. */
  settle(answer: HandOverAnswer): Promise<void> {
    return new Promise((committed) => {
      this.answers.push({ answer, committed });
      this.onConnections = Math.max(0, this.onConnections - 1);
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.answers.length === 0 && this.starts.length === 0) return;
    if (this.onConnections > 0) {
      this.waveTimer ??= setTimeout(() => this.commitSoon(), this.waveWaitMs);
      return;
    }
    this.commitSoon();
  }

  private commitSoon(): void {
    clearTimeout(this.waveTimer);
    this.waveTimer = undefined;
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      void this.commit();
    });
  }

  private async commit(): Promise<void> {
    if (this.committing || (this.answers.length === 0 && this.starts.length === 0)) return;
    this.committing = true;
    const answers = this.answers;
    const starts = this.starts;
    this.answers = [];
    this.starts = [];
    try {
      const started = await this.store.recordHandOvers(
        this.workerId,
        answers.map((item) => item.answer),
        starts.map((item) => item.start),
      );
      this.onConnections += started.size;
      for (const { committed } of answers) committed();
      for (const { start, waiting } of starts) waiting.resolve(started.has(handOverKey(start.runId, start.email)));
    } catch (error) {
      // Nothing started: those recipients stay claimed, and their batch gives them back.
      for (const { waiting } of starts) waiting.reject(error as Error);
      this.logger.warn({ err: error, answers: answers.length }, 'recording hand-overs failed; the answers are recorded again');
      this.answers.unshift(...answers);
      await sleep(RETRY_MS);
    } finally {
      this.committing = false;
    }
    this.schedule();
  }
}
