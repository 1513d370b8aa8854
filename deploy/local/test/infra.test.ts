import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { createClient } from '@clickhouse/client';
import { Kafka, logLevel, Partitioners } from 'kafkajs';
import { Client } from 'pg';
import { createTestClickHouse, createTestPostgres } from '../src/testing/databases';
import { freePorts } from '../src/ports';
import { infraEnv, uniqueSuffix } from '../src/testing/infra';
import { startMailpit } from '../src/testing/mailpit';

/** The real servers started by deploy/local/infra.sh answer the way the services use them. */

test('PostgreSQL: a private database takes writes and reads them back', async () => {
  const database = await createTestPostgres('infra');
  const client = new Client({ connectionString: database.url });
  try {
    await client.connect();
    await client.query('CREATE TABLE notes (id serial PRIMARY KEY, body text NOT NULL)');
    await client.query('INSERT INTO notes (body) VALUES ($1), ($2)', ['first', 'second']);
    const { rows } = await client.query<{ id: number; body: string }>('SELECT id, body FROM notes ORDER BY id');
    expect(rows).toEqual([
      { id: 1, body: 'first' },
      { id: 2, body: 'second' },
    ]);
  } finally {
    await client.end();
    await database.drop();
  }
});

test("PostgreSQL: the services' role may end an autovacuum worker, as dropping a test database WITH (FORCE) does", async () => {
  const client = new Client({ connectionString: infraEnv().databaseUrl });
  try {
    await client.connect();
    const { rows } = await client.query<{ member: boolean }>("SELECT pg_has_role(current_user, 'pg_signal_backend', 'USAGE') AS member");
    expect(rows).toEqual([{ member: true }]);
  } finally {
    await client.end();
  }
});

test('Kafka: a new topic takes 3 messages with acks=-1 and a consumer group reads them back', async () => {
  const kafka = new Kafka({ clientId: 'infra-test', brokers: infraEnv().kafkaBrokers, logLevel: logLevel.WARN });
  const topic = `infra-test-${uniqueSuffix()}`;
  const admin = kafka.admin();
  const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
  const consumer = kafka.consumer({ groupId: `infra-test-${uniqueSuffix()}` });
  await admin.connect();
  try {
    expect(await admin.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: true })).toBe(true);

    await producer.connect();
    await producer.send({
      topic,
      acks: -1,
      messages: [1, 2, 3].map((n) => ({ key: `k${n}`, value: `message ${n}` })),
    });

    await consumer.connect();
    await consumer.subscribe({ topics: [topic], fromBeginning: true });
    const received: string[] = [];
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`consumed only ${received.length} of 3 messages in 30 s`)), 30_000);
      void consumer.run({
        eachMessage: ({ message }) => {
          received.push(`${message.key?.toString()}=${message.value?.toString()}`);
          if (received.length === 3) {
            clearTimeout(timer);
            resolve();
          }
          return Promise.resolve();
        },
      });
    });
    expect(received).toEqual(['k1=message 1', 'k2=message 2', 'k3=message 3']);
  } finally {
    await consumer.disconnect();
    await producer.disconnect();
    await admin.deleteTopics({ topics: [topic] }).catch(() => undefined);
    await admin.disconnect();
  }
});

test('ClickHouse: a private database takes JSONEachRow inserts and selects them back', async () => {
  const database = await createTestClickHouse('infra');
  const client = createClient({ url: database.url, database: database.database });
  try {
    await client.command({
      query: `CREATE TABLE events (id UInt32, kind String, at DateTime('UTC')) ENGINE = MergeTree ORDER BY id`,
    });
    await client.insert({
      table: 'events',
      format: 'JSONEachRow',
      values: [
        { id: 2, kind: 'open', at: '2026-01-02 03:04:05' },
        { id: 1, kind: 'click', at: '2026-01-01 00:00:00' },
      ],
    });
    const result = await client.query({
      query: 'SELECT id, kind, toString(at) AS at FROM events ORDER BY id',
      format: 'JSONEachRow',
      clickhouse_settings: { wait_end_of_query: 1 },
    });
    expect(await result.json()).toEqual([
      { id: 1, kind: 'click', at: '2026-01-01 00:00:00' },
      { id: 2, kind: 'open', at: '2026-01-02 03:04:05' },
    ]);
  } finally {
    await client.close();
    await database.drop();
  }
});

