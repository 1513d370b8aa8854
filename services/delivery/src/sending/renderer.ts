import path from 'node:path';
import { WorkerFailedError, WorkerPool, WorkerTimeoutError } from '@mail/common';
import type { TrackingClaims } from '@mail/common';
import type { RenderedMessage, TemplateContent } from '../domain/render';

/** How long one message may take to render before its worker is terminated and the message fails. */
export const RENDER_TIMEOUT_MS = 1_000;

export interface RenderBatch {
  /** Names the templates (a run's id) so that a worker compiles them once; none: compiled for this batch only. */
  cacheKey?: string;
  /** By variant id, or SINGLE_TEMPLATE. */
  templates: Record<string, TemplateContent>;
  messages: { key: string; fields: Record<string, unknown>; unsubscribeUrl: string; tracking?: TrackingClaims }[];
  /** First-party tracking of the messages that carry claims (docs/api.md, "First-party tracking"); absent: none. */
  tracking?: RenderTracking;
}

export interface RenderTracking {
  /** PUBLIC_BASE_URL: where /t/o/ and /t/c/ are served. */
  baseUrl: string;
  /** TRACKING_SIGNING_KEY. */
  signingKey: string;
  opens: boolean;
  clicks: boolean;
}

export type RenderOutcome = { message: RenderedMessage } | { error: string };

/**
 * Renders messages in worker threads, never on the thread that serves calls and sends: a template,
 * however written, holds at most its own worker. A batch of messages is one call to a worker, which
 * reports each message as it finishes; one that takes over RENDER_TIMEOUT_MS has its worker replaced
 * and fails, and the rest of the batch goes on in the new worker.
 */
export class Renderer {
  private readonly pool: WorkerPool;

  constructor(workers: number) {
    this.pool = new WorkerPool({
      script: path.join(__dirname, 'render-worker.js'),
      size: workers,
      stepTimeoutMs: RENDER_TIMEOUT_MS,
      resourceLimits: { maxOldGenerationSizeMb: 256, maxYoungGenerationSizeMb: 32 },
    });
    // A run's first message waits for its first batch's rendering: not also for a worker to load.
    this.pool.prestart();
  }

  /** One outcome per message, in order. */
  async render(batch: RenderBatch): Promise<RenderOutcome[]> {
    const outcomes: RenderOutcome[] = [];
    while (outcomes.length < batch.messages.length) {
      const rest = { ...batch, messages: batch.messages.slice(outcomes.length) };
      try {
        await this.pool.run(rest, (outcome) => outcomes.push(outcome as RenderOutcome));
      } catch (error) {
        if (error instanceof WorkerTimeoutError) {
          outcomes.push({ error: `The message took longer than ${RENDER_TIMEOUT_MS / 1000} s to render` });
        } else if (error instanceof WorkerFailedError) {
          outcomes.push({ error: `The message could not be rendered: ${error.message}` });
        } else {
          throw error;
        }
      }
    }
    return outcomes;
  }

  close(): Promise<void> {
    return this.pool.close();
  }
}
