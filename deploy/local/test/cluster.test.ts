import { execFile } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { clusterNode } from '../src/testing/cluster';
import { uniqueSuffix } from '../src/testing/infra';

/**
 * `infra.sh up clickhouse-cluster` runs four ClickHouse servers over one
 * ZooKeeper as the clusters events_1x2 and events_2x2; clusterNode kills and
 * restarts one of them; `down` stops them all. A private state folder on
 * ports of its own, so the shared cluster is never touched.
 */

const INFRA_SH = path.join(__dirname, '..', 'infra.sh');
const PORTS = {
  ZOOKEEPER_PORT: '52191',
  CLICKHOUSE_CLUSTER_HTTP_PORTS: '58251,58252,58253,58254',
  CLICKHOUSE_CLUSTER_TCP_PORTS: '59251,59252,59253,59254',
  CLICKHOUSE_CLUSTER_INTERSERVER_PORTS: '59351,59352,59353,59354',
};
const NODES = ['ch1', 'ch2', 'ch3', 'ch4'] as const;
const HTTP_PORTS = PORTS.CLICKHOUSE_CLUSTER_HTTP_PORTS.split(',').map(Number);
const TCP_PORTS = PORTS.CLICKHOUSE_CLUSTER_TCP_PORTS.split(',').map(Number);

let stateDir: string;
const savedEnv: Record<string, string | undefined> = {};

function infra(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile('bash', [INFRA_SH, ...args], { env: { ...process.env }, timeout: 180_000 }, (error, stdout, stderr) =>
      resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, stdout, stderr }),
    );
  });
}

async function query(node: number, sql: string): Promise<string> {
  const response = await fetch(`http://127.0.0.1:${HTTP_PORTS[node]}/`, { method: 'POST', body: sql });
  const text = await response.text();
  if (!response.ok) throw new Error(`ch${node + 1}: ${text}`);
  return text;
}

function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

beforeAll(async () => {
  stateDir = fs.mkdtempSync(path.join(os.tmpdir(), 'clickhouse-cluster-'));
  // clusterNode and infra.sh take the state folder and ports from the environment, as the test command exports them.
  for (const [name, value] of Object.entries({ STATE_DIR: stateDir, ...PORTS })) {
    savedEnv[name] = process.env[name];
    process.env[name] = value;
  }
  const up = await infra('up', 'clickhouse-cluster');
  if (up.code !== 0) throw new Error(`infra.sh up clickhouse-cluster failed:\n${up.stderr}`);
  expect(up.stdout).toContain(`export CLICKHOUSE_CLUSTER_URLS=${HTTP_PORTS.map((p) => `http://127.0.0.1:${p}`).join(',')}`);
  expect(up.stdout).toContain(`export ZOOKEEPER_ADDRESS=127.0.0.1:${PORTS.ZOOKEEPER_PORT}`);
}, 240_000);

afterAll(async () => {
  await infra('down', 'clickhouse-cluster');
  for (const [name, value] of Object.entries(savedEnv)) {
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  }
  fs.rmSync(stateDir, { recursive: true, force: true });
}, 120_000);

test('every node lists both clusters with their shards and replicas, and its own macros', async () => {
  const expected = [
    ['events_1x2', 1, 1, TCP_PORTS[0]],
    ['events_1x2', 1, 2, TCP_PORTS[1]],
    ['events_2x2', 1, 1, TCP_PORTS[0]],
    ['events_2x2', 1, 2, TCP_PORTS[1]],
    ['events_2x2', 2, 1, TCP_PORTS[2]],
    ['events_2x2', 2, 2, TCP_PORTS[3]],
  ]
    .map((row) => row.join('\t'))
    .join('\n');
  for (const [node, name] of NODES.entries()) {
    const clusters = await query(
      node,
      "SELECT cluster, shard_num, replica_num, port FROM system.clusters WHERE host_name = '127.0.0.1' ORDER BY cluster, shard_num, replica_num",
    );
    expect(clusters.trim()).toBe(expected);
    const macros = await query(node, 'SELECT macro, substitution FROM system.macros ORDER BY macro');
    expect(macros.trim()).toBe(`replica\t${name}\nshard\t0${node < 2 ? 1 : 2}`);
  }
});

test('a row inserted on ch1 is read on ch2 (replication through ZooKeeper, ON CLUSTER DDL)', async () => {
  const database = `cluster_${uniqueSuffix()}`;
  await query(0, `CREATE DATABASE ${database} ON CLUSTER events_1x2`);
  await query(
    0,
    `CREATE TABLE ${database}.notes ON CLUSTER events_1x2 (id UInt32, body String)
     ENGINE = ReplicatedMergeTree('/clickhouse/tables/${database}/{shard}/notes', '{replica}') ORDER BY id`,
  );
  await query(0, `INSERT INTO ${database}.notes VALUES (1, 'first'), (2, 'second')`);
  const deadline = Date.now() + 30_000;
  let rows = '';
  while (Date.now() < deadline) {
    rows = await query(1, `SELECT id, body FROM ${database}.notes ORDER BY id`);
    if (rows !== '') break;
    await sleep(100);
  }
  expect(rows).toBe('1\tfirst\n2\tsecond\n');
  await query(0, `DROP DATABASE ${database} ON CLUSTER events_1x2`);
});

test('clusterNode kills a node with SIGKILL and restarts it', async () => {
  const ch4 = clusterNode('clickhouse', 'ch4');
  const before = ch4.pid();
  expect(before).toBeGreaterThan(0);

  await ch4.kill();
  expect(ch4.pid()).toBeUndefined();
  await expect(query(3, 'SELECT 1')).rejects.toThrow();

  await ch4.restart();
  expect(ch4.pid()).toBeGreaterThan(0);
  expect(ch4.pid()).not.toBe(before);
  expect(await query(3, "SELECT count() > 0 FROM system.zookeeper WHERE path = '/'")).toBe('1\n');
}, 120_000);

test('clusterNode names only the nodes of the layout', () => {
  expect(() => clusterNode('clickhouse', 'ch5')).toThrow("no clickhouse cluster node 'ch5'");
  expect(() => clusterNode('kafka', 'ch1')).toThrow("no kafka cluster node 'ch1'");
});

test('down stops the nodes and ZooKeeper', async () => {
  const pids = NODES.map((name) => clusterNode('clickhouse', name).pid());
  expect(pids.every((pid) => pid !== undefined)).toBe(true);

  const down = await infra('down', 'clickhouse-cluster');
  expect(down.code).toBe(0);

  expect(NODES.map((name) => clusterNode('clickhouse', name).pid())).toEqual([undefined, undefined, undefined, undefined]);
  for (const port of [...HTTP_PORTS, ...TCP_PORTS, Number(PORTS.ZOOKEEPER_PORT)]) {
    expect(await portOpen(port)).toBe(false);
  }
  const status = await infra('status', 'clickhouse-cluster');
  expect(status.code).toBe(3);
  for (const name of NODES) expect(status.stdout).toMatch(new RegExp(`^clickhouse-${name} stopped `, 'm'));
  expect(status.stdout).toMatch(/^zookeeper\s+stopped /m);
}, 120_000);
