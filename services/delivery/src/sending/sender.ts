import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '@mail/common';
import { decideWinner, testSize, variantBounds } from '../domain/ab-test';
import { providerHeaders, type Provider } from '../domain/headers';
import { SINGLE_TEMPLATE, type SendingPlan } from '../domain/plan';
import { addressOf, fieldsOf, messageIdOf } from '../domain/recipient';
import type { RenderedMessage } from '../domain/render';
import { retryDelayMs, type SmtpOutcome } from '../domain/run';
import { pickVariant } from '../domain/variants';
import type { Upstream } from '../grpc/clients';
import { deliveryMetrics } from '../metrics';
import { streamAudience } from '../store/audience';
import { streamRecipients } from '../store/recipient-database';
import { SourceError, SourceUnreachableError, type SourceLimits } from '../store/recipient-source';
import type { ActiveRun, ClaimedRecipient, LoadingRun, SendingStore } from '../store/sending';
import { sentEvent, smtpBounceEvent, type EventPublisher } from './events';
import { HandOverLedger } from './hand-over-ledger';
import { IdleLoops } from './idle-loops';
import { RateLimiter } from './rate-limiter';
import { Renderer } from './renderer';
import type { OutgoingMessage, SmtpTransport } from './transport';

export interface UnsubscribeClaims {
  workspaceId: string;
  campaignId: string;
  runId: string;
  email: string;
}

export interface SenderOptions {
  provider: Provider;
  batchSize: number;
  concurrency: number;
  /** Messages of one batch on their way at once (the SMTP pool's connections). */
  connections: number;
  maxAttempts: number;
  retryBaseMs: number;
  workerLeaseMs: number;
  ratePerSecond: number;
  publicBaseUrl: string;
  /** TRACKING_SIGNING_KEY: signs the open pixels and tracked links of runs' messages. */
  trackingSigningKey: string;
  /** Runs this process loads at once, each from its own connection. */
  loads: number;
  source: SourceLimits;
}

export interface SenderParts {
  store: SendingStore;
  /** The URL of the recipient database a workspace's runs read: its own, or the shared one. */
  recipientDatabaseUrl(workspaceId: string): Promise<string>;
  upstream: Upstream;
  transport: SmtpTransport;
  events: EventPublisher;
  signUnsubscribe(claims: UnsubscribeClaims): string;
}

const IDLE_MS = 200;
const PUBLISH_BATCH = 500;
/**
 * A run's first batch in a process is this small, so that its first message waits for the suppression check and
 * rendering of a few recipients, not of a whole batch; the loop it wakes claims a whole batch meanwhile.
 */
const FIRST_BATCH = 20;
/** How old a batch's suppression check may be when one of its messages is handed over (docs/api.md). */
const SUPPRESSION_MAX_AGE_MS = 5_000;

/** A claimed recipient's message, rendered and composed. */
interface Ready {
  recipient: ClaimedRecipient;
  message: OutgoingMessage;
}

/** The one-click unsubscribe link of a message (also its List-Unsubscribe header). */
export function unsubscribeUrl(publicBaseUrl: string, token: string): string {
  return `${publicBaseUrl}/unsubscribe/${token}`;
}

/** The message of a campaign to one address, rendered (renderer.ts), ready for the transport. */
export function composeMessage(
  plan: SendingPlan,
  rendered: RenderedMessage,
  recipient: { email: string; variantId: string | null },
  context: { runId: string; messageId: string; unsubscribeUrl: string; provider: Provider },
): OutgoingMessage {
  return {
    ...rendered,
    from: { name: plan.fromName, address: plan.fromEmail },
    replyTo: plan.replyTo,
    to: recipient.email,
    messageId: context.messageId,
    headers: {
      'List-Unsubscribe': `<${context.unsubscribeUrl}>`,
      'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click',
      ...providerHeaders(context.provider, {
        category: plan.providerCategoryId,
        variantId: recipient.variantId,
        runId: context.runId,
        messageId: context.messageId,
      }),
    },
  };
}

