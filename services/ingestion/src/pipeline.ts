import type { eventsV1 } from '@mail/proto';
import type { CategoryMatch } from './categories';
import { NO_VARIANT } from '@mail/event-store';
import { eventId, eventKey, signalReason, storedBounceClass, storedBounceType, storedType } from './domain/events';
import type { EngagementEventRow, EventStore, SuppressionSignalRow, UnmatchedEventRow } from './store/events';
import type { SuppressionStateStore } from './store/suppressions';
import { EventsWriteError, workspaceDays, type WorkspaceDay } from './store/unsettled';

type EngagementEvent = eventsV1.EngagementEvent;

export interface IngestResult {
  inserted: number;
  /** Repeated within the batch, or already stored. */
  duplicates: number;
  unmatched: number;
  signals: number;
  /** The (workspace, day) pairs of the events written. */
  written: WorkspaceDay[];
}

export interface IngestDependencies {
  resolve(categoryIds: Iterable<string>): Promise<Map<string, CategoryMatch>>;
  store: EventStore;
  suppressions: SuppressionStateStore;
}

const seconds = (date: Date | undefined): number => Math.floor(date!.getTime() / 1000);

/**
 * Writes one batch of decoded events. The order makes a retry of the whole
 * batch, or its redelivery after a crash, safe: suppression signals first
 * (collapsed by their table's key if written twice) and the state of their
 * addresses recomputed from them (the same rows again), then only the events
 * the events table does not hold yet, then the unmatched ones (collapsed by
 * their key). A throw leaves the batch to be retried; nothing is skipped.
 */
export async function ingest(events: EngagementEvent[], deps: IngestDependencies): Promise<IngestResult> {
  const unique = [...new Map(events.map((event) => [eventKey(event), event])).values()];
  let duplicates = events.length - unique.length;
  const matches = await deps.resolve(unique.flatMap((event) => event.categories));
  const ingestedAt = Math.floor(Date.now() / 1000);

  const signals: SuppressionSignalRow[] = [];
  const rows: EngagementEventRow[] = [];
  const unmatched: UnmatchedEventRow[] = [];
  for (const event of unique) {
    // The first category naming a campaign decides (SendGrid keeps the order they were given in).
    const match = event.categories.map((id) => matches.get(id)).find((found) => found !== undefined);
    if (!match) {
      unmatched.push({
        provider_event_id: event.providerEventId,
        provider: event.provider,
        event_type: storedType(event),
        email: event.email,
        categories: event.categories,
        occurred_at: seconds(event.occurredAt),
        received_at: seconds(event.receivedAt),
        raw: event.rawJson,
        ingested_at: ingestedAt,
      });
      continue;
    }
    const reason = signalReason(event);
    if (reason) {
      signals.push({
        workspace_id: match.workspaceId,
        email: event.email,
        reason,
        occurred_at: seconds(event.occurredAt),
        provider_event_id: event.providerEventId,
        ingested_at: ingestedAt,
      });
    }
    rows.push(toRow(event, match, ingestedAt));
  }

  await deps.store.insertSignals(signals);
  await deps.suppressions.refresh(signals);
  const stored = await deps.store.storedEventIds(rows);
  const fresh = rows.filter((row) => !stored.has(row.id));
  duplicates += rows.length - fresh.length;
  await deps.store.insertEvents(fresh).catch((error: unknown) => {
    throw new EventsWriteError(workspaceDays(fresh), error);
  });
  await deps.store.insertUnmatched(unmatched);
  return { inserted: fresh.length, duplicates, unmatched: unmatched.length, signals: signals.length, written: workspaceDays(fresh) };
}

function toRow(event: EngagementEvent, match: CategoryMatch, ingestedAt: number): EngagementEventRow {
  return {
    id: eventId(event),
    workspace_id: match.workspaceId,
    campaign_id: match.campaignId,
    variant_id: NO_VARIANT,
    event_type: storedType(event),
    bounce_type: storedBounceType(event),
    bounce_class: storedBounceClass(event),
    machine_open: event.machineOpen ? 1 : 0,
    email: event.email,
    occurred_at: seconds(event.occurredAt),
    received_at: seconds(event.receivedAt),
    url: event.url ?? null,
    reason: event.reason ?? null,
    user_agent: event.userAgent ?? null,
    ip: event.ip ?? null,
    provider: event.provider,
    provider_event_id: event.providerEventId,
    provider_message_id: event.providerMessageId ?? null,
    raw: event.rawJson,
    ingested_at: ingestedAt,
  };
}
