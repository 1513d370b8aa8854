import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { ClickHouseClient } from '@clickhouse/client';
import { call, createClient } from '@mail/common';
import { NO_RUN, StoreLayout, createClickHouse, ensureEventSchema, type EventRow, type SuppressedAddress } from '@mail/event-store';
import { startStack, uniqueSuffix, type Stack } from '@mail/local';
import { analyticsV1 } from '@mail/proto';

/**
 * What the ClickHouse fault tests share: the local cluster's servers
 * (deploy/local/infra.sh clickhouse-cluster, addresses in
 * CLICKHOUSE_CLUSTER_URLS), a private event database created ON CLUSTER,
 * analytics processes reading it through chosen servers, and events made up
 * for it.
 */

export const NODES = ['ch1', 'ch2', 'ch3', 'ch4'] as const;
export type NodeName = (typeof NODES)[number];

/** The HTTP URL of each server, from CLICKHOUSE_CLUSTER_URLS (ch1..ch4 in order). */
export function nodeUrls(): Record<NodeName, string> {
  const urls = (process.env.CLICKHOUSE_CLUSTER_URLS ?? '').split(',').filter((url) => url.trim() !== '');
  if (urls.length !== NODES.length) {
    throw new Error(
      'CLICKHOUSE_CLUSTER_URLS must list the four servers of the local ClickHouse cluster: ' +
        'eval "$(STATE_DIR=... bash deploy/local/infra.sh up clickhouse-cluster)"',
    );
  }
  return Object.fromEntries(NODES.map((name, index) => [name, urls[index].trim()])) as Record<NodeName, string>;
}

export interface ClusterDatabase {
  cluster: string;
  database: string;
  /** A client on one server's copy of the database (its local tables, and the Distributed ones as seen from it). */
  on(node: NodeName): ClickHouseClient;
  /** Rows of a query run on one server. */
  rows<T>(node: NodeName, query: string): Promise<T[]>;
  /**
   * Waits until every server has carried out its replication queue (fetches, merges, mutations) for the tables'
   * local tables. Reads and writes go to a shard's first healthy replica, but a server that saw a replica fail
   * (a test that killed it) counts its errors and reads another, which may not have fetched a write just made.
   */
  syncReplicas(tables: readonly string[]): Promise<void>;
  /** Closes the clients and drops the database ON CLUSTER (every server must be up). */
  drop(): Promise<void>;
}

/** A private database with the event schema, created ON CLUSTER through `nodes` (CLICKHOUSE_URL's order). */
export async function createClusterDatabase(label: string, cluster: string, nodes: readonly NodeName[]): Promise<ClusterDatabase> {
  const urls = nodeUrls();
  const database = `test_${label}_${uniqueSuffix()}`.toLowerCase();
  await ensureEventSchema(
    nodes.map((node) => urls[node]),
    database,
    cluster,
  );
  const clients = new Map<NodeName, ClickHouseClient>();
  const on = (node: NodeName): ClickHouseClient => {
    let client = clients.get(node);
    if (!client) {
      client = createClickHouse(urls[node], database, { cluster });
      clients.set(node, client);
    }
    return client;
  };
  return {
    cluster,
    database,
    on,
    rows: async <T>(node: NodeName, query: string) => (await on(node).query({ query, format: 'JSONEachRow' })).json<T>(),
    syncReplicas: async (tables) => {
      const layout = new StoreLayout(database, cluster);
      for (const node of nodes) {
        for (const table of tables) await on(node).command({ query: `SYSTEM SYNC REPLICA ${layout.localName(table)}` });
      }
    },
    drop: async () => {
      await on(nodes[0]).command({ query: `DROP DATABASE IF EXISTS ${database} ON CLUSTER ${cluster}` });
      await Promise.all([...clients.values()].map((client) => client.close()));
    },
  };
}

