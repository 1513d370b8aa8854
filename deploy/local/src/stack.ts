import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { freePorts } from './ports';
import { infraVariables } from './testing/infra';
import { RECIPIENT_READER } from './recipients';

export { freePortRange, freePorts } from './ports';

/**
 * The process launcher: starts the services and the gateway from their built
 * dist/main.js with the environment of docs/CONVENTIONS.md, waits until each
 * answers /readyz on its ops port, and stops, kills or restarts them. Used by `npm run up`
 * (detached), by gateway end-to-end tests and by benchmarks and fault tests.
 */

export type ServiceName = 'identity' | 'campaign' | 'brand-guide' | 'analytics' | 'ingestion' | 'delivery';
export type ProcessName = ServiceName | 'gateway';

/** Start order; the gateway comes last. */
export const SERVICE_NAMES: readonly ServiceName[] = ['identity', 'campaign', 'brand-guide', 'analytics', 'ingestion', 'delivery'];
export const PROCESS_NAMES: readonly ProcessName[] = [...SERVICE_NAMES, 'gateway'];

export interface ServicePorts {
  grpc: number;
  ops: number;
}
/** gateway: the public API; gatewayOps: its ops server (/readyz in detail, /metrics). */
export type StackPorts = { gateway: number; gatewayOps: number } & Record<ServiceName, ServicePorts>;
/** Ports to use; whatever is left out is a free port picked at start. */
export type StackPortChoice = { gateway?: number; gatewayOps?: number } & { [K in ServiceName]?: Partial<ServicePorts> };

/** The ports of docs/CONVENTIONS.md, used by `npm run up`. */
export const DEFAULT_PORTS: StackPorts = {
  identity: { grpc: 50051, ops: 9101 },
  campaign: { grpc: 50052, ops: 9102 },
  'brand-guide': { grpc: 50053, ops: 9103 },
  analytics: { grpc: 50054, ops: 9104 },
  ingestion: { grpc: 50055, ops: 9105 },
  delivery: { grpc: 50056, ops: 9106 },
  gateway: 8080,
  gatewayOps: 9100,
};

export const GRPC_ADDRESS_VARIABLES: Readonly<Record<ServiceName, string>> = {
  identity: 'IDENTITY_GRPC_ADDR',
  campaign: 'CAMPAIGN_GRPC_ADDR',
  'brand-guide': 'BRAND_GUIDE_GRPC_ADDR',
  analytics: 'ANALYTICS_GRPC_ADDR',
  ingestion: 'INGESTION_GRPC_ADDR',
  delivery: 'DELIVERY_GRPC_ADDR',
};

/** The services each process calls, whose addresses it gets (docs/CONVENTIONS.md). */
const DIALS: Readonly<Record<ProcessName, readonly ServiceName[]>> = {
  identity: [],
  campaign: [],
  'brand-guide': [],
  analytics: [],
  ingestion: ['campaign'],
  delivery: ['campaign', 'analytics'],
  gateway: SERVICE_NAMES,
};

/** Marks the processes of one state folder, so `down` never stops anything else. */
const STACK_MARKER_VARIABLE = 'MAIL_STACK_DIR';
const ADDRESSING_VARIABLES = new Set(['PORT', 'OPS_PORT', ...Object.values(GRPC_ADDRESS_VARIABLES)]);
const REPO_ROOT = path.resolve(__dirname, '../../..');

export interface StackOptions {
  /** Holds pids/<name>.pid in detached mode. */
  stateDir: string;
  /** Each process writes stdout and stderr to <logDir>/<name>.log (appended). */
  logDir: string;
  /**
   * The caller's environment: a variable set here (non-empty) wins over every
   * default, including the addresses (PORT, *_GRPC_ADDR). Everything else is
   * inherited from process.env, except the addressing variables, so a stray
   * PORT in a test runner's environment cannot move a test stack.
   */
  env?: Readonly<Record<string, string | undefined>>;
  ports?: StackPortChoice;
  /** Which processes to start (default: all seven). */
  processes?: readonly ProcessName[];
  /** Own session, PID files, outlives this process (`npm run up`). Default: attached, dies with this process. */
  detached?: boolean;
  /** Per process (default 60 s). */
  readyTimeoutMs?: number;
  /** SIGTERM grace before SIGKILL (default 10 s). */
  stopTimeoutMs?: number;
  /** Script each process runs instead of its dist/main.js (stand-ins in tests). */
  scripts?: Partial<Record<ProcessName, string>>;
}