/**
 * A process's share of the sending: it loads runs' recipients from the
 * recipient database, claims ready recipients of the highest-priority sending
 * run, hands them to SMTP one at a time with the commit before each hand-over
 * (store/sending.ts), publishes the sent events, and keeps its heartbeat, by
 * which the others tell that it died.
 */
export class Sender {
  readonly workerId = randomUUID();
  private running = false;
  private readonly loops: Promise<void>[] = [];
  /** Runs of which this process rendered a message: a later batch that renders for nobody does not fail them. */
  private readonly rendered = new Set<string>();
  private readonly limiter: RateLimiter;
  /** A worker per sending loop, so that a slow template holds only its own loop. */
  private readonly renderer: Renderer;
  private readonly ledger: HandOverLedger;
  /** The idle loops of each kind, which a wake-up ends early. */
  private readonly idle = { loading: new IdleLoops(IDLE_MS), publishing: new IdleLoops(IDLE_MS), sending: new IdleLoops(IDLE_MS) };

  constructor(
    private readonly parts: SenderParts,
    private readonly options: SenderOptions,
    private readonly logger: Logger,
  ) {
    this.limiter = new RateLimiter(parts.store, parts.transport.key, options.ratePerSecond);
    this.renderer = new Renderer(options.concurrency);
    this.ledger = new HandOverLedger(parts.store, this.workerId, logger);
  }

  async start(): Promise<void> {
    await this.parts.store.heartbeat(this.workerId);
    this.running = true;
    this.loops.push(
      this.every(Math.max(100, Math.floor(this.options.workerLeaseMs / 4)), () => this.maintain(), 'maintenance'),
      ...Array.from({ length: this.options.loads }, () => this.repeat(() => this.loadNext(), 'loading', this.idle.loading)),
      this.repeat(() => this.publishSent(), 'publishing sent events and bounces', this.idle.publishing),
      ...Array.from({ length: this.options.concurrency }, () => this.repeat(() => this.sendNext(), 'sending', this.idle.sending)),
    );
    this.logger.info({ workerId: this.workerId }, 'sender started');
  }

  /**
   * A run was created or resumed: an idle loading loop and an idle sending loop look now, not at their next turn.
   * One of each: loops woken together would split a run's first recipients between them, and a slow template
   * would then hold every loop rather than one.
   */
  wake(): void {
    this.idle.loading.wakeOne();
    this.idle.sending.wakeOne();
  }

  /** Finishes the messages on their way, gives the claims back and leaves. */
  async stop(): Promise<void> {
    this.running = false;
    for (const loops of Object.values(this.idle)) loops.wakeAll();
    await Promise.all(this.loops);
    await this.renderer.close();
    await this.parts.store.retire(this.workerId);
  }

  private async maintain(): Promise<void> {
    await this.parts.store.heartbeat(this.workerId);
    const unknown = await this.parts.store.reapDeadWorkers(this.options.workerLeaseMs);
    if (unknown > 0) {
      this.logger.warn({ unknown }, 'messages of a dead sender recorded unknown');
      deliveryMetrics.messages.inc({ outcome: 'unknown' }, unknown);
    }
    await this.parts.store.completeFinishedRuns();
    await this.parts.store.endTests();
    await this.decideDueTests();
    deliveryMetrics.runsWaitingForSource.set(await this.parts.store.runsWaitingForSource());
  }

  /** Runs `work` until stopped; `work` resolves to whether it found something to do, else the loop idles among `idle`. */
  private async repeat(work: () => Promise<boolean>, name: string, idle: IdleLoops): Promise<void> {
    while (this.running) {
      let busy = false;
      try {
        busy = await work();
      } catch (error) {
        this.logger.warn({ err: error }, `${name} failed`);
      }
      if (!busy) await idle.wait();
    }
  }

  private async every(intervalMs: number, work: () => Promise<void>, name: string): Promise<void> {
    while (this.running) {
      try {
        await work();
      } catch (error) {
        this.logger.warn({ err: error }, `${name} failed`);
      }
      await sleep(intervalMs);
    }
  }

