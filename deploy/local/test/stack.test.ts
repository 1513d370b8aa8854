import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import {
  DEFAULT_PORTS,
  freePortRange,
  freePorts,
  GRPC_ADDRESS_VARIABLES,
  PROCESS_NAMES,
  SERVICE_NAMES,
  StackStartError,
  runningDetached,
  startStack,
  stopDetached,
  type ProcessName,
  type Stack,
  type StackOptions,
} from '../src/stack';
import { RECIPIENT_READER } from '../src/recipients';
import { infraEnv } from '../src/testing/infra';

/** The launcher's mechanics, with a tiny stand-in script in place of the real services. */

const STANDIN = path.join(__dirname, 'fixtures', 'standin.js');
const NEVER_READY = path.join(__dirname, 'fixtures', 'never-ready.js');
const BUILT_LAUNCHER = path.resolve(__dirname, '..', 'dist', 'stack.js');
const standins = Object.fromEntries(PROCESS_NAMES.map((name) => [name, STANDIN])) as Record<ProcessName, string>;

interface Report {
  pid: number;
  startedAt: number;
  env: Record<string, string>;
}

let workDir: string;
const stacks: Stack[] = [];

beforeAll(() => {
  workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'stack-test-'));
});
afterEach(async () => {
  await Promise.all(stacks.splice(0).map((stack) => stack.stopAll()));
});
afterAll(() => fs.rmSync(workDir, { recursive: true, force: true }));

function options(overrides: Partial<StackOptions> = {}): StackOptions {
  const stateDir = fs.mkdtempSync(path.join(workDir, 'state-'));
  return {
    stateDir,
    logDir: path.join(stateDir, 'logs'),
    scripts: standins,
    readyTimeoutMs: 10_000,
    stopTimeoutMs: 2_000,
    ...overrides,
  };
}

async function start(stackOptions: StackOptions): Promise<Stack> {
  const stack = await startStack(stackOptions);
  stacks.push(stack);
  return stack;
}

function get(url: string): Promise<{ status: number | string; body: string }> {
  return new Promise((resolve) => {
    http
      .get(url, { agent: false }, (response) => {
        let body = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => (body += chunk));
        response.on('end', () => resolve({ status: response.statusCode ?? 0, body }));
      })
      .on('error', (error: NodeJS.ErrnoException) => resolve({ status: error.code ?? error.message, body: '' }));
  });
}

async function report(baseUrl: string): Promise<Report> {
  const { status, body } = await get(`${baseUrl}/env`);
  expect(status).toBe(200);
  return JSON.parse(body) as Report;
}

/** Alive and not a zombie. */
function alive(pid: number): boolean {
  try {
    return !/^State:\s*Z/m.test(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  } catch {
    return false;
  }
}

async function eventually(check: () => boolean, timeoutMs = 30_000): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return true;
}

function loggedPids(logFile: string): number[] {
  return [...fs.readFileSync(logFile, 'utf8').matchAll(/stand-in (\d+) listening/g)].map((m) => Number(m[1]));
}