export interface StackUrls {
  /** Base URL of the gateway, e.g. http://127.0.0.1:8080 (no trailing slash). */
  gateway: string;
  /** host:port, the value of each *_GRPC_ADDR. */
  grpc: Record<ServiceName, string>;
  /** Base URL of each process's ops server (/readyz, /healthz, /metrics). */
  ops: Record<ProcessName, string>;
}

export interface Stack {
  readonly urls: StackUrls;
  readonly ports: StackPorts;
  readonly processes: readonly ProcessName[];
  readonly logDir: string;
  logFile(name: ProcessName): string;
  /** PID of a running process, undefined once it has exited. */
  pid(name: ProcessName): number | undefined;
  /** SIGTERM, then SIGKILL after stopTimeoutMs; without a name, stopAll(). */
  stop(name?: ProcessName): Promise<void>;
  /** Sends a signal that ends the process (default SIGKILL) and waits until it has exited. */
  kill(name: ProcessName, signal?: NodeJS.Signals): Promise<void>;
  /** Stops the process if it runs, starts it again with the same environment and ports, waits until ready. */
  restart(name: ProcessName): Promise<void>;
  /** Gateway first, then the services. */
  stopAll(): Promise<void>;
}

/** Starting failed: a process did not get ready in time, or exited. Carries the tail of its log. */
export class StackStartError extends Error {
  constructor(
    readonly processName: ProcessName,
    readonly logFile: string,
    reason: string,
  ) {
    super(`${processName} ${reason}\n--- last lines of ${logFile} ---\n${logTail(logFile)}`);
    this.name = 'StackStartError';
  }
}

interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
  error?: Error;
}

interface Running {
  child: ChildProcess;
  exited: Promise<Exit>;
  exit?: Exit;
}

interface Plan {
  script: string;
  env: Record<string, string>;
  readyUrl: string;
  logFile: string;
}