test('ClickHouse: the server runs with the storage profile of deploy/clickhouse (4 KiB compressed blocks)', async () => {
  const client = createClient({ url: infraEnv().clickhouseUrl });
  try {
    const result = await client.query({
      query: "SELECT value FROM system.settings WHERE name = 'min_compress_block_size'",
      format: 'JSONEachRow',
    });
    expect(await result.json()).toEqual([{ value: '4096' }]);
  } finally {
    await client.close();
  }
});

test('Kafka cluster ids are base64url and never start with "-", which the storage tool would take for an option', () => {
  const script = fs.readFileSync(path.join(__dirname, '..', 'servers', 'kafka.sh'), 'utf8');
  const definition = script.match(/^kafka_new_cluster_id\(\) \{[\s\S]*?^\}/m)?.[0];
  expect(definition).toBeDefined();
  const ids = execFileSync('bash', ['-c', `${definition}\nfor i in $(seq 1 1000); do kafka_new_cluster_id; echo; done`], {
    encoding: 'utf8',
  })
    .trim()
    .split('\n');
  expect(ids).toHaveLength(1000);
  // One in 64 random ids starts with "-": a thousand make sure none does.
  expect(ids.filter((id) => !/^[A-Za-z0-9_][A-Za-z0-9_-]{21}$/.test(id))).toEqual([]);
});

test('infra.sh starts the single-node servers by default and the Kafka cluster only when named, which exports its three brokers; the bounce Mailpit exports its POP3 mailbox', () => {
  const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), 'infra-env-'));
  // The defaults, whatever ports the suite itself runs on (a second suite beside another one moves them all).
  const inherited = Object.fromEntries(Object.entries(process.env).filter(([name]) => !/_PORTS?$/.test(name)));
  const env = (variables: Record<string, string>, ...components: string[]): string =>
    execFileSync('bash', [path.join(__dirname, '..', 'infra.sh'), 'env', ...components], {
      encoding: 'utf8',
      env: { ...inherited, STATE_DIR: stateDir, ...variables },
    });
  try {
    expect(env({ KAFKA_PORT: '29092' })).toContain('export KAFKA_BROKERS=127.0.0.1:29092\n');
    expect(env({})).not.toContain('KAFKA_CLUSTER_BROKERS');
    expect(env({ KAFKA_CLUSTER_PORTS: '' }, 'kafka-cluster')).toBe(
      'export KAFKA_CLUSTER_BROKERS=127.0.0.1:29111,127.0.0.1:29112,127.0.0.1:29113\n',
    );
    expect(env({ KAFKA_CLUSTER_PORTS: '7001,7002,7003' }, 'kafka-cluster')).toBe(
      'export KAFKA_CLUSTER_BROKERS=127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003\n',
    );
    expect(env({}, 'bounce-mailpit')).toBe(
      'export BOUNCE_MAILPIT_SMTP_URL=smtp://127.0.0.1:21026?tls=off\n' +
        'export BOUNCE_MAILPIT_API_URL=http://127.0.0.1:28026\n' +
        'export BOUNCE_MAILPIT_POP3_URL=pop3://bounces:bounces@127.0.0.1:21110\n',
    );
  } finally {
    fs.rmSync(stateDir, { recursive: true, force: true });
  }
});

test("Mailpit's web page loads: the script and stylesheet its HTML names are in the binary infra.sh built", async () => {
  const mailpit = await startMailpit('web-page');
  try {
    const page = await fetch(`${mailpit.apiUrl}/`);
    expect(page.status).toBe(200);
    const html = await page.text();
    // Without the bundle that Mailpit's npm build makes, the HTML is served but both answer 404: a blank page.
    const assets = [...html.matchAll(/<script src="([^"]+)"|<link rel=stylesheet href="([^"]+)"/g)].map((m) => m[1] ?? m[2]);
    expect(assets).toHaveLength(2);
    for (const asset of assets) {
      const answer = await fetch(new URL(asset, `${mailpit.apiUrl}/`));
      const body = await answer.text();
      expect({ asset, status: answer.status }).toEqual({ asset, status: 200 });
      expect(answer.headers.get('content-type')).toMatch(asset.includes('.css') ? /^text\/css/ : /^application\/javascript/);
      // The Vue app is hundreds of kilobytes; an error page or a stub is not.
      expect(body.length).toBeGreaterThan(100_000);
    }
  } finally {
    await mailpit.close();
  }
});

