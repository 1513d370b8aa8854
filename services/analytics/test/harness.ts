import * as grpc from '@grpc/grpc-js';
import type { ClickHouseClient } from '@clickhouse/client';
import { createLogger } from '@mail/common';
import { createClickHouse, NO_RUN, NO_VARIANT, refreshSuppressionState, type EventRow as StoredEventRow } from '@mail/event-store';
import { createTestClickHouse, startTestGrpcService, type Rpc } from '@mail/local';
import { analyticsV1, eventsV1 } from '@mail/proto';
import { analyticsHandlers } from '../src/grpc/handlers';
import { openEventStore } from '../src/store/connection';

export { failure, type Failure } from '@mail/local';

/** A stored events row, every column, times as 'YYYY-MM-DD hh:mm:ss'. */
export type EventRow = StoredEventRow<string>;

export interface SignalRow {
  workspace_id: string;
  email: string;
  reason: 'hard_bounce' | 'soft_bounce' | 'unsubscribe' | 'spam_report';
  occurred_at: string;
  provider_event_id: string;
  ingested_at: string;
}

export interface Analytics {
  /** Calls one RPC through the real gRPC server, so the proto mapping is part of every test. */
  rpc: Rpc<analyticsV1.AnalyticsServiceClient>;
  /** The gRPC client itself, for streaming calls. */
  client: analyticsV1.AnalyticsServiceClient;
  /** Each call is one INSERT, so rows of separate calls land in separate parts (unmerged duplicates). */
  insertEvents(rows: EventRow[]): Promise<void>;
  /**
   * Stores rows again as a fault can (they reach events and the
   * rollups a second time) and marks their days unsettled, as ingestion does.
   */
  insertFaultCopies(rows: EventRow[]): Promise<void>;
  /** Marks (workspace, YYYY-MM-DD) days unsettled, as ingestion does after a failed write. */
  markUnsettled(workspaceId: string, days: string[]): Promise<void>;
  /** Stores signals and recomputes their addresses' suppression state, as ingestion does. */
  insertSignals(rows: SignalRow[]): Promise<void>;
  clickhouse: ClickHouseClient;
  /** The private ClickHouse database. */
  database: string;
  close(): Promise<void>;
}

/** The service's defaults (analytics' config). */
export const READ_LIMITS = { slots: 8, waitMs: 3_000, turnMs: 250 };

/** The analytics handlers on 127.0.0.1:0 over a private ClickHouse database. */
export async function startAnalytics(label: string): Promise<Analytics> {
  const service = await startTestGrpcService({
    database: () => createTestClickHouse(label),
    client: analyticsV1.AnalyticsServiceClient,
    open: async (database) => {
      const events = await openEventStore({ urls: [database.url], database: database.database }, READ_LIMITS);
      const clickhouse = createClickHouse(database.url, database.database);
      return {
        definition: analyticsV1.AnalyticsServiceService,
        implementation: analyticsHandlers(createLogger('analytics', process.env.LOG_LEVEL ?? 'silent'), events),
        resources: clickhouse,
        close: async () => {
          await events.close();
          await clickhouse.close();
        },
      };
    },
  });
  const clickhouse = service.resources;
  const insert = async (table: string, values: object[]) => {
    await clickhouse.insert({ table, values, format: 'JSONEachRow' });
  };
  const markUnsettled = (workspaceId: string, days: string[]) =>
    insert(
      'unsettled_days',
      days.map((day) => ({ workspace_id: workspaceId, day, marked_at: new Date().toISOString() })),
    );
  return {
    rpc: service.rpc,
    client: service.client,
    insertEvents: (rows) => insert('events', rows),
    insertFaultCopies: async (rows) => {
      await insert('events', rows);
      for (const row of rows) await markUnsettled(row.workspace_id, [row.occurred_at.slice(0, 10)]);
    },
    markUnsettled,
    insertSignals: async (rows) => {
      await insert('suppression_signals', rows);
      await refreshSuppressionState(
        clickhouse,
        rows.map((row) => ({ workspaceId: row.workspace_id, email: row.email })),
      );
    },
    clickhouse,
    database: service.database.database,
    close: () => service.close(),
  };
}

let sequence = 0;

/** A unique provider event id per call. */
export function providerEventId(): string {
  sequence += 1;
  return `sg-${process.pid}-${sequence}`;
}

export function event(overrides: Partial<EventRow> & Pick<EventRow, 'workspace_id' | 'campaign_id'>): EventRow {
  const occurredAt = overrides.occurred_at ?? '2026-03-10T12:00:00Z';
  return {
    id: crypto.randomUUID(),
    variant_id: NO_VARIANT,
    run_id: NO_RUN,
    event_type: 'open',
    bounce_type: 'none',
    bounce_class: 'none',
    machine_open: 0,
    email: 'reader@example.com',
    occurred_at: occurredAt,
    received_at: occurredAt,
    url: null,
    reason: null,
    user_agent: 'Mozilla/5.0',
    ip: '203.0.113.7',
    provider: 'sendgrid',
    provider_event_id: providerEventId(),
    provider_message_id: 'msg-1',
    raw: '{}',
    ingested_at: new Date().toISOString(),
    ...overrides,
  };
}

export function signal(overrides: Partial<SignalRow> & Pick<SignalRow, 'workspace_id' | 'email' | 'reason' | 'occurred_at'>): SignalRow {
  return { provider_event_id: providerEventId(), ingested_at: new Date().toISOString(), ...overrides };
}

export const { status } = grpc;
export const { EventType, BounceType } = eventsV1;
export const { Interval, SuppressionReason } = analyticsV1;