test('starts the services, then the gateway, on free ports with the environment of CONVENTIONS.md', async () => {
  const stack = await start(options({ env: { STANDIN_READY_DELAY_MS: '300', CLICKHOUSE_DATABASE: 'caller_db', LOG_LEVEL: 'debug' } }));

  const ports = [stack.ports.gateway, stack.ports.gatewayOps, ...SERVICE_NAMES.flatMap((s) => [stack.ports[s].grpc, stack.ports[s].ops])];
  const defaults = [
    DEFAULT_PORTS.gateway,
    DEFAULT_PORTS.gatewayOps,
    ...SERVICE_NAMES.flatMap((s) => [DEFAULT_PORTS[s].grpc, DEFAULT_PORTS[s].ops]),
  ];
  expect(new Set(ports).size).toBe(2 + 2 * SERVICE_NAMES.length);
  expect(ports.filter((port) => defaults.includes(port))).toEqual([]);
  expect(stack.urls.gateway).toBe(`http://127.0.0.1:${stack.ports.gateway}`);

  const infra = infraEnv();
  const gateway = await report(stack.urls.ops.gateway);
  expect(gateway.env.PORT).toBe(String(stack.ports.gateway));
  expect(gateway.env.OPS_PORT).toBe(String(stack.ports.gatewayOps));
  for (const service of SERVICE_NAMES) {
    expect(stack.urls.grpc[service]).toBe(`127.0.0.1:${stack.ports[service].grpc}`);
    expect(gateway.env[GRPC_ADDRESS_VARIABLES[service]]).toBe(stack.urls.grpc[service]);

    const { env, startedAt } = await report(stack.urls.ops[service]);
    expect(env[GRPC_ADDRESS_VARIABLES[service]]).toBe(stack.urls.grpc[service]);
    expect(env.OPS_PORT).toBe(String(stack.ports[service].ops));
    expect(env.PORT).toBeUndefined();
    expect(gateway.startedAt).toBeGreaterThanOrEqual(startedAt + 300);
  }
  expect((await report(stack.urls.ops.ingestion)).env.CAMPAIGN_GRPC_ADDR).toBe(stack.urls.grpc.campaign);
  expect((await report(stack.urls.ops.identity)).env.CAMPAIGN_GRPC_ADDR).toBeUndefined();
  // Delivery sends nowhere and reads recipients from the stack's own database, as the recipient reader, unless the caller says otherwise.
  const recipients = new URL(infra.databaseUrl);
  recipients.username = RECIPIENT_READER.user;
  recipients.password = RECIPIENT_READER.password;
  expect((await report(stack.urls.ops.delivery)).env).toMatchObject({
    CAMPAIGN_GRPC_ADDR: stack.urls.grpc.campaign,
    ANALYTICS_GRPC_ADDR: stack.urls.grpc.analytics,
    SMTP_URL: 'smtp://127.0.0.1:1?tls=off',
    RECIPIENTS_DATABASE_URL: recipients.toString(),
  });

  for (const name of PROCESS_NAMES) {
    const { env } = await report(stack.urls.ops[name]);
    expect(env).toMatchObject({
      DATABASE_URL: infra.databaseUrl,
      KAFKA_BROKERS: infra.kafkaBrokers.join(','),
      CLICKHOUSE_URL: infra.clickhouseUrl,
      CLICKHOUSE_DATABASE: 'caller_db',
      LOG_LEVEL: 'debug',
    });
    expect(fs.readFileSync(stack.logFile(name), 'utf8')).toMatch(/stand-in \d+ listening/);
  }
});

test("freePorts draws distinct free ports from its jest worker's slice of its suite's band, below the range the kernel picks client ports from", async () => {
  const [from, below] = freePortRange();
  const ports = await freePorts(50);
  expect(new Set(ports).size).toBe(50);
  for (const port of ports) {
    expect(port).toBeGreaterThanOrEqual(from);
    expect(port).toBeLessThan(below);
  }
  expect([freePortRange('0', '0'), freePortRange('1', '0'), freePortRange('2', '0'), freePortRange('6', '0')]).toEqual([
    [10_000, 11_000],
    [11_000, 12_000],
    [12_000, 13_000],
    [11_000, 12_000],
  ]);
  // A second suite beside the first: the same workers, another band.
  expect([freePortRange('0', '1'), freePortRange('1', '1'), freePortRange('2', '1')]).toEqual([
    [15_000, 16_000],
    [16_000, 17_000],
    [17_000, 18_000],
  ]);
});

test('a variable the caller sets wins; stray addresses in process.env do not move a stack', async () => {
  const [gatewayPort, opsPort] = await freePorts(2);
  process.env.IDENTITY_GRPC_ADDR = '127.0.0.1:1';
  let stack: Stack;
  try {
    stack = await start(
      options({
        processes: ['identity', 'gateway'],
        env: { PORT: String(gatewayPort), DATABASE_URL: 'postgres://caller@127.0.0.1:1/x' },
        ports: { gateway: 1, identity: { ops: opsPort } },
      }),
    );
  } finally {
    delete process.env.IDENTITY_GRPC_ADDR;
  }
  expect(stack.urls.gateway).toBe(`http://127.0.0.1:${gatewayPort}`);
  expect(stack.ports.identity.ops).toBe(opsPort);
  expect(stack.urls.grpc.identity).not.toBe('127.0.0.1:1');
  expect(stack.processes).toEqual(['identity', 'gateway']);
  const identity = await report(stack.urls.ops.identity);
  expect(identity.env.IDENTITY_GRPC_ADDR).toBe(stack.urls.grpc.identity);
  expect(identity.env.DATABASE_URL).toBe('postgres://caller@127.0.0.1:1/x');
});