  /**
   * Loads one run. What the source answers (a refused query, a limit) fails
   * the run at once; a source that cannot be reached is tried again with
   * backoff, for the time limit at most.
   */
  private async loadNext(): Promise<boolean> {
    const { store } = this.parts;
    const run = await store.claimLoad(this.workerId, this.options.workerLeaseMs);
    if (!run) return false;
    this.idle.loading.wakeOne();
    deliveryMetrics.loadsRunning.inc();
    try {
      await this.load(run);
    } catch (error) {
      if (error instanceof SourceError) {
        await this.failForSource(run, error.message);
      } else if (error instanceof SourceUnreachableError) {
        this.logger.warn({ runId: run.id, err: error }, 'recipient database unreachable; the load is tried again');
        if (await store.deferLoad(run.id, this.workerId, this.options.source.timeoutMs)) {
          await this.failForSource(run, `${error.message} (for longer than ${this.options.source.timeoutMs} ms)`);
        }
      } else {
        await store.releaseLoad(run.id, this.workerId);
        throw error;
      }
    } finally {
      deliveryMetrics.loadsRunning.dec();
    }
    return true;
  }

  private async failForSource(run: LoadingRun, failure: string): Promise<void> {
    this.logger.warn({ runId: run.id, workspaceId: run.workspaceId, failure }, 'run failed: its recipients cannot be read');
    await this.parts.store.failRun(run.id, failure);
    deliveryMetrics.runsFailed.inc({ cause: 'source' });
  }

  /**
   * Streams the run's source in from where its load stopped; never more than a batch in memory. A run with
   * an A/B test holds its recipients until the load is done, then picks its test recipients (store/sending.ts).
   */
  private async load(run: LoadingRun): Promise<void> {
    const { variants, source, abTest } = run.plan;
    // Of a run with an A/B test, the variants are given when the test recipients are picked.
    const pick = abTest ? undefined : variants;
    const batches =
      source.kind === 'audience'
        ? streamAudience(this.parts.store.db, source, run.loadPosition, (runId, kind, emails, until) =>
            this.parts.upstream.engaged(run.workspaceId, runId, kind, emails, until),
          )
        : streamRecipients(await this.parts.recipientDatabaseUrl(run.workspaceId), source, run.loadPosition, this.options.source);
    for await (const batch of batches) {
      const recipients = batch.rows.map((row) => {
        const address = addressOf(row);
        return {
          email: address.email,
          valid: address.valid,
          error: address.valid ? null : `Invalid address: ${address.reason}`,
          variantId: address.valid && pick ? pickVariant(pick, run.id, address.email).id : null,
          fields: fieldsOf(row),
        };
      });
      if (!this.running || !(await this.parts.store.addRecipients(run.id, this.workerId, recipients, batch.position, !!abTest))) {
        await this.parts.store.releaseLoad(run.id, this.workerId);
        return;
      }
      if (!abTest) this.idle.sending.wakeOne();
    }
    const test =
      abTest && variants ? { size: (valid: number) => testSize(valid, abTest.testFraction), bounds: variantBounds(variants) } : undefined;
    await this.parts.store.finishLoad(run.id, this.workerId, test);
  }

  /**
   * Decides the A/B tests that waited long enough, from the human opens or clicks of their test recipients
   * (analytics) over their test messages sent. Every replica tries; the store lets one decide.
   */
  private async decideDueTests(): Promise<void> {
    const { store, upstream } = this.parts;
    for (const due of await store.dueDecisions()) {
      const [sent, engagement] = await Promise.all([store.testSent(due.id), upstream.runEngagement(due.workspaceId, due.id, new Date())]);
      const figures = due.variants.map((variant) => ({
        variantId: variant.id,
        sent: sent.get(variant.id) ?? 0,
        opens: engagement.get(variant.id)?.opens ?? 0,
        clicks: engagement.get(variant.id)?.clicks ?? 0,
      }));
      const { winner, decidedBy } = decideWinner(figures, due.metric);
      if (await store.decide(due.id, winner, decidedBy)) {
        this.logger.info({ runId: due.id, winner, decidedBy, figures }, 'A/B test decided');
      }
    }
  }