/** Polls `probe` until it answers something other than undefined; fails with `what` and the last answer after timeoutMs. */
export async function waitFor<T>(what: string, timeoutMs: number, probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const answer = await probe();
      if (answer !== undefined) return answer;
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline) throw new Error(`${what}: not reached within ${timeoutMs} ms (last error: ${String(last)})`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

/** An analytics process (and whatever else `processes` names) over the database, reading through `clickhouseUrls`. */
export interface Analytics {
  stack: Stack;
  client: analyticsV1.AnalyticsServiceClient;
  list(workspaceId: string, filter?: Partial<analyticsV1.EventFilter>): Promise<analyticsV1.ListEventsResponse>;
  stats(workspaceId: string, filter?: Partial<analyticsV1.EventFilter>): Promise<analyticsV1.GetStatsResponse>;
  close(): Promise<void>;
}

export async function startAnalytics(label: string, env: Record<string, string>): Promise<Analytics> {
  const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), `${label}-`));
  const stack = await startStack({ stateDir, logDir: path.join(stateDir, 'logs'), processes: ['analytics'], env });
  const client = createClient(analyticsV1.AnalyticsServiceClient, stack.urls.grpc.analytics);
  const filterOf = (workspaceId: string, filter: Partial<analyticsV1.EventFilter> = {}) => ({ workspaceId, ...filter });
  return {
    stack,
    client,
    list: (workspaceId, filter) =>
      call(client.listEvents.bind(client), { filter: filterOf(workspaceId, filter), page: { page: 1, pageSize: 200 } }),
    stats: (workspaceId, filter) =>
      call(client.getStats.bind(client), { filter: filterOf(workspaceId, filter), interval: analyticsV1.Interval.INTERVAL_DAY }),
    close: async () => {
      client.close();
      await stack.stopAll();
      fs.rmSync(stateDir, { recursive: true, force: true });
    },
  };
}

const TYPES: EventRow['event_type'][] = ['open', 'open', 'click', 'delivered', 'processed', 'bounce', 'unsubscribe'];
const DAY = Date.UTC(2026, 9, 6) / 1000;

const dateTime = (seconds: number): string => new Date(seconds * 1000).toISOString().slice(0, 19).replace('T', ' ');

/** `count` made-up events of the workspace over three days of October 2026 (a closed month), every column set. */
export function madeUpEvents(workspaceId: string, campaignIds: string[], count: number): EventRow<string>[] {
  return Array.from({ length: count }, (_, i) => {
    const type = TYPES[i % TYPES.length];
    const occurred = DAY + (i % 3) * 86_400 + i * 7;
    return {
      id: crypto.randomUUID(),
      workspace_id: workspaceId,
      campaign_id: campaignIds[i % campaignIds.length],
      variant_id: '00000000-0000-0000-0000-000000000000',
      event_type: type,
      bounce_type: type === 'bounce' ? (i % 2 === 0 ? 'hard' : 'soft') : 'none',
      bounce_class: type === 'bounce' ? 'invalid_address' : 'none',
      machine_open: type === 'open' && i % 5 === 0 ? 1 : 0,
      run_id: NO_RUN,
      email: `reader${i % 17}@example.com`,
      occurred_at: dateTime(occurred),
      received_at: dateTime(occurred + 2),
      url: type === 'click' ? `https://example.com/${i % 4}` : null,
      reason: null,
      user_agent: null,
      ip: null,
      provider: 'sendgrid',
      provider_event_id: `${workspaceId}-${i}`,
      provider_message_id: null,
      raw: '{}',
      ingested_at: dateTime(occurred + 3),
    };
  });
}

/** The suppression signals the events' bounces and unsubscribes give, and their addresses. */
export function signalsOf(events: EventRow<string>[]): { rows: object[]; addresses: SuppressedAddress[] } {
  const rows = events
    .filter((event) => event.event_type === 'unsubscribe' || (event.event_type === 'bounce' && event.bounce_type !== 'none'))
    .map((event) => ({
      workspace_id: event.workspace_id,
      email: event.email,
      reason: event.event_type === 'unsubscribe' ? 'unsubscribe' : `${event.bounce_type}_bounce`,
      occurred_at: event.occurred_at,
      provider_event_id: event.provider_event_id,
      ingested_at: event.ingested_at,
    }));
  const addresses = new Map(rows.map((row) => [`${row.workspace_id} ${row.email}`, { workspaceId: row.workspace_id, email: row.email }]));
  return { rows, addresses: [...addresses.values()] };
}