/** Starts the requested processes (services first, then the gateway) and waits until each is ready. */
export async function startStack(options: StackOptions): Promise<Stack> {
  const detached = options.detached ?? false;
  const readyTimeoutMs = options.readyTimeoutMs ?? 60_000;
  const stopTimeoutMs = options.stopTimeoutMs ?? 10_000;
  const stateDir = path.resolve(options.stateDir);
  const logDir = path.resolve(options.logDir);
  const wanted = PROCESS_NAMES.filter((name) => (options.processes ?? PROCESS_NAMES).includes(name));
  const caller = setVariables(options.env ?? {});
  if (caller.OPS_PORT !== undefined) {
    throw new Error('OPS_PORT cannot be set for the whole stack: each process needs its own (use ports.<service>.ops, ports.gatewayOps)');
  }
  const shared = sharedEnvironment(caller, stateDir);

  const scripts = new Map(wanted.map((name) => [name, path.resolve(options.scripts?.[name] ?? defaultScript(name))]));
  for (const [name, script] of scripts) {
    if (!fs.existsSync(script)) throw new Error(`${name}: ${script} does not exist; build it first (npm run build)`);
  }
  if (detached) {
    const alreadyRunning = runningDetached(stateDir);
    if (alreadyRunning.length > 0) {
      const list = alreadyRunning.map((p) => `${p.name} (pid ${p.pid})`).join(', ');
      throw new Error(`a stack of ${stateDir} already runs: ${list}; stop it first (npm run down)`);
    }
    fs.mkdirSync(pidDir(stateDir), { recursive: true });
  }
  fs.mkdirSync(logDir, { recursive: true });

  const ports = await resolvePorts(options.ports ?? {}, caller);
  const grpc = byService((s) => caller[GRPC_ADDRESS_VARIABLES[s]] ?? `127.0.0.1:${ports[s].grpc}`);
  const urls: StackUrls = {
    gateway: `http://127.0.0.1:${ports.gateway}`,
    grpc,
    ops: { ...byService((s) => `http://127.0.0.1:${ports[s].ops}`), gateway: `http://127.0.0.1:${ports.gatewayOps}` },
  };
  await assertPortsFree(wanted, ports, caller);

  const plans = new Map<ProcessName, Plan>();
  for (const name of wanted) {
    const addressing: Record<string, string> =
      name === 'gateway'
        ? { PORT: String(ports.gateway), OPS_PORT: String(ports.gatewayOps) }
        : { [GRPC_ADDRESS_VARIABLES[name]]: grpc[name], OPS_PORT: String(ports[name].ops) };
    for (const service of DIALS[name]) addressing[GRPC_ADDRESS_VARIABLES[service]] = grpc[service];
    plans.set(name, {
      script: scripts.get(name)!,
      // Each process names itself in its traces (when tracing is configured: OTEL_EXPORTER_OTLP_ENDPOINT).
      env: {
        ...shared.inherited,
        ...addressing,
        ...(name === 'delivery' ? sendingDefaults({ ...shared.inherited, ...caller }) : {}),
        OTEL_SERVICE_NAME: name,
        ...caller,
        ...shared.fixed,
      },
      readyUrl: `${urls.ops[name]}/readyz`,
      logFile: path.join(logDir, `${name}.log`),
    });
  }

  const running = new Map<ProcessName, Running>();
  let stopping = false;

  const launch = (name: ProcessName): Running => {
    const plan = plans.get(name)!;
    const entry = launchProcess(name, plan, detached);
    running.set(name, entry);
    if (detached && entry.child.pid !== undefined) {
      fs.writeFileSync(pidFile(stateDir, name), `${entry.child.pid}\n`);
    }
    return entry;
  };

  const waitReady = async (name: ProcessName, entry: Running): Promise<void> => {
    const plan = plans.get(name)!;
    const deadline = Date.now() + readyTimeoutMs;
    let last = 'no answer yet';
    for (;;) {
      if (entry.exit) throw new StackStartError(name, plan.logFile, `${describeExit(entry.exit)} before it was ready`);
      if (stopping) throw new Error(`${name}: the stack was stopped while starting`);
      const answer = await httpStatus(plan.readyUrl, 2_000);
      if (answer === 200) return;
      last = typeof answer === 'number' ? `answered ${answer}` : `failed: ${answer}`;
      if (Date.now() >= deadline) {
        throw new StackStartError(
          name,
          plan.logFile,
          `did not become ready within ${readyTimeoutMs / 1000} s: GET ${plan.readyUrl} ${last}`,
        );
      }
      await Promise.race([sleep(200), entry.exited]);
    }
  };

  const stopOne = async (name: ProcessName): Promise<void> => {
    const entry = running.get(name);
    if (!entry) return;
    if (!entry.exit) {
      entry.child.kill('SIGTERM');
      if (!(await exitsWithin(entry, stopTimeoutMs))) {
        entry.child.kill('SIGKILL');
        await entry.exited;
      }
    }
    if (detached) fs.rmSync(pidFile(stateDir, name), { force: true });
  };

  const stopAll = async (): Promise<void> => {
    stopping = true;
    await stopOne('gateway');
    await Promise.all(SERVICE_NAMES.map(stopOne));
    stopping = false;
  };

  try {
    const services = wanted.filter((name): name is ServiceName => name !== 'gateway');
    await Promise.all(services.map((name) => waitReady(name, launch(name))));
    if (wanted.includes('gateway')) await waitReady('gateway', launch('gateway'));
  } catch (error) {
    await stopAll();
    throw error;
  }

  const requireProcess = (name: ProcessName): void => {
    if (!plans.has(name)) throw new Error(`${name} is not part of this stack (${wanted.join(', ')})`);
  };

  return {
    urls,
    ports,
    processes: wanted,
    logDir,
    logFile: (name) => path.join(logDir, `${name}.log`),
    pid: (name) => {
      const entry = running.get(name);
      return entry && !entry.exit ? entry.child.pid : undefined;
    },
    stop: async (name) => {
      if (name === undefined) return stopAll();
      requireProcess(name);
      await stopOne(name);
    },
    kill: async (name, signal = 'SIGKILL') => {
      requireProcess(name);
      const entry = running.get(name);
      if (!entry || entry.exit) return;
      entry.child.kill(signal);
      if (!(await exitsWithin(entry, stopTimeoutMs))) {
        throw new Error(`${name} still runs ${stopTimeoutMs / 1000} s after ${signal}`);
      }
      if (detached) fs.rmSync(pidFile(stateDir, name), { force: true });
    },
    restart: async (name) => {
      requireProcess(name);
      await stopOne(name);
      await waitReady(name, launch(name));
    },
    stopAll,
  };
}