  private async sendNext(): Promise<boolean> {
    for (const run of await this.parts.store.readyRuns()) {
      const size = this.rendered.has(run.id) ? this.options.batchSize : Math.min(FIRST_BATCH, this.options.batchSize);
      const claimed = await this.parts.store.claim(run.id, this.workerId, size);
      if (claimed.length === 0) continue;
      this.idle.sending.wakeOne();
      await this.sendBatch(run, claimed);
      return true;
    }
    return false;
  }

  /**
   * A claimed batch: its suppressed addresses set aside, the rest rendered, then handed over through every
   * connection, the suppressions checked again for the rest once the last check is SUPPRESSION_MAX_AGE_MS old.
   */
  private async sendBatch(run: ActiveRun, claimed: ClaimedRecipient[]): Promise<void> {
    const { store } = this.parts;
    let queue: Ready[];
    let checkedAt = performance.now();
    try {
      queue = await this.render(run, await this.withoutSuppressed(run, claimed));
    } catch (error) {
      await store.release(run.id, this.workerId);
      throw error;
    }
    let rechecking: Promise<void> | undefined;
    const recheck = async (): Promise<void> => {
      const remaining = await this.withoutSuppressed(
        run,
        queue.map((ready) => ready.recipient),
      );
      const kept = new Set(remaining);
      queue = queue.filter((ready) => kept.has(ready.recipient));
      checkedAt = performance.now();
    };
    let stopped = false;
    const lane = async (): Promise<void> => {
      let answered: Promise<void> = Promise.resolve();
      try {
        while (this.running && !stopped) {
          await this.limiter.take();
          if (performance.now() - checkedAt > SUPPRESSION_MAX_AGE_MS)
            await (rechecking ??= recheck().finally(() => (rechecking = undefined)));
          const next = queue.shift();
          if (!next) break;
          const outcome = await this.parts.transport.send(next.message, {
            start: () => this.ledger.start({ runId: run.id, email: next.recipient.email, messageId: next.message.messageId }),
            settle: (answer) => {
              answered = this.settle(run, next.recipient, answer);
            },
          });
          if (!outcome) stopped = true;
        }
      } finally {
        await answered;
      }
    };
    const lanes = await Promise.allSettled(Array.from({ length: Math.min(this.options.connections, queue.length) }, lane));
    if (stopped || queue.length > 0) await store.release(run.id, this.workerId);
    for (const ended of lanes) if (ended.status === 'rejected') throw ended.reason;
  }

  /** The recipients not suppressed in the workspace now; the suppressed ones are recorded `suppressed`. */
  private async withoutSuppressed(run: ActiveRun, recipients: ClaimedRecipient[]): Promise<ClaimedRecipient[]> {
    if (recipients.length === 0) return recipients;
    // Without the suppression state nothing may go out: the batch waits for analytics.
    const suppressed = await this.parts.upstream.suppressed(
      run.workspaceId,
      recipients.map((recipient) => recipient.email),
    );
    if (suppressed.size === 0) return recipients;
    await this.parts.store.markSuppressed(run.id, this.workerId, [...suppressed]);
    deliveryMetrics.messages.inc({ outcome: 'suppressed' }, suppressed.size);
    return recipients.filter((recipient) => !suppressed.has(recipient.email));
  }

