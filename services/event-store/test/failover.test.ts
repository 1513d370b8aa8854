import net from 'node:net';
import { createClickHouse } from '@mail/event-store';
import { createTestClickHouse, type TestClickHouse } from '@mail/local';

// A client over several servers (CLICKHOUSE_URL with commas) whose first server refuses connections, or breaks them:
// it moves on to the next, repeating what is safe to repeat there. The real server is the single one of the test run.

jest.setTimeout(60_000);

let database: TestClickHouse;
/** A port nothing listens on. */
let closedPort: number;
/** A server that accepts connections and resets each at once: a server dying in the middle of a request. */
let resetting: net.Server;
let resettingPort: number;

const listen = async (server: net.Server): Promise<number> => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as net.AddressInfo).port;
};

beforeAll(async () => {
  database = await createTestClickHouse('failover');
  const probe = net.createServer();
  closedPort = await listen(probe);
  await new Promise((resolve) => probe.close(resolve));
  resetting = net.createServer((socket) => socket.resetAndDestroy());
  resettingPort = await listen(resetting);
  const setup = createClickHouse(database.url, database.database);
  await setup.command({ query: 'CREATE TABLE rows (n UInt32) ENGINE = MergeTree() ORDER BY n' });
  await setup.close();
});

afterAll(async () => {
  await new Promise((resolve) => resetting?.close(resolve));
  await database?.drop();
});

const count = async (client: ReturnType<typeof createClickHouse>): Promise<number> => {
  const result = await client.query({ query: 'SELECT count() AS n FROM rows', format: 'JSONEachRow' });
  return Number((await result.json<{ n: string }>())[0].n);
};

it('repeats a read, and a command that never reached its server, on the next server', async () => {
  const client = createClickHouse(`http://127.0.0.1:${closedPort},${database.url}`, database.database);
  try {
    expect(await count(client)).toBe(0);
    const other = createClickHouse([`http://127.0.0.1:${closedPort}`, database.url], database.database);
    await other.command({ query: 'INSERT INTO rows VALUES (1)' });
    expect((await other.ping()).success).toBe(true);
    await other.close();
    expect(await count(client)).toBe(1);
  } finally {
    await client.close();
  }
});

it('lets an insert whose server broke the connection fail, and sends the next call to the next server', async () => {
  const client = createClickHouse([`http://127.0.0.1:${resettingPort}`, database.url], database.database);
  try {
    // The server may have stored some of it: the caller decides (ingestion marks the batch's days unsettled first).
    await expect(client.insert({ table: 'rows', values: [{ n: 2 }], format: 'JSONEachRow' })).rejects.toMatchObject({ code: 'ECONNRESET' });
    await client.insert({ table: 'rows', values: [{ n: 2 }], format: 'JSONEachRow' });
    expect(await count(client)).toBe(2);
  } finally {
    await client.close();
  }
});

it('repeats a read whose connection broke on the next server, and fails once every server has failed', async () => {
  const client = createClickHouse([`http://127.0.0.1:${resettingPort}`, database.url], database.database);
  const dead = createClickHouse([`http://127.0.0.1:${resettingPort}`, `http://127.0.0.1:${closedPort}`], database.database);
  try {
    expect(await count(client)).toBe(2);
    await expect(count(dead)).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    expect((await dead.ping()).success).toBe(false);
  } finally {
    await Promise.all([client.close(), dead.close()]);
  }
});

it('does not move on for an error of the query itself', async () => {
  const client = createClickHouse([database.url, `http://127.0.0.1:${closedPort}`], database.database);
  try {
    await expect(client.query({ query: 'SELECT nonsense FROM rows', format: 'JSONEachRow' })).rejects.toThrow(/nonsense/);
    expect(await count(client)).toBe(2);
  } finally {
    await client.close();
  }
});
