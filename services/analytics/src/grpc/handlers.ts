import { serverStream, unary, type Logger } from '@mail/common';
import { NO_RUN, NO_VARIANT, PROTO_BOUNCE_TYPES, PROTO_EVENT_TYPES, eventDetails } from '@mail/event-store';
import { analyticsV1 } from '@mail/proto';
import {
  listedTypes,
  normalizeEmail,
  pageWindow,
  validateAll,
  validFilter,
  validInterval,
  validRunId,
  validWorkspaceId,
} from '../domain/filter';
import { assembleStats } from '../domain/stats';
import { actorOf, validManualSuppression, type SuppressionFilter, type SuppressionReason } from '../domain/suppression';
import type { EventDatabase } from '../store/connection';
import { listEvents, type StoredEvent } from '../store/events';
import { filterEngaged, runEngagement } from '../store/runs';
import { readStats } from '../store/stats';
import {
  addSuppression,
  exportSuppressions,
  filterSuppressed,
  liftSuppression,
  listSuppressions,
  suppressionHistory,
  type SuppressionRow,
} from '../store/suppressions';
import { eraseWorkspace } from '../store/workspaces';

const SUPPRESSION_REASONS: Record<SuppressionReason, analyticsV1.SuppressionReason> = {
  hard_bounce: analyticsV1.SuppressionReason.SUPPRESSION_REASON_HARD_BOUNCE,
  soft_bounces: analyticsV1.SuppressionReason.SUPPRESSION_REASON_SOFT_BOUNCES,
  unsubscribe: analyticsV1.SuppressionReason.SUPPRESSION_REASON_UNSUBSCRIBE,
  spam_report: analyticsV1.SuppressionReason.SUPPRESSION_REASON_SPAM_REPORT,
  manual: analyticsV1.SuppressionReason.SUPPRESSION_REASON_MANUAL,
};

const REASONS_BY_PROTO = new Map(Object.entries(SUPPRESSION_REASONS).map(([name, value]) => [value, name as SuppressionReason]));

/** The list's filters; an unspecified reason filters nothing. */
function suppressionFilter(request: { email?: string; reason?: analyticsV1.SuppressionReason; query?: string }): SuppressionFilter {
  return {
    email: request.email === undefined ? undefined : normalizeEmail(request.email),
    reason: request.reason === undefined ? undefined : REASONS_BY_PROTO.get(request.reason),
    query: request.query === undefined ? undefined : request.query.trim().toLowerCase(),
  };
}

function suppressionToProto(row: SuppressionRow): analyticsV1.Suppression {
  return {
    email: row.email,
    reason: SUPPRESSION_REASONS[row.reason],
    suppressedAt: fromUnixSeconds(row.suppressed_ts),
    note: row.note === '' ? undefined : row.note,
  };
}

/** An actor as stored, unset when nobody was recorded. */
const storedActor = (userId = '', email = ''): analyticsV1.Actor | undefined => (userId || email ? { userId, email } : undefined);

const fromUnixSeconds = (seconds: number): Date => new Date(seconds * 1000);

function eventToProto(event: StoredEvent): analyticsV1.EventRecord {
  return {
    id: event.id,
    workspaceId: event.workspace_id,
    campaignId: event.campaign_id,
    eventType: PROTO_EVENT_TYPES[event.event_type],
    bounceType: PROTO_BOUNCE_TYPES[event.bounce_type],
    email: event.email,
    occurredAt: fromUnixSeconds(event.occurred_ts),
    receivedAt: fromUnixSeconds(event.received_ts),
    ...eventDetails(event),
    // One stored flag marks a machine's open and a machine's click.
    machineOpen: Number(event.machine_open) === 1 && event.event_type === 'open',
    machineClick: Number(event.machine_open) === 1 && event.event_type === 'click',
    runId: event.run_id === NO_RUN ? undefined : event.run_id,
    variantId: event.variant_id === NO_VARIANT ? undefined : event.variant_id,
    bounceClass: event.bounce_class === 'none' ? undefined : event.bounce_class,
  };
}