/**
 * Says each command on a plain connection to the URL's host and port, after the greeting, and resolves to the
 * replies, greeting first; a reply ends with the first line `replyEnd` matches.
 */
async function converse(serverUrl: string, replyEnd: RegExp, commands: string[]): Promise<string[]> {
  const url = new URL(serverUrl);
  const socket = net.connect(Number(url.port), url.hostname);
  let received = '';
  let closed = false;
  let wake: (() => void) | undefined;
  socket.setEncoding('utf8');
  socket.on('data', (chunk: string) => {
    received += chunk;
    wake?.();
  });
  socket.on('close', () => {
    closed = true;
    wake?.();
  });
  socket.on('error', () => undefined);
  const reply = async (): Promise<string> => {
    for (;;) {
      const last = replyEnd.exec(received);
      if (last) {
        const text = received.slice(0, last.index + last[0].length);
        received = received.slice(text.length);
        return text;
      }
      if (closed) throw new Error(`the server closed the connection (after: ${received})`);
      await new Promise<void>((resolve) => (wake = resolve));
    }
  };
  try {
    const replies = [await reply()];
    for (const command of commands) {
      socket.write(`${command}\r\n`);
      replies.push(await reply());
    }
    return replies;
  } finally {
    socket.destroy();
  }
}

/** Hands one message to an SMTP server over a plain connection, a command at a time. */
async function sendOverSmtp(smtpUrl: string, to: string): Promise<void> {
  // A reply ends with its line whose code is followed by a space (the lines before it, as EHLO's, by a hyphen).
  const replies = await converse(smtpUrl, /^\d{3} .*\r\n/m, [
    'EHLO test',
    'MAIL FROM:<news@example.com>',
    `RCPT TO:<${to}>`,
    'DATA',
    'Subject: hi\r\n\r\nHello\r\n.',
    'QUIT',
  ]);
  for (const reply of replies) expect(reply).toMatch(/^[23]\d\d/);
}

test('infra.sh starts the bounce Mailpit on the ports it exports: it takes reports by SMTP and serves them over POP3', async () => {
  const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), 'infra-bounce-'));
  // The Mailpit binary this suite's servers run, not a build of its own.
  fs.symlinkSync(path.dirname(path.dirname(process.env.MAILPIT_BIN!)), path.join(stateDir, 'tools'));
  const [smtp, pop3, http] = await freePorts(3);
  const env = {
    ...process.env,
    STATE_DIR: stateDir,
    BOUNCE_MAILPIT_SMTP_PORT: String(smtp),
    BOUNCE_MAILPIT_POP3_PORT: String(pop3),
    BOUNCE_MAILPIT_HTTP_PORT: String(http),
  };
  const infra = (...args: string[]) => execFileSync('bash', [path.join(__dirname, '..', 'infra.sh'), ...args], { encoding: 'utf8', env });
  try {
    infra('up', 'bounce-mailpit');
    const exported = Object.fromEntries([...infra('env', 'bounce-mailpit').matchAll(/^export (\w+)=(.*)$/gm)].map((m) => [m[1], m[2]]));
    expect(exported.BOUNCE_MAILPIT_POP3_URL).toBe(`pop3://bounces:bounces@127.0.0.1:${pop3}`);
    await sendOverSmtp(exported.BOUNCE_MAILPIT_SMTP_URL, 'postmaster@example.com');
    const replies = await converse(exported.BOUNCE_MAILPIT_POP3_URL, /^[+-].*\r\n/m, ['USER bounces', 'PASS bounces', 'STAT', 'QUIT']);
    expect(replies.map((reply) => reply.slice(0, 3))).toEqual(['+OK', '+OK', '+OK', '+OK', '+OK']);
    expect(replies[3]).toMatch(/^\+OK 1 \d+\r\n$/);
  } finally {
    infra('down', 'bounce-mailpit');
    fs.rmSync(stateDir, { recursive: true, force: true });
  }
});

test('Mailpit: accepted() counts every message its SMTP server took, those deleted since included', async () => {
  const mailpit = await startMailpit('accepted');
  try {
    await sendOverSmtp(mailpit.smtpUrl, 'first@example.com');
    await mailpit.clear();
    await sendOverSmtp(mailpit.smtpUrl, 'second@example.com');
    expect(await mailpit.count()).toBe(1);
    expect(await mailpit.accepted()).toBe(2);
  } finally {
    await mailpit.close();
  }
});
