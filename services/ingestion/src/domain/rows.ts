import { NO_RUN, NO_VARIANT, storedEventDetails } from '@mail/event-store';
import type { eventsV1 } from '@mail/proto';
import type { CategoryMatch } from '../grpc/categories';
import type { EngagementEventRow, SuppressionSignalRow, UnmatchedEventRow } from './columns';
import { poisonOf, type EventSource, type Sourced, type SourcedEvent } from './records';
import { ENGAGEMENT_COLUMNS, SIGNAL_COLUMNS, UNMATCHED_COLUMNS, rowProblem } from './columns';
import { eventId, signalReason, storedBounceClass, storedBounceType, storedType } from './events';
import { encodeUnmatched } from './unmatched';
import { deadLetter, ok, type EventResult } from './step-result';

type EngagementEvent = eventsV1.EngagementEvent;

/** What one event becomes in ClickHouse: a row of each table it goes to. */
export interface EventRows {
  event?: EngagementEventRow;
  signal?: SuppressionSignalRow;
  unmatched?: UnmatchedEventRow;
}

const seconds = (date: Date | undefined): number => Math.floor(date!.getTime() / 1000);

/**
 * The rows of an event, given the campaign its categories name (none: it is
 * stored unmatched, and neither listed nor suppressing). The one place an
 * event is turned into table rows.
 */
export function toRows(event: EngagementEvent, match: CategoryMatch | undefined, ingestedAt: number): EventRows {
  if (!match) {
    return {
      unmatched: {
        provider_event_id: event.providerEventId,
        provider: event.provider,
        event_type: storedType(event),
        email: event.email,
        categories: event.categories,
        occurred_at: seconds(event.occurredAt),
        received_at: seconds(event.receivedAt),
        raw: event.rawJson,
        ingested_at: ingestedAt,
        encoded_event: encodeUnmatched(event),
      },
    };
  }
  const rows: EventRows = {};
  const reason = signalReason(event);
  if (reason) {
    rows.signal = {
      workspace_id: match.workspaceId,
      email: event.email,
      reason,
      occurred_at: seconds(event.occurredAt),
      provider_event_id: event.providerEventId,
      ingested_at: ingestedAt,
    };
  }
  rows.event = {
    id: eventId(event),
    workspace_id: match.workspaceId,
    campaign_id: match.campaignId,
    variant_id: variantOf(event, match),
    event_type: storedType(event),
    bounce_type: storedBounceType(event),
    bounce_class: storedBounceClass(event),
    // One column flags both: a machine's open and a machine's click (the event type tells which).
    machine_open: event.machineOpen || event.machineClick ? 1 : 0,
    email: event.email,
    occurred_at: seconds(event.occurredAt),
    received_at: seconds(event.receivedAt),
    ...storedEventDetails(event),
    raw: event.rawJson,
    ingested_at: ingestedAt,
    run_id: event.runId !== undefined && UUID.test(event.runId) ? event.runId.toLowerCase() : NO_RUN,
  };
  return rows;
}

/**
 * The variant the event's variant_id names, if it is one of its campaign's
 * (in any letter case); an id of no variant of the campaign (unknown,
 * malformed, another campaign's) attributes the event to none, and stays in raw.
 */
export function variantOf(event: EngagementEvent, match: CategoryMatch): string {
  const variantId = event.variantId?.toLowerCase();
  return variantId !== undefined && match.variantIds.includes(variantId) ? variantId : NO_VARIANT;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * The campaign an event names itself: our own sender and one-click unsubscribe set workspace_id and
 * campaign_id, and the variant they sent. Ids that are not both UUIDs name nothing (the categories decide).
 */
function namedCampaign(event: EngagementEvent): CategoryMatch | undefined {
  const { workspaceId, campaignId, variantId } = event;
  if (workspaceId === undefined || campaignId === undefined || !UUID.test(workspaceId) || !UUID.test(campaignId)) return undefined;
  const variantIds = variantId !== undefined && UUID.test(variantId) ? [variantId.toLowerCase()] : [];
  return { providerCategoryId: '', workspaceId: workspaceId.toLowerCase(), campaignId: campaignId.toLowerCase(), variantIds };
}

/**
 * The campaign of an event: the one it names itself, else the first of its categories that names one (SendGrid keeps
 * the order they were given in).
 */
export function campaignOf(event: EngagementEvent, matches: Map<string, CategoryMatch>): CategoryMatch | undefined {
  const named = namedCampaign(event);
  if (named) return named;
  for (const id of event.categories) {
    const match = matches.get(id);
    if (match) return match;
  }
  return undefined;
}

/** The rows of an event, and where it came from. */
export interface SourcedRows extends EventRows {
  source: EventSource;
}

/** The rows of each event; `matches` maps category ids to their campaigns. */
export function batchRows(events: readonly SourcedEvent[], matches: Map<string, CategoryMatch>, ingestedAt: number): SourcedRows[] {
  return events.map(({ event, source }) => ({ ...toRows(event, campaignOf(event, matches), ingestedAt), source }));
}

/**
 * The check-rows step: an event with a row its table would refuse is
 * dead-lettered before any insert, with the column and why, rather than
 * failing the insert of its batch.
 */
export function checkRows(events: readonly SourcedRows[]): EventResult<SourcedRows>[] {
  return events.map((rows) => {
    const problem =
      (rows.signal && rowProblem('suppression_signals', rows.signal, SIGNAL_COLUMNS)) ??
      (rows.event && rowProblem('events', rows.event, ENGAGEMENT_COLUMNS)) ??
      (rows.unmatched && rowProblem('unmatched_events', rows.unmatched, UNMATCHED_COLUMNS));
    return problem ? deadLetter(poisonOf(rows.source, problem)) : ok(rows);
  });
}

/** The rows of a batch's events, by table. */
export interface BatchRows {
  events: Sourced<EngagementEventRow>[];
  signals: Sourced<SuppressionSignalRow>[];
  unmatched: Sourced<UnmatchedEventRow>[];
}

/** The rows of the events, gathered by table. */
export function byTable(events: readonly SourcedRows[]): BatchRows {
  const rows: BatchRows = { events: [], signals: [], unmatched: [] };
  for (const { source, event, signal, unmatched } of events) {
    if (signal) rows.signals.push({ row: signal, source });
    if (event) rows.events.push({ row: event, source });
    if (unmatched) rows.unmatched.push({ row: unmatched, source });
  }
  return rows;
}

/** The rows, but those of the events whose sources are in `refused`. */
export function withoutSources<Row>(rows: readonly Sourced<Row>[], refused: ReadonlySet<EventSource>): Sourced<Row>[] {
  return refused.size === 0 ? [...rows] : rows.filter((row) => !refused.has(row.source));
}
