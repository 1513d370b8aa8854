import fs from 'node:fs';
import path from 'node:path';
import { freePorts, lendInstalledServers, runPrivateInfra, sharedStateDir, uniqueSuffix } from '@mail/local';

/**
 * A private PostgreSQL, Kafka and ClickHouse for one fault test file: started
 * with deploy/local/infra.sh on free ports and a state folder of their own
 * under the shared one (.state/faults-*), so crashing them disturbs no other
 * test. What infra.sh installs once comes from the shared state folder
 * (lendInstalledServers).
 */
export type ServerName = 'postgres' | 'kafka' | 'clickhouse';

export interface PrivateServers {
  readonly stateDir: string;
  /** What the stack's processes need to reach these servers. */
  readonly env: { DATABASE_URL: string; KAFKA_BROKERS: string; CLICKHOUSE_URL: string };
  /** SIGKILL of the server and every process it started, as in a crash; resolves once they are gone. */
  crash(server: ServerName): Promise<void>;
  /** SIGSTOP of the server's processes: it stalls (a long GC pause, a hung disk) with its connections open. */
  pause(server: ServerName): void;
  /** SIGCONT after pause. */
  resume(server: ServerName): void;
  /** `infra.sh up <server>`: starts it again, resolves once it answers. */
  start(server: ServerName): Promise<void>;
  /** Stops everything and removes the state folder (kept, with the servers' logs, when keepFiles). */
  close(options?: { keepFiles?: boolean }): Promise<void>;
}

const SERVERS: readonly ServerName[] = ['postgres', 'kafka', 'clickhouse'];

export async function startPrivateServers(label: string): Promise<PrivateServers> {
  const stateDir = path.join(sharedStateDir(), `${label}-${uniqueSuffix()}`);
  const [pg, kafka, controller, clickhouseHttp, clickhouseTcp] = await freePorts(5);
  const infraEnv: NodeJS.ProcessEnv = {
    ...process.env,
    STATE_DIR: stateDir,
    PG_PORT: String(pg),
    KAFKA_PORT: String(kafka),
    KAFKA_CONTROLLER_PORT: String(controller),
    CLICKHOUSE_HTTP_PORT: String(clickhouseHttp),
    CLICKHOUSE_TCP_PORT: String(clickhouseTcp),
    KAFKA_HEAP: '-Xmx256m',
  };
  const infra = (...args: string[]): Promise<void> => runPrivateInfra(infraEnv, ...args);

  lendInstalledServers(stateDir);

  const close = async ({ keepFiles = false } = {}): Promise<void> => {
    await infra('down').catch(() => undefined);
    if (!keepFiles) fs.rmSync(stateDir, { recursive: true, force: true });
  };
  try {
    await infra('up', ...SERVERS);
  } catch (error) {
    await close();
    throw error;
  }

  const mainPid = (server: ServerName): number => {
    const file = {
      postgres: path.join(stateDir, 'postgres', 'data', 'postmaster.pid'),
      kafka: path.join(stateDir, 'kafka', 'kafka.pid'),
      clickhouse: path.join(stateDir, 'clickhouse', 'clickhouse.pid'),
    }[server];
    const pid = Number(fs.readFileSync(file, 'utf8').split('\n')[0].trim());
    // The server's command line names a path in our state folder: never signal anything else.
    if (!Number.isInteger(pid) || pid <= 0 || !commandLine(pid).includes(stateDir)) {
      throw new Error(`${server}: pid ${pid} from ${file} is not our running server`);
    }
    return pid;
  };

  const resume = (server: ServerName): void => {
    const pid = mainPid(server);
    for (const member of [pid, ...descendants(pid)]) signal(member, 'SIGCONT');
  };

  return {
    stateDir,
    env: {
      DATABASE_URL: `postgres://mail:mail@127.0.0.1:${pg}/mail`,
      KAFKA_BROKERS: `127.0.0.1:${kafka}`,
      CLICKHOUSE_URL: `http://127.0.0.1:${clickhouseHttp}`,
    },
    crash: async (server) => {
      const pid = mainPid(server);
      // The whole tree at once (postgres's backends too), parent first so it restarts nothing.
      const tree = [pid, ...descendants(pid)];
      for (const member of tree) signal(member, 'SIGKILL');
      const deadline = Date.now() + 10_000;
      while (tree.some(alive)) {
        if (Date.now() > deadline) throw new Error(`${server}: processes ${tree.filter(alive).join(', ')} survived SIGKILL`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    },
    pause: (server) => {
      const pid = mainPid(server);
      for (const member of [pid, ...descendants(pid)]) signal(member, 'SIGSTOP');
    },
    resume,
    start: (server) => infra('up', server),
    close: async (options) => {
      // A paused server would ignore infra.sh's SIGTERM.
      for (const server of SERVERS) {
        try {
          resume(server);
        } catch {
          // Not running.
        }
      }
      await close(options);
    },
  };
}

function commandLine(pid: number): string {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
  } catch {
    return '';
  }
}

function descendants(pid: number): number[] {
  const children: number[] = [];
  let tasks: string[] = [];
  try {
    tasks = fs.readdirSync(`/proc/${pid}/task`);
  } catch {
    return children;
  }
  for (const task of tasks) {
    try {
      for (const child of fs.readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8').trim().split(/\s+/)) {
        if (child) children.push(Number(child), ...descendants(Number(child)));
      }
    } catch {
      // The task ended meanwhile.
    }
  }
  return children;
}

/** Running and not a zombie: a SIGKILLed server may wait a moment for PID 1 to reap it. */
function alive(pid: number): boolean {
  try {
    return !/^State:\s*Z/m.test(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  } catch {
    return false;
  }
}

function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(pid, name);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
  }
}
