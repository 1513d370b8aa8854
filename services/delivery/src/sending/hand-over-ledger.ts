import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '@mail/common';
import { handOverKey, type HandOverAnswer, type HandOverStart, type SendingStore } from '../store/sending';

const RETRY_MS = 500;

interface Waiting {
  resolve(mayGo: boolean): void;
  reject(error: Error): void;
}

/**
 * Group commit of the hand-overs. Each connection's lane asks to start a
 * message (commit it `sending`) and, once the server answered, records the
 * answer; both wait for the next commit, which takes everything asked since
 * the last one in one statement (SendingStore.recordHandOvers). A commit
 * starts once the work of the current turn of the event loop has asked
 * (setImmediate), and never before the one before it ended, so the lanes
 * share commits instead of each paying for its own: an answer and the start
 * of the next message on its connection, asked in one turn, go in one
 * commit. A lane records its answer before it starts its next message, so
 * the answer is committed no later than that start: only messages on a
 * connection are ever `sending`.
 */
export class HandOverLedger {
  private answers: { answer: HandOverAnswer; committed: () => void }[] = [];
  private starts: { start: HandOverStart; waiting: Waiting }[] = [];
  private committing = false;
  private scheduled = false;

  constructor(
    private readonly store: SendingStore,
    private readonly workerId: string,
    private readonly logger: Logger,
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
      this.schedule();
    });
  }

  private schedule(): void {
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
