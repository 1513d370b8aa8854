import crypto from 'node:crypto';
import { createClickHouse, ensureEventSchema } from '@mail/event-store';
import { uniqueSuffix } from '@mail/local';
import { nodeUrls } from './support/clickhouse-cluster';

/**
 * A v1 store whose operator replicated engagement_events by hand on one shard
 * of two replicas (events_1x2), as v1's deployment guide said: cluster mode
 * takes it over, renaming it on every server and copying its events into the
 * cluster's tables, rollups included.
 */
jest.setTimeout(120_000);

const CLUSTER = 'events_1x2';
const database = `test_v1_cluster_${uniqueSuffix()}`;

it('takes a replicated v1 store over into the cluster tables', async () => {
  const urls = nodeUrls();
  const servers = [urls.ch1, urls.ch2];
  const admin = createClickHouse(servers, 'default');
  const v1 = createClickHouse(urls.ch1, database);
  const onCh2 = createClickHouse(urls.ch2, database, { cluster: CLUSTER });
  try {
    await admin.command({ query: `CREATE DATABASE ${database} ON CLUSTER ${CLUSTER}` });
    await admin.command({
      query: `CREATE TABLE ${database}.engagement_events ON CLUSTER ${CLUSTER} (
        id UUID, workspace_id UUID, campaign_id UUID,
        event_type Enum8('open' = 1, 'click' = 2, 'bounce' = 3, 'unsubscribe' = 4),
        bounce_type Enum8('none' = 0, 'hard' = 1, 'soft' = 2),
        email String, occurred_at DateTime('UTC'), received_at DateTime('UTC'), url Nullable(String), reason Nullable(String),
        user_agent Nullable(String), ip Nullable(String), provider String, provider_event_id String,
        provider_message_id Nullable(String), raw String, ingested_at DateTime('UTC')
      ) ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/${database}/engagement_events', '{replica}', ingested_at)
      PARTITION BY toYYYYMM(occurred_at) ORDER BY (workspace_id, occurred_at, provider_event_id)`,
    });
    const workspaceId = crypto.randomUUID();
    const rows = Array.from({ length: 50 }, (_, i) => ({
      id: crypto.randomUUID(),
      workspace_id: workspaceId,
      campaign_id: workspaceId,
      event_type: i % 2 === 0 ? 'click' : 'open',
      bounce_type: 'none',
      email: `reader${i % 5}@example.com`,
      occurred_at: '2026-10-06 10:00:00',
      received_at: '2026-10-06 10:00:00',
      url: i % 2 === 0 ? 'https://example.com/' : null,
      reason: null,
      user_agent: null,
      ip: null,
      provider: 'sendgrid',
      provider_event_id: `v1-${i}`,
      provider_message_id: null,
      raw: '{}',
      ingested_at: '2026-10-06 10:00:00',
    }));
    await v1.insert({ table: 'engagement_events', values: rows, format: 'JSONEachRow' });

    await ensureEventSchema(servers, database, CLUSTER);

    const read = async <T>(query: string): Promise<T[]> => (await onCh2.query({ query, format: 'JSONEachRow' })).json<T>();
    expect(await read('SELECT count() AS n, uniqExact(provider_event_id) AS events FROM events')).toEqual([{ n: '50', events: '50' }]);
    expect(await read('SELECT countMerge(events) AS n FROM event_rollup_daily')).toEqual([{ n: '50' }]);
    expect(await read('SELECT countMerge(clicks) AS n FROM link_rollup_daily')).toEqual([{ n: '25' }]);
    expect(await read(`SELECT name FROM system.tables WHERE database = '${database}' AND name LIKE 'engagement%'`)).toEqual([
      { name: 'engagement_events_v1' },
    ]);
  } finally {
    await admin.command({ query: `DROP DATABASE IF EXISTS ${database} ON CLUSTER ${CLUSTER}` });
    await Promise.all([admin.close(), v1.close(), onCh2.close()]);
  }
});
