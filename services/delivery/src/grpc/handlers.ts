import type { Knex } from 'knex';
import { InvalidArgumentError, NotFoundError, unary, valueError, type Logger } from '@mail/common';
import type { deliveryV1 } from '@mail/proto';
import { parseRecipientDatabaseUrl, redactedUrl } from '../domain/recipient-database-url';
import { ENGAGEMENTS, type Audience, type Engagement } from '../domain/plan';
import { LISTED_STATUSES, isUuid, pageWindow, type Page, type Run, type RunRecipient } from '../domain/run';
import { startRun, withEngagement } from '../sending/runs';
import { testSend } from '../sending/test-send';
import type { SenderOptions, UnsubscribeClaims } from '../sending/sender';
import type { SmtpTransport } from '../sending/transport';
import {
  RecipientDatabaseRefused,
  deleteRecipientDatabase,
  getRecipientDatabase,
  putRecipientDatabase,
  verifyRecipientDatabase,
  type StoredRecipientDatabase,
} from '../store/recipient-databases';
import { actOnRun, deleteWorkspaceRuns, getRun, listRecipients, listRuns, pickWinner } from '../store/runs';
import type { Upstream } from './clients';

const orUndefined = <T>(value: T | null): T | undefined => value ?? undefined;

function runToProto(run: Run | undefined): deliveryV1.Run {
  if (!run) throw new Error('the run was not stored');
  return {
    id: run.id,
    workspaceId: run.workspaceId,
    campaignId: run.campaignId,
    trigger: run.trigger,
    scheduledFor: orUndefined(run.scheduledFor),
    status: run.status,
    failure: orUndefined(run.failure),
    createdAt: run.createdAt,
    startedAt: orUndefined(run.startedAt),
    finishedAt: orUndefined(run.finishedAt),
    counts: run.counts,
    variants: run.variants ? { variants: run.variants.map((variant) => ({ ...variant, label: orUndefined(variant.label) })) } : undefined,
    abTest: run.abTest
      ? {
          ...run.abTest,
          decideAt: orUndefined(run.abTest.decideAt),
          winnerVariantId: orUndefined(run.abTest.winnerVariantId),
          decidedBy: orUndefined(run.abTest.decidedBy),
          variants: run.abTest.variants.map((variant) => ({ ...variant, rate: orUndefined(variant.rate) })),
          leaderVariantId: orUndefined(run.abTest.leaderVariantId),
        }
      : undefined,
    audience: orUndefined(run.audience),
  };
}

/** A follow-up run's audience; the gateway checked its shape, the service checks it again. */
function audienceOf(audience: deliveryV1.RunAudience | undefined): Audience | undefined {
  if (!audience) return undefined;
  if (!(ENGAGEMENTS as readonly string[]).includes(audience.engagement)) {
    throw new InvalidArgumentError([valueError(['audience', 'engagement'], audience.engagement, `not one of ${ENGAGEMENTS.join(', ')}`)]);
  }
  if (!isUuid(audience.runId)) throw new NotFoundError('Campaign run');
  return { runId: audience.runId.toLowerCase(), engagement: audience.engagement as Engagement };
}

function recipientToProto(recipient: RunRecipient): deliveryV1.RunRecipient {
  return {
    email: recipient.email,
    status: recipient.status,
    variantId: orUndefined(recipient.variantId),
    messageId: orUndefined(recipient.messageId),
    sentAt: orUndefined(recipient.sentAt),
    error: orUndefined(recipient.error),
  };
}

function recipientDatabaseToProto(stored: StoredRecipientDatabase): deliveryV1.RecipientDatabase {
  const { workspaceId, kind, host, port, database, user, verifiedAt } = stored;
  return { workspaceId, kind, host, port, database, user, verifiedAt };
}

/** A URL that cannot be used: 422 value_error at `url`, echoing it without its password. */
function urlRefused(url: string, problem: string): InvalidArgumentError {
  return new InvalidArgumentError([valueError(['url'], redactedUrl(url), problem)]);
}

function pageInfo<T>({ total, page, pageSize }: Page<T>): { total: number; page: number; pageSize: number } {
  return { total, page, pageSize };
}

/** The workspace a call acts in; one that is not even a UUID does not exist. */
function scope(workspaceId: string): string {
  if (!isUuid(workspaceId)) throw new NotFoundError('Workspace');
  return workspaceId.toLowerCase();
}

function campaignIdOf(id: string): string {
  if (!isUuid(id)) throw new NotFoundError('Campaign');
  return id.toLowerCase();
}

function statusFilter(status: string | undefined): string | undefined {
  if (status === undefined || (LISTED_STATUSES as readonly string[]).includes(status)) return status;
  throw new InvalidArgumentError([
    {
      loc: ['status'],
      type: 'enum',
      msg: `Input should be ${LISTED_STATUSES.slice(0, -1)
        .map((value) => `'${value}'`)
        .join(', ')} or '${LISTED_STATUSES[LISTED_STATUSES.length - 1]}'`,
      input: status,
      ctx: { expected: LISTED_STATUSES.map((value) => `'${value}'`).join(', ') },
    },
  ]);
}

