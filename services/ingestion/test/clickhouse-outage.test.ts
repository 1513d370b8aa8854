import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { lendInstalledServers, runPrivateInfra, uniqueSuffix } from '@mail/local';
import { engagementEvent, sleep, startIngestion, type Ingestion } from './harness';

/**
 * ClickHouse goes away and comes back while events keep arriving. This runs
 * its own ClickHouse server (infra.sh with a private state folder and ports),
 * so stopping it disturbs no other test.
 */
jest.setTimeout(180_000);

const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ingestion-clickhouse-'));
let infraEnv: NodeJS.ProcessEnv;
let ingestion: Ingestion;

const infra = (command: 'up' | 'down'): Promise<void> => runPrivateInfra(infraEnv, command, 'clickhouse');

async function freePort(): Promise<number> {
  const server = net.createServer().listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

beforeAll(async () => {
  const [httpPort, tcpPort] = [await freePort(), await freePort()];
  infraEnv = { ...process.env, STATE_DIR: stateDir, CLICKHOUSE_HTTP_PORT: String(httpPort), CLICKHOUSE_TCP_PORT: String(tcpPort) };
  lendInstalledServers(stateDir);
  await infra('up');
  ingestion = await startIngestion({ label: 'chdown', clickhouseUrl: `http://127.0.0.1:${httpPort}` });
});

afterAll(async () => {
  await ingestion?.close();
  await infra('down');
  fs.rmSync(stateDir, { recursive: true, force: true });
});

it('keeps retrying while ClickHouse is down, committing no offset past an unstored event, then stores everything exactly once', async () => {
  const p = `outage-${uniqueSuffix()}`;
  const category = `cat-${p}`;
  const campaign = await ingestion.createCampaign(category);
  const batch = (name: string) =>
    Array.from({ length: 200 }, (_, i) =>
      engagementEvent({ providerEventId: `${p}-${name}-${i}`, email: `r${i % 13}@example.com`, categories: [category] }),
    );
  const count = `SELECT count() AS n FROM events WHERE campaign_id = toUUID('${campaign.id}')`;

  await ingestion.produce(batch('before'));
  await ingestion.waitForCount(count, 200);
  await ingestion.waitUntilCaughtUp();
  const committedBefore = await ingestion.committedOffsets();

  await infra('down');
  await ingestion.produce(batch('during-1'));
  await sleep(2_000);
  await ingestion.produce(batch('during-2'));
  await sleep(2_000);
  expect(await ingestion.metric('ingestion_batch_retries_total')).toBeGreaterThan(0);
  const ready = await fetch(`${ingestion.stack.urls.ops.ingestion}/readyz`);
  expect(ready.status).toBe(503);
  expect(await ready.json()).toMatchObject({ dependencies: { clickhouse: 'down', kafka: 'up' } });
  // The consumer keeps retrying what it fetched (retries counted above): none of its offsets is committed.
  expect(await ingestion.committedOffsets()).toBe(committedBefore);

  await infra('up');
  await ingestion.waitForCount(count, 600, 60_000);
  await ingestion.waitUntilCaughtUp();
  expect(await ingestion.count(count)).toBe(600);
  expect(await ingestion.count(`SELECT uniqExact(provider_event_id) AS n FROM events WHERE campaign_id = toUUID('${campaign.id}')`)).toBe(
    600,
  );
  expect(await ingestion.count(`SELECT count() AS n FROM suppression_signals WHERE workspace_id = toUUID('${campaign.workspaceId}')`)).toBe(
    0,
  );
});