/** A process of a detached stack, found through its PID file. */
export interface DetachedProcess {
  name: ProcessName;
  pid: number;
}

/** The processes of a detached stack that still run (PID file present, process alive and ours). */
export function runningDetached(stateDir: string): DetachedProcess[] {
  const dir = path.resolve(stateDir);
  const found: DetachedProcess[] = [];
  for (const name of PROCESS_NAMES) {
    let pid: number;
    try {
      pid = Number(fs.readFileSync(pidFile(dir, name), 'utf8').trim());
    } catch {
      continue;
    }
    if (Number.isInteger(pid) && pid > 0 && isOurs(pid, dir)) found.push({ name, pid });
  }
  return found;
}

/**
 * Stops a detached stack by its PID files (gateway first), SIGTERM then
 * SIGKILL after stopTimeoutMs; only processes started for this state folder
 * are signalled. Returns what was stopped.
 */
export async function stopDetached(
  stateDir: string,
  options: { stopTimeoutMs?: number; log?: (line: string) => void } = {},
): Promise<DetachedProcess[]> {
  const dir = path.resolve(stateDir);
  const stopTimeoutMs = options.stopTimeoutMs ?? 10_000;
  const running = runningDetached(dir);
  const stopOne = async ({ name, pid }: DetachedProcess): Promise<void> => {
    options.log?.(`stopping ${name} (pid ${pid})`);
    signal(pid, 'SIGTERM');
    if (!(await waitGone(pid, dir, stopTimeoutMs))) {
      options.log?.(`${name} (pid ${pid}) still runs ${stopTimeoutMs / 1000} s after SIGTERM: SIGKILL`);
      signal(pid, 'SIGKILL');
      if (!(await waitGone(pid, dir, 5_000))) throw new Error(`${name} (pid ${pid}) survived SIGKILL`);
    }
  };
  await Promise.all(running.filter((p) => p.name === 'gateway').map(stopOne));
  await Promise.all(running.filter((p) => p.name !== 'gateway').map(stopOne));
  for (const name of PROCESS_NAMES) fs.rmSync(pidFile(dir, name), { force: true });
  return running;
}

function defaultScript(name: ProcessName): string {
  return name === 'gateway'
    ? path.join(REPO_ROOT, 'gateway', 'dist', 'main.js')
    : path.join(REPO_ROOT, 'services', name, 'dist', 'main.js');
}

function pidDir(stateDir: string): string {
  return path.join(stateDir, 'pids');
}

function pidFile(stateDir: string, name: ProcessName): string {
  return path.join(pidDir(stateDir), `${name}.pid`);
}

/** Only variables with a non-empty value count as set, as in EnvReader. */
function setVariables(env: Readonly<Record<string, string | undefined>>): Record<string, string> {
  const result: Record<string, string> = {};
  for (const [key, value] of Object.entries(env)) if (value !== undefined && value.trim() !== '') result[key] = value;
  return result;
}