test('kill, restart and stop one process; stopAll ends the rest', async () => {
  const stack = await start(options({ processes: ['campaign', 'gateway'] }));
  const first = stack.pid('campaign')!;

  await stack.kill('campaign', 'SIGKILL');
  expect(stack.pid('campaign')).toBeUndefined();
  expect(await eventually(() => !alive(first))).toBe(true);
  expect((await get(`${stack.urls.ops.campaign}/readyz`)).status).toBe('ECONNREFUSED');

  await stack.restart('campaign');
  const second = stack.pid('campaign')!;
  expect(second).not.toBe(first);
  expect((await get(`${stack.urls.ops.campaign}/readyz`)).status).toBe(200);
  expect(fs.readFileSync(stack.logFile('campaign'), 'utf8').match(/launcher: starting campaign/g)).toHaveLength(2);

  const gateway = stack.pid('gateway')!;
  await stack.stop('gateway');
  expect(stack.pid('gateway')).toBeUndefined();
  expect(fs.readFileSync(stack.logFile('gateway'), 'utf8')).toContain('SIGTERM, stopping');
  expect(alive(second)).toBe(true);

  await stack.stopAll();
  expect(await eventually(() => !alive(second) && !alive(gateway))).toBe(true);
  await expect(stack.restart('identity')).rejects.toThrow('identity is not part of this stack');
});

test('stop sends SIGKILL when SIGTERM is ignored for stopTimeoutMs', async () => {
  const stack = await start(options({ processes: ['analytics'], env: { STANDIN_IGNORE_SIGTERM: '1' }, stopTimeoutMs: 500 }));
  const pid = stack.pid('analytics')!;
  const startedAt = Date.now();
  await stack.stop('analytics');
  expect(Date.now() - startedAt).toBeGreaterThanOrEqual(500);
  expect(await eventually(() => !alive(pid))).toBe(true);
  expect(fs.readFileSync(stack.logFile('analytics'), 'utf8')).toContain('ignoring SIGTERM');
});

test('a process that never gets ready fails the start after the timeout, with its log tail, and the rest is stopped', async () => {
  const stackOptions = options({
    processes: ['identity', 'analytics', 'gateway'],
    scripts: { ...standins, analytics: NEVER_READY },
    // Long enough for a loaded host to start the stand-in, so its last answer is its 503.
    readyTimeoutMs: 6_000,
  });
  const startedAt = Date.now();
  const error = (await startStack(stackOptions).catch((e: unknown) => e)) as StackStartError;
  expect(Date.now() - startedAt).toBeGreaterThanOrEqual(6_000);
  expect(Date.now() - startedAt).toBeLessThan(40_000);
  expect(error).toBeInstanceOf(StackStartError);
  expect(error.processName).toBe('analytics');
  expect(error.logFile).toBe(path.join(stackOptions.logDir, 'analytics.log'));
  expect(error.message).toMatch(/^analytics did not become ready within 6 s: GET http:\/\/127\.0\.0\.1:\d+\/readyz answered 503/);
  expect(error.message).toContain('waiting for a dependency that never comes');

  expect(fs.existsSync(path.join(stackOptions.logDir, 'gateway.log'))).toBe(false);
  const pids = ['identity', 'analytics'].flatMap((name) => loggedPids(path.join(stackOptions.logDir, `${name}.log`)));
  expect(pids).toHaveLength(2);
  expect(await eventually(() => pids.every((pid) => !alive(pid)))).toBe(true);
});