export interface HandlerParts {
  db: Knex;
  upstream: Upstream;
  transport: SmtpTransport;
  signUnsubscribe(claims: UnsubscribeClaims): string;
  options: Pick<SenderOptions, 'provider' | 'publicBaseUrl'> & { testSendPerHour: number };
  /** Seals the workspaces' own recipient database URLs (RECIPIENTS_ENCRYPTION_KEY). */
  recipientsEncryptionKey: Buffer;
  /** A run was created or resumed: this process's sender looks for work now (Sender.wake). */
  runsChanged(): void;
}

export function deliveryHandlers(logger: Logger, parts: HandlerParts): deliveryV1.DeliveryServiceServer {
  const { db, upstream } = parts;
  return {
    createRun: unary(logger, 'CreateRun', async (request) => {
      const run = await startRun(db, upstream, {
        workspaceId: scope(request.workspaceId),
        campaignId: campaignIdOf(request.campaignId),
        scheduledFor: null,
        audience: audienceOf(request.audience),
      });
      parts.runsChanged();
      return { run: runToProto(run) };
    }),
    getRun: unary(logger, 'GetRun', async (request) => ({
      run: runToProto(await withEngagement(upstream, await getRun(db, scope(request.workspaceId), request.id))),
    })),
    pickWinner: unary(logger, 'PickWinner', async (request) => ({
      run: runToProto(await withEngagement(upstream, await pickWinner(db, scope(request.workspaceId), request.id, request.variantId))),
    })),
    listRuns: unary(logger, 'ListRuns', async (request) => {
      const workspaceId = scope(request.workspaceId);
      const campaignId = campaignIdOf(request.campaignId);
      // A campaign of another workspace, or none, is a 404 rather than an empty list.
      await upstream.getCampaign(workspaceId, campaignId);
      const page = await listRuns(db, workspaceId, campaignId, pageWindow(request.page));
      const runs = await Promise.all(page.items.map((run) => withEngagement(upstream, run)));
      return { runs: runs.map(runToProto), page: pageInfo(page) };
    }),
    listRunRecipients: unary(logger, 'ListRunRecipients', async (request) => {
      const page = await listRecipients(
        db,
        scope(request.workspaceId),
        request.runId,
        statusFilter(request.status),
        pageWindow(request.page),
      );
      return { recipients: page.items.map(recipientToProto), page: pageInfo(page) };
    }),
    pauseRun: unary(logger, 'PauseRun', async (request) => ({
      run: runToProto(await actOnRun(db, scope(request.workspaceId), request.id, 'pause')),
    })),
    resumeRun: unary(logger, 'ResumeRun', async (request) => {
      const run = await actOnRun(db, scope(request.workspaceId), request.id, 'resume');
      parts.runsChanged();
      return { run: runToProto(run) };
    }),
    cancelRun: unary(logger, 'CancelRun', async (request) => ({
      run: runToProto(await actOnRun(db, scope(request.workspaceId), request.id, 'cancel')),
    })),
    closeWorkspace: unary(logger, 'CloseWorkspace', async (request) => {
      const workspaceId = scope(request.workspaceId);
      const deletedRuns = await deleteWorkspaceRuns(db, workspaceId);
      await deleteRecipientDatabase(db, workspaceId);
      return { deletedRuns };
    }),
    putRecipientDatabase: unary(logger, 'PutRecipientDatabase', async (request) => {
      const workspaceId = scope(request.workspaceId);
      const target = parseRecipientDatabaseUrl(request.url);
      if ('problem' in target) throw urlRefused(request.url, target.problem);
      try {
        await verifyRecipientDatabase(request.url, target);
      } catch (error) {
        if (error instanceof RecipientDatabaseRefused) throw urlRefused(request.url, error.message);
        throw error;
      }
      const stored = await putRecipientDatabase(db, parts.recipientsEncryptionKey, workspaceId, request.url, target, new Date());
      return { recipientDatabase: recipientDatabaseToProto(stored) };
    }),
    getRecipientDatabase: unary(logger, 'GetRecipientDatabase', async (request) => {
      const stored = await getRecipientDatabase(db, scope(request.workspaceId));
      return { recipientDatabase: stored && recipientDatabaseToProto(stored) };
    }),
    deleteRecipientDatabase: unary(logger, 'DeleteRecipientDatabase', async (request) => {
      await deleteRecipientDatabase(db, scope(request.workspaceId));
      return {};
    }),
    testSend: unary(logger, 'TestSend', async (request) => {
      const outcomes = await testSend(parts, parts.options, {
        workspaceId: scope(request.workspaceId),
        campaignId: campaignIdOf(request.campaignId),
        emails: request.emails,
        variantId: request.variantId,
      });
      return {
        outcomes: outcomes.map((outcome) => ({
          email: outcome.email,
          status: outcome.status,
          messageId: orUndefined(outcome.messageId),
          error: orUndefined(outcome.error),
        })),
      };
    }),
  };
}