function byService<T>(value: (service: ServiceName) => T): Record<ServiceName, T> {
  return Object.fromEntries(SERVICE_NAMES.map((service) => [service, value(service)])) as Record<ServiceName, T>;
}

/**
 * What every process gets besides its addresses: this process's environment
 * without addressing variables, CLICKHOUSE_DATABASE=mail unless set, and the
 * stack marker (fixed, it identifies our processes). The servers' addresses
 * must be among them (infraVariables throws otherwise): a stack never falls
 * back to the default ports, where another run's servers may listen.
 */
function sharedEnvironment(caller: Record<string, string>, stateDir: string) {
  const inherited = setVariables(process.env);
  for (const variable of ADDRESSING_VARIABLES) delete inherited[variable];
  const visible = { ...inherited, ...caller };
  infraVariables(visible);
  if (visible.CLICKHOUSE_DATABASE === undefined) inherited.CLICKHOUSE_DATABASE = 'mail';
  return { inherited, fixed: { [STACK_MARKER_VARIABLE]: stateDir } };
}

/**
 * Where a stack's delivery sends and reads recipients unless told (`npm run up` tells it: the local Mailpit
 * and recipient database): nowhere, and its own database as the recipient reader, who may read nothing there.
 * The built-in defaults are `npm run up`'s Mailpit and recipient database, which another stack (a test's) must
 * never reach.
 */
function sendingDefaults(env: Record<string, string>): Record<string, string> {
  const recipients = new URL(env.DATABASE_URL);
  recipients.username = RECIPIENT_READER.user;
  recipients.password = RECIPIENT_READER.password;
  return { SMTP_URL: 'smtp://127.0.0.1:1?tls=off', RECIPIENTS_DATABASE_URL: recipients.toString() };
}

async function resolvePorts(choice: StackPortChoice, caller: Record<string, string>): Promise<StackPorts> {
  const callerPort = (variable: string): number | undefined => {
    const value = caller[variable];
    if (value === undefined) return undefined;
    const port = Number(value.slice(value.lastIndexOf(':') + 1));
    if (!Number.isInteger(port) || port < 1 || port > 65_535) {
      throw new Error(`${variable}="${value}" has no valid port`);
    }
    return port;
  };
  const gateway = callerPort('PORT') ?? choice.gateway;
  const gatewayOps = choice.gatewayOps;
  const known = SERVICE_NAMES.map((s) => ({
    grpc: callerPort(GRPC_ADDRESS_VARIABLES[s]) ?? choice[s]?.grpc,
    ops: choice[s]?.ops,
  }));
  const missing = [gateway, gatewayOps, ...known.flatMap((k) => [k.grpc, k.ops])].filter((p) => p === undefined).length;
  const free = await freePorts(missing);
  const next = (port: number | undefined): number => port ?? free.shift()!;
  const ports = { gateway: next(gateway), gatewayOps: next(gatewayOps) } as StackPorts;
  SERVICE_NAMES.forEach((service, i) => {
    ports[service] = { grpc: next(known[i].grpc), ops: next(known[i].ops) };
  });
  return ports;
}

/** A clear error now instead of an EADDRINUSE deep in some process's log. */
async function assertPortsFree(wanted: readonly ProcessName[], ports: StackPorts, caller: Record<string, string>): Promise<void> {
  const checks: Array<[string, number]> = [];
  for (const name of wanted) {
    if (name === 'gateway') {
      checks.push(['gateway PORT', ports.gateway], ['gateway OPS_PORT', ports.gatewayOps]);
      continue;
    }
    const variable = GRPC_ADDRESS_VARIABLES[name];
    const address = caller[variable];
    if (address === undefined || /^(127\.0\.0\.1|localhost|0\.0\.0\.0|\[::\]):/.test(address)) {
      checks.push([`${name} ${variable}`, ports[name].grpc]);
    }
    checks.push([`${name} OPS_PORT`, ports[name].ops]);
  }
  for (const [what, port] of checks) {
    const inUse = await new Promise<boolean>((resolve) => {
      const server = net.createServer();
      server.once('error', () => resolve(true));
      server.listen(port, '127.0.0.1', () => server.close(() => resolve(false)));
    });
    if (inUse) throw new Error(`${what}: 127.0.0.1:${port} is already in use by another process`);
  }
}