  /**
   * The batch's messages, rendered by one call to a render worker. A recipient whose message cannot be
   * rendered (an error, over the time or size limit) is `failed` with the reason; when that is every
   * recipient of the batch and no message of the run has rendered yet (its first batch), the run fails.
   */
  private async render(run: ActiveRun, recipients: ClaimedRecipient[]): Promise<Ready[]> {
    const { store } = this.parts;
    const links = recipients.map((recipient) =>
      unsubscribeUrl(
        this.options.publicBaseUrl,
        this.parts.signUnsubscribe({ workspaceId: run.workspaceId, campaignId: run.campaignId, runId: run.id, email: recipient.email }),
      ),
    );
    const outcomes = await this.renderer.render({
      cacheKey: run.id,
      templates: run.plan.templates,
      messages: recipients.map((recipient, index) => ({
        key: recipient.variantId ?? SINGLE_TEMPLATE,
        fields: recipient.fields,
        unsubscribeUrl: links[index],
        tracking: {
          workspaceId: run.workspaceId,
          campaignId: run.campaignId,
          variantId: recipient.variantId,
          runId: run.id,
          email: recipient.email,
        },
      })),
      // Plans stored before tracking existed have none: their messages go out as they were planned.
      tracking: run.plan.tracking && {
        baseUrl: this.options.publicBaseUrl,
        signingKey: this.options.trackingSigningKey,
        opens: run.plan.tracking.opens,
        clicks: run.plan.tracking.clicks,
      },
    });
    const ready: Ready[] = [];
    let failure: string | undefined;
    for (const [index, recipient] of recipients.entries()) {
      const outcome = outcomes[index];
      if ('error' in outcome) {
        failure ??= outcome.error;
        await store.recordUnrendered(run.id, this.workerId, recipient.email, outcome.error);
        deliveryMetrics.messages.inc({ outcome: 'failed' });
        continue;
      }
      const context = {
        runId: run.id,
        messageId: messageIdOf(run.id, recipient.email, run.plan.fromEmail),
        unsubscribeUrl: links[index],
        provider: this.options.provider,
      };
      ready.push({ recipient, message: composeMessage(run.plan, outcome.message, recipient, context) });
    }
    if (ready.length > 0) {
      if (this.rendered.size >= 1000) this.rendered.clear();
      this.rendered.add(run.id);
    } else if (failure !== undefined && !this.rendered.has(run.id)) {
      const reason = `No message of the run's first batch could be rendered: ${failure}`;
      if (await store.failRunBeforeHandOver(run.id, reason)) {
        this.logger.warn({ runId: run.id, workspaceId: run.workspaceId, reason }, 'run failed');
        deliveryMetrics.runsFailed.inc({ cause: 'template' });
      }
    }
    return ready;
  }

  /** Records the server's answer with the ledger's next commit. */
  private settle(run: ActiveRun, recipient: ClaimedRecipient, outcome: SmtpOutcome): Promise<void> {
    const attempt = recipient.attempts + 1;
    const answer = { runId: run.id, email: recipient.email, retryInMs: null, bounceCode: null };
    if (outcome.kind === 'sent') {
      deliveryMetrics.messages.inc({ outcome: 'sent' });
      return this.ledger.settle({ ...answer, status: 'sent', error: null });
    }
    if (outcome.kind === 'retry' && attempt < this.options.maxAttempts) {
      deliveryMetrics.messages.inc({ outcome: 'retried' });
      const retryInMs = retryDelayMs(attempt, this.options.retryBaseMs);
      return this.ledger.settle({ ...answer, status: 'pending', error: outcome.error, retryInMs });
    }
    const status = outcome.kind === 'unknown' ? 'unknown' : 'failed';
    deliveryMetrics.messages.inc({ outcome: status });
    // A server's answer (5xx, or 4xx to the last attempt) is a bounce; a connection that failed says nothing of the address.
    const bounceCode = outcome.kind === 'unknown' ? null : (outcome.code ?? null);
    return this.ledger.settle({ ...answer, status, error: outcome.error, bounceCode });
  }

  private async publishSent(): Promise<boolean> {
    const { store, events } = this.parts;
    const published = await store.publishSent(PUBLISH_BATCH, (sent) => events.publish(sent.map((item) => sentEvent(item, new Date()))));
    deliveryMetrics.sentEventsPublished.inc(published);
    const bounces = await store.publishBounces(PUBLISH_BATCH, (bounced) =>
      events.publish(bounced.map((item) => smtpBounceEvent(item, new Date()))),
    );
    deliveryMetrics.bounceEventsPublished.inc({ source: 'smtp' }, bounces);
    return published >= PUBLISH_BATCH || bounces === PUBLISH_BATCH;
  }
}