test('a process that exits while starting fails the start at once, with its log tail', async () => {
  const startedAt = Date.now();
  // At once: long before the ready timeout, which the message shows was not what ended it.
  const error = (await startStack(options({ processes: ['brand-guide'], env: { STANDIN_MODE: 'crash' }, readyTimeoutMs: 50_000 })).catch(
    (e: unknown) => e,
  )) as StackStartError;
  expect(Date.now() - startedAt).toBeLessThan(25_000);
  expect(error).toBeInstanceOf(StackStartError);
  expect(error.message).toMatch(/^brand-guide exited with code 3 before it was ready/);
  expect(error.message).toContain('cannot reach the database, giving up');
});

test('refuses a port in use, OPS_PORT for the whole stack and an unbuilt process', async () => {
  const busy = net.createServer();
  await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', resolve));
  const { port } = busy.address() as net.AddressInfo;
  try {
    await expect(startStack(options({ processes: ['gateway'], ports: { gateway: port } }))).rejects.toThrow(
      `gateway PORT: 127.0.0.1:${port} is already in use`,
    );
  } finally {
    await new Promise((resolve) => busy.close(resolve));
  }
  await expect(startStack(options({ env: { OPS_PORT: '9999' } }))).rejects.toThrow(/OPS_PORT cannot be set/);
  await expect(
    startStack(options({ processes: ['identity'], scripts: { identity: path.join(workDir, 'missing', 'main.js') } })),
  ).rejects.toThrow(/identity: .*missing\/main\.js does not exist; build it first/);
});

test('detached: PID files let another process stop the stack, and only our processes', async () => {
  const stackOptions = options({ detached: true, processes: ['identity', 'gateway'] });
  const stack = await start(stackOptions);
  const pidFile = (name: string) => path.join(stackOptions.stateDir, 'pids', `${name}.pid`);
  const identity = Number(fs.readFileSync(pidFile('identity'), 'utf8'));
  const gateway = Number(fs.readFileSync(pidFile('gateway'), 'utf8'));
  expect([identity, gateway]).toEqual([stack.pid('identity'), stack.pid('gateway')]);
  // Own session (setsid): a Ctrl-C in the terminal of `npm run up` does not reach it.
  expect(fs.readFileSync(`/proc/${identity}/stat`, 'utf8').split(') ')[1].split(' ')[3]).toBe(String(identity));
  expect(runningDetached(stackOptions.stateDir)).toEqual([
    { name: 'identity', pid: identity },
    { name: 'gateway', pid: gateway },
  ]);
  await expect(startStack(stackOptions)).rejects.toThrow(/already runs: identity \(pid \d+\), gateway/);

  // The same PID files in another state folder do not make these processes its own.
  const other = options();
  fs.cpSync(path.join(stackOptions.stateDir, 'pids'), path.join(other.stateDir, 'pids'), { recursive: true });
  expect(runningDetached(other.stateDir)).toEqual([]);
  expect(await stopDetached(other.stateDir)).toEqual([]);
  expect(alive(identity) && alive(gateway)).toBe(true);

  const stopped = await stopDetached(stackOptions.stateDir);
  expect(stopped.map((p) => p.name)).toEqual(['identity', 'gateway']);
  expect(alive(identity) || alive(gateway)).toBe(false);
  expect(fs.existsSync(pidFile('identity')) || fs.existsSync(pidFile('gateway'))).toBe(false);
});

test('attached: the processes end when the process that started them is SIGKILLed', async () => {
  const stackOptions = options({ processes: ['identity', 'campaign'] });
  const script = `
    require(${JSON.stringify(BUILT_LAUNCHER)})
      .startStack(${JSON.stringify(stackOptions)})
      .then((stack) => console.log(JSON.stringify(stack.processes.map((name) => stack.pid(name)))));
    setInterval(() => {}, 1000);`;
  const owner = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  const pids = await new Promise<number[]>((resolve, reject) => {
    owner.stdout.once('data', (line: Buffer) => resolve(JSON.parse(line.toString()) as number[]));
    owner.once('exit', (code) => reject(new Error(`the launcher process exited with ${code}`)));
  });
  expect(pids.every(alive)).toBe(true);
  owner.kill('SIGKILL');
  expect(await eventually(() => pids.every((pid) => !alive(pid)))).toBe(true);
});