export function analyticsHandlers(logger: Logger, events: EventDatabase): analyticsV1.AnalyticsServiceServer {
  return {
    listEvents: unary(logger, 'ListEvents', async (request) => {
      const [filter, window] = validateAll(
        () => validFilter(request.filter),
        () => pageWindow(request.page),
      );
      const listed = listedTypes(filter);
      const page = await events.call(filter.workspaceId, (store) => listEvents(store, listed, window));
      return { events: page.events.map(eventToProto), page: { total: page.total, page: window.page, pageSize: window.pageSize } };
    }),

    getStats: unary(logger, 'GetStats', async (request) => {
      const filter = validFilter(request.filter);
      const interval = validInterval(request.interval);
      const { links, ...data } = await events.call(filter.workspaceId, (store) => readStats(store, filter, interval));
      const stats = assembleStats({ filter, interval, ...data });
      return {
        // The domain's shapes are the messages': rates absent on a zero denominator, leaders absent when none.
        totals: stats.totals,
        campaigns: stats.campaigns,
        variants: stats.variants,
        series: stats.series,
        topLinks: links,
        suppressions: {
          total: stats.suppressions.total,
          hardBounce: stats.suppressions.hard_bounce,
          softBounces: stats.suppressions.soft_bounces,
          unsubscribe: stats.suppressions.unsubscribe,
          spamReport: stats.suppressions.spam_report,
        },
      };
    }),

    listSuppressions: unary(logger, 'ListSuppressions', async (request) => {
      const [workspaceId, window] = validateAll(
        () => validWorkspaceId(request.workspaceId),
        () => pageWindow(request.page),
      );
      const { suppressions, total } = await events.call(workspaceId, (store) =>
        listSuppressions(store, workspaceId, window, suppressionFilter(request)),
      );
      return {
        suppressions: suppressions.map(suppressionToProto),
        page: { total, page: window.page, pageSize: window.pageSize },
      };
    }),

    exportSuppressions: serverStream(logger, 'ExportSuppressions', async function* (request) {
      const workspaceId = validWorkspaceId(request.workspaceId);
      const batches = events.stream(workspaceId, (store) => exportSuppressions(store, workspaceId, suppressionFilter(request)));
      for await (const rows of batches) yield { suppressions: rows.map(suppressionToProto) };
    }),

    filterSuppressed: unary(logger, 'FilterSuppressed', async (request) => {
      const workspaceId = validWorkspaceId(request.workspaceId);
      const emails = [...new Set(request.emails.map(normalizeEmail))];
      return { emails: emails.length === 0 ? [] : await events.call(workspaceId, (store) => filterSuppressed(store, workspaceId, emails)) };
    }),

    getRunEngagement: unary(logger, 'GetRunEngagement', async (request) => {
      const [workspaceId, runId] = validateAll(
        () => validWorkspaceId(request.workspaceId),
        () => validRunId(request.runId),
      );
      const until = request.until ?? new Date();
      const variants = await events.call(workspaceId, (store) => runEngagement(store, workspaceId, runId, until));
      return { variants: variants.map((v) => ({ variantId: v.variantId, uniqueOpens: v.opens, uniqueClicks: v.clicks })) };
    }),

    filterEngaged: unary(logger, 'FilterEngaged', async (request) => {
      const [workspaceId, runId] = validateAll(
        () => validWorkspaceId(request.workspaceId),
        () => validRunId(request.runId),
      );
      const type = request.engagement === analyticsV1.Engagement.ENGAGEMENT_CLICK ? 'click' : 'open';
      const emails = [...new Set(request.emails.map(normalizeEmail))];
      const until = request.until ?? new Date();
      return {
        emails:
          emails.length === 0
            ? []
            : await events.call(workspaceId, (store) => filterEngaged(store, workspaceId, runId, type, emails, until)),
      };
    }),

    getSuppression: unary(logger, 'GetSuppression', async (request) => {
      const email = normalizeEmail(request.email);
      const workspaceId = validWorkspaceId(request.workspaceId);
      const history = await events.call(workspaceId, (store) => suppressionHistory(store, workspaceId, email));
      return {
        email,
        suppression: history.current && suppressionToProto(history.current),
        signals: history.signals.map((signal) => ({
          reason: signal.reason,
          occurredAt: fromUnixSeconds(signal.occurred_ts),
          providerEventId: signal.provider_event_id,
        })),
        additions: history.additions.map((addition) => ({
          addedAt: new Date(Number(addition.added_at_ms)),
          note: addition.note === '' ? undefined : addition.note,
          addedBy: storedActor(addition.added_by_user_id, addition.added_by_email),
        })),
        lifts: history.lifts.map((lift) => ({
          liftedAt: new Date(lift.lifted_at_ms),
          liftedBy: storedActor(lift.lifted_by_user_id, lift.lifted_by_email),
        })),
      };
    }),

    addSuppression: unary(logger, 'AddSuppression', async (request) => {
      const [workspaceId, { email, note }] = validateAll(
        () => validWorkspaceId(request.workspaceId),
        () => validManualSuppression(request.email, request.note),
      );
      const row = await events.call(workspaceId, (store) =>
        addSuppression(store, workspaceId, email, note, actorOf(request.actor), new Date()),
      );
      return { suppression: suppressionToProto(row) };
    }),

    liftSuppression: unary(logger, 'LiftSuppression', async (request) => {
      const workspaceId = validWorkspaceId(request.workspaceId);
      const email = normalizeEmail(request.email);
      await events.call(workspaceId, (store) => liftSuppression(store, workspaceId, email, actorOf(request.actor), new Date()));
      return {};
    }),

    closeWorkspace: unary(logger, 'CloseWorkspace', async (request) => {
      const workspaceId = validWorkspaceId(request.workspaceId);
      await events.call(workspaceId, (store) => eraseWorkspace(store, workspaceId));
      return {};
    }),
  };
}
