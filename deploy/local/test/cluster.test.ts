import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePorts } from '../src/ports';
import { clusterNode } from '../src/testing/cluster';
import { uniqueSuffix } from '../src/testing/infra';

/**
 * `infra.sh up clickhouse-cluster` runs four ClickHouse servers over one
 * ZooKeeper as the clusters events_1x2 and events_2x2; clusterNode kills and
 * restarts one of them; `down` stops them all. A private state folder on
 * ports of its own, so the shared cluster is never touched.
 */

const INFRA_SH = path.join(__dirname, '..', 'infra.sh');
const NODES = ['ch1', 'ch2', 'ch3', 'ch4'] as const;

/** Ports of this test's own, drawn in beforeAll from its jest worker's slice, so that a second `npm test` beside it draws others. */
let ports: { zookeeper: number; http: number[]; tcp: number[]; interserver: number[] };

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
  const response = await fetch(`http://127.0.0.1:${ports.http[node]}/`, { method: 'POST', body: sql });
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
  const drawn = await freePorts(13);
  ports = { zookeeper: drawn[0], http: drawn.slice(1, 5), tcp: drawn.slice(5, 9), interserver: drawn.slice(9, 13) };
  const env = {
    STATE_DIR: stateDir,
    ZOOKEEPER_PORT: String(ports.zookeeper),
    CLICKHOUSE_CLUSTER_HTTP_PORTS: ports.http.join(','),
    CLICKHOUSE_CLUSTER_TCP_PORTS: ports.tcp.join(','),
    CLICKHOUSE_CLUSTER_INTERSERVER_PORTS: ports.interserver.join(','),
  };
  // clusterNode and infra.sh take the state folder and ports from the environment, as the test command exports them.
  for (const [name, value] of Object.entries(env)) {
    savedEnv[name] = process.env[name];
    process.env[name] = value;
  }
  const up = await infra('up', 'clickhouse-cluster');
  if (up.code !== 0) throw new Error(`infra.sh up clickhouse-cluster failed:\n${up.stderr}`);
  expect(up.stdout).toContain(`export CLICKHOUSE_CLUSTER_URLS=${ports.http.map((p) => `http://127.0.0.1:${p}`).join(',')}`);
  expect(up.stdout).toContain(`export ZOOKEEPER_ADDRESS=127.0.0.1:${ports.zookeeper}`);
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
    ['events_1x2', 1, 1, ports.tcp[0]],
    ['events_1x2', 1, 2, ports.tcp[1]],
    ['events_2x2', 1, 1, ports.tcp[0]],
    ['events_2x2', 1, 2, ports.tcp[1]],
    ['events_2x2', 2, 1, ports.tcp[2]],
    ['events_2x2', 2, 2, ports.tcp[3]],
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

/**
 * Holds PORT as the client end of a connection, the way a connection the
 * kernel gave that port would: python, since Node sets SO_REUSEADDR on every
 * socket it binds, and a server could then listen on the port anyway.
 */
async function holdAsClientPort(port: number): Promise<{ release(): Promise<void> }> {
  const script = `
import socket, struct, sys
server = socket.socket(); server.bind(('127.0.0.1', 0)); server.listen()
client = socket.socket(); client.bind(('127.0.0.1', ${port})); client.connect(server.getsockname())
print('held', flush=True)
sys.stdin.read()
client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0))  # reset: no TIME-WAIT
client.close()
`;
  const holder = spawn('python3', ['-c', script], { stdio: ['pipe', 'pipe', 'inherit'] });
  await new Promise<void>((resolve, reject) => {
    holder.stdout.once('data', () => resolve());
    holder.once('exit', (code) => reject(new Error(`python3 could not hold port ${port} (exit ${code})`)));
  });
  return {
    release: () =>
      new Promise<void>((resolve) => {
        holder.once('exit', () => resolve());
        holder.stdin.end();
      }),
  };
}

test('a port held by the client end of a connection is waited for, then the node starts on it', async () => {
  const ch4 = clusterNode('clickhouse', 'ch4');
  await ch4.kill();
  // Its replication port: no connection has ended there, whose TIME-WAIT would keep python from binding it.
  const holder = await holdAsClientPort(ports.interserver[3]);
  const up = infra('up', 'clickhouse-cluster');
  await sleep(2_000);
  await holder.release();

  const result = await up;
  expect(result.code).toBe(0);
  expect(result.stderr).toContain(`clickhouse-cluster ch4: port ${ports.interserver[3]} is held by connections (1 ESTAB)`);
  expect(await query(3, 'SELECT 1')).toBe('1\n');
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
  // A listening socket goes with its process; a port still open a while after names what else holds it.
  const listening = [...ports.http, ...ports.tcp, ports.zookeeper];
  const openPorts = async () => (await Promise.all(listening.map(async (port) => ((await portOpen(port)) ? [port] : [])))).flat();
  for (let tries = 0; tries < 50 && (await openPorts()).length > 0; tries += 1) await new Promise((resolve) => setTimeout(resolve, 200));
  expect(await openPorts()).toEqual([]);
  const status = await infra('status', 'clickhouse-cluster');
  expect(status.code).toBe(3);
  for (const name of NODES) expect(status.stdout).toMatch(new RegExp(`^clickhouse-${name} stopped `, 'm'));
  expect(status.stdout).toMatch(/^zookeeper\s+stopped /m);
}, 120_000);