/**
 * In attached mode each child gets SIGTERM when this process dies, however it
 * dies (setpriv --pdeathsig; Linux), and SIGKILL on a normal exit: a test
 * run that crashes leaves no servers behind holding ports.
 */
const SETPRIV = ['/usr/bin/setpriv', '/bin/setpriv'].find((candidate) => fs.existsSync(candidate));
const attachedChildren = new Set<ChildProcess>();
let exitHookInstalled = false;

function launchProcess(name: ProcessName, plan: Plan, detached: boolean): Running {
  const log = fs.openSync(plan.logFile, 'a');
  fs.writeSync(log, `--- ${new Date().toISOString()} launcher: starting ${name} (${plan.script})\n`);
  const [command, args] =
    detached || !SETPRIV ? [process.execPath, [plan.script]] : [SETPRIV, ['--pdeathsig', 'TERM', '--', process.execPath, plan.script]];
  let child: ChildProcess;
  try {
    child = spawn(command, args, { cwd: REPO_ROOT, env: plan.env, detached, stdio: ['ignore', log, log] });
  } finally {
    fs.closeSync(log);
  }
  const entry: Running = { child, exited: undefined as unknown as Promise<Exit> };
  entry.exited = new Promise<Exit>((resolve) => {
    const done = (exit: Exit): void => {
      if (entry.exit) return;
      entry.exit = exit;
      attachedChildren.delete(child);
      resolve(exit);
    };
    child.once('exit', (code, signal) => done({ code, signal }));
    child.once('error', (error) => done({ code: null, signal: null, error }));
  });
  if (detached) {
    child.unref();
  } else {
    attachedChildren.add(child);
    if (!exitHookInstalled) {
      exitHookInstalled = true;
      process.once('exit', () => attachedChildren.forEach((c) => c.kill('SIGKILL')));
    }
  }
  return entry;
}

/** True once the process has exited, false if it still runs after timeoutMs. */
async function exitsWithin(entry: Running, timeoutMs: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), timeoutMs);
  });
  try {
    return await Promise.race([entry.exited.then(() => true), timedOut]);
  } finally {
    clearTimeout(timer);
  }
}

function describeExit(exit: Exit): string {
  if (exit.error) return `could not be started (${exit.error.message})`;
  return exit.signal ? `was killed by ${exit.signal}` : `exited with code ${exit.code}`;
}

/** Status code of a GET (no connection reuse, so nothing lingers), or why it failed. */
function httpStatus(url: string, timeoutMs: number): Promise<number | string> {
  return new Promise((resolve) => {
    const request = http.get(url, { agent: false, timeout: timeoutMs }, (response) => {
      response.resume();
      resolve(response.statusCode ?? 0);
    });
    request.on('timeout', () => request.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    request.on('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
  });
}

function logTail(file: string, lines = 40): string {
  try {
    const size = fs.statSync(file).size;
    const length = Math.min(size, 64 * 1024);
    const buffer = Buffer.alloc(length);
    const fd = fs.openSync(file, 'r');
    try {
      fs.readSync(fd, buffer, 0, length, size - length);
    } finally {
      fs.closeSync(fd);
    }
    return buffer.toString('utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch (error) {
    return `(cannot read the log: ${(error as Error).message})`;
  }
}

/** Alive (not a zombie) and started for this state folder (its environment carries the marker). */
function isOurs(pid: number, stateDir: string): boolean {
  try {
    const state = /^State:\s*(\S)/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    if (state === undefined || state === 'Z') return false;
    const environment = fs.readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
    return environment.includes(`${STACK_MARKER_VARIABLE}=${stateDir}`);
  } catch {
    return false;
  }
}

async function waitGone(pid: number, stateDir: string, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (isOurs(pid, stateDir)) {
    if (Date.now() >= deadline) return false;
    await sleep(100);
  }
  return true;
}

function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(pid, name);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
