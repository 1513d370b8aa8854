import type { Response } from 'express';
import type { StoredBounceType, StoredEventType } from '@mail/event-store';
import { analyticsV1 } from '@mail/proto';
import { principalOf, workspaceIdOf } from '../auth/access';
import { fromGrpcError } from '../errors/http-error';
import type { RouteModule } from './context';
import { callService, page } from './grpc';
import { given, pageRequest, pathParam, type Json } from './http';

const { SuppressionReason } = analyticsV1;

const REASON_NAMES: Partial<Record<analyticsV1.SuppressionReason, string>> = {
  [SuppressionReason.SUPPRESSION_REASON_HARD_BOUNCE]: 'hard_bounce',
  [SuppressionReason.SUPPRESSION_REASON_SOFT_BOUNCES]: 'soft_bounces',
  [SuppressionReason.SUPPRESSION_REASON_UNSUBSCRIBE]: 'unsubscribe',
  [SuppressionReason.SUPPRESSION_REASON_SPAM_REPORT]: 'spam_report',
  [SuppressionReason.SUPPRESSION_REASON_MANUAL]: 'manual',
};
const REASONS_BY_NAME = new Map(
  Object.entries(REASON_NAMES).map(([value, name]) => [name, Number(value) as analyticsV1.SuppressionReason]),
);

/** A stored signal as the event list names it: event_type and bounce_type, names of the event store's. */
const SIGNAL_EVENTS: Record<string, { event_type: StoredEventType; bounce_type: Exclude<StoredBounceType, 'none'> | null }> = {
  hard_bounce: { event_type: 'bounce', bounce_type: 'hard' },
  soft_bounce: { event_type: 'bounce', bounce_type: 'soft' },
  unsubscribe: { event_type: 'unsubscribe', bounce_type: null },
  spam_report: { event_type: 'spamreport', bounce_type: null },
};

const CSV_COLUMNS = ['email', 'reason', 'suppressed_at'] as const;

/** A row of the list (and of its CSV). */
function suppressionJson(suppression: analyticsV1.Suppression) {
  return {
    email: suppression.email,
    reason: REASON_NAMES[suppression.reason] ?? '',
    suppressed_at: suppression.suppressedAt?.toISOString() ?? '',
  };
}

/** The list's row with the note of a manual suppression. */
const suppressionRecord = (suppression: analyticsV1.Suppression | undefined) =>
  suppression && { ...suppressionJson(suppression), note: suppression.note ?? null };

const actorJson = (actor: analyticsV1.Actor | undefined) => (actor ? { user_id: actor.userId, email: actor.email } : null);

/** The list's filters from the validated query. */
function listFilters(query: Json) {
  return {
    email: query.email as string | undefined,
    reason: query.reason === undefined ? undefined : REASONS_BY_NAME.get(query.reason as string),
    query: query.q as string | undefined,
  };
}

/**
 * One CSV field (RFC 4180): quoted when it holds a comma, quote or line
 * break; a field a spreadsheet would run as a formula gets a leading quote
 * mark, so an exported note cannot become one.
 */
function csvField(value: string): string {
  const safe = /^[=+\-@\t\r]/.test(value) ? `'${value}` : value;
  return /[",\r\n]/.test(safe) ? `"${safe.replaceAll('"', '""')}"` : safe;
}

const csvLine = (fields: string[]): string => `${fields.map(csvField).join(',')}\r\n`;

/**
 * Streams the export as CSV, written as the service sends it. A failure before
 * the first row answers as any failed call; after it, the connection is cut,
 * so a truncated file is never mistaken for a complete one.
 */
async function sendCsv(res: Response, stream: AsyncIterable<analyticsV1.ExportSuppressionsResponse> & { cancel(): void }): Promise<void> {
  res.on('close', () => stream.cancel());
  const start = () => {
    if (res.headersSent) return;
    res.status(200).type('text/csv; charset=utf-8').attachment('suppressions.csv');
    res.write(csvLine([...CSV_COLUMNS]));
  };
  try {
    for await (const message of stream) {
      start();
      const rows = message.suppressions.map((suppression) => {
        const json = suppressionJson(suppression);
        return csvLine(CSV_COLUMNS.map((column) => json[column]));
      });
      if (!res.write(rows.join(''))) await new Promise((resolve) => res.once('drain', resolve));
    }
  } catch (error) {
    if (!res.headersSent) throw fromGrpcError(error, 'query');
    res.destroy();
    return;
  }
  start();
  res.end();
}

/** /suppressions/: HTTP JSON (or CSV) <-> analytics.v1, one call per request. */
export const suppressionRoutes: RouteModule = (router, { clients }) => {
  const service = clients.analytics;
  const actorOf = (res: Response) => {
    const { user } = principalOf(res);
    return { userId: user.id, email: user.email };
  };

  router.get('/suppressions/', async (req, res) => {
    const filters = listFilters(req.query);
    if (req.accepts(['application/json', 'text/csv']) === 'text/csv') {
      return sendCsv(res, service.exportSuppressions({ workspaceId: workspaceIdOf(res), ...filters }));
    }
    const answer = await callService(
      service.listSuppressions.bind(service),
      { workspaceId: workspaceIdOf(res), page: pageRequest(req), ...filters },
      'query',
    );
    res.json(page(answer.suppressions.map(suppressionJson), answer.page));
  });

  router.post('/suppressions/', async (req, res) => {
    const body = req.body as Json;
    const answer = await callService(service.addSuppression.bind(service), {
      workspaceId: workspaceIdOf(res),
      email: body.email as string,
      note: given<string>(body.note),
      actor: actorOf(res),
    });
    res.status(201).json(suppressionRecord(answer.suppression));
  });

  router.get('/suppressions/:email', async (req, res) => {
    const answer = await callService(service.getSuppression.bind(service), {
      workspaceId: workspaceIdOf(res),
      email: pathParam(req, 'email'),
    });
    const current = suppressionRecord(answer.suppression);
    res.json({
      email: answer.email,
      suppressed: current !== undefined,
      reason: current?.reason ?? null,
      suppressed_at: current?.suppressed_at ?? null,
      note: current?.note ?? null,
      events: answer.signals.map((signal) => ({
        reason: signal.reason,
        ...SIGNAL_EVENTS[signal.reason],
        occurred_at: signal.occurredAt?.toISOString(),
        provider_event_id: signal.providerEventId,
      })),
      additions: answer.additions.map((addition) => ({
        added_at: addition.addedAt?.toISOString(),
        note: addition.note ?? null,
        added_by: actorJson(addition.addedBy),
      })),
      lifts: answer.lifts.map((lift) => ({ lifted_at: lift.liftedAt?.toISOString(), lifted_by: actorJson(lift.liftedBy) })),
    });
  });

  router.delete('/suppressions/:email', async (req, res) => {
    await callService(service.liftSuppression.bind(service), {
      workspaceId: workspaceIdOf(res),
      email: pathParam(req, 'email'),
      actor: actorOf(res),
    });
    res.status(204).end();
  });
};
