import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * One server of the local clusters that deploy/local/infra.sh runs (the
 * components kafka-cluster: k1..k3, and clickhouse-cluster: ch1..ch4), for
 * fault tests: kill it as a crash would, and bring it back.
 */
export interface ClusterNode {
  readonly kind: ClusterKind;
  readonly name: string;
  /** The PID of the running server, or undefined when it does not run. */
  pid(): number | undefined;
  /** SIGKILL; resolves once the process is gone. */
  kill(): Promise<void>;
  /**
   * `infra.sh up <component>` with the caller's STATE_DIR: starts whatever
   * node of the component does not run and resolves once every node answers.
   */
  restart(): Promise<void>;
}

export type ClusterKind = 'kafka' | 'clickhouse';

const COMPONENTS: Record<ClusterKind, { component: string; pidFile: string; names: readonly string[] }> = {
  kafka: { component: 'kafka-cluster', pidFile: 'kafka.pid', names: ['k1', 'k2', 'k3'] },
  clickhouse: { component: 'clickhouse-cluster', pidFile: 'clickhouse.pid', names: ['ch1', 'ch2', 'ch3', 'ch4'] },
};

const INFRA_SH = path.resolve(__dirname, '..', '..', 'infra.sh');
const KILL_TIMEOUT_MS = 10_000;
const RESTART_TIMEOUT_MS = 180_000;

/** The state folder infra.sh uses for the caller: STATE_DIR, or the repository's .state. */
function stateDir(): string {
  return path.resolve(process.env.STATE_DIR?.trim() || path.join(INFRA_SH, '..', '..', '..', '.state'));
}

/** The state letter of PID (R, S, Z, ...), or undefined when there is no such process. */
function processState(pid: number): string | undefined {
  try {
    return /^State:\s*(\S)/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  } catch {
    return undefined;
  }
}

/** True when PID runs (a zombie does not) and its command line names a path inside HOME. */
function isNodeProcess(pid: number, home: string): boolean {
  const state = processState(pid);
  if (state === undefined || state === 'Z') return false;
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(`${home}/`);
  } catch {
    return false;
  }
}

export function clusterNode(kind: ClusterKind, name: string): ClusterNode {
  const { component, pidFile, names } = COMPONENTS[kind];
  if (!names.includes(name)) {
    throw new Error(`no ${kind} cluster node '${name}' (expected one of ${names.join(', ')})`);
  }
  const home = path.join(stateDir(), component, name);

  const pid = (): number | undefined => {
    let text: string;
    try {
      text = fs.readFileSync(path.join(home, pidFile), 'utf8').trim();
    } catch {
      return undefined;
    }
    const value = Number(text);
    // A PID file of a crashed server may name a PID since reused by another process.
    return Number.isInteger(value) && value > 0 && isNodeProcess(value, home) ? value : undefined;
  };

  const kill = async (): Promise<void> => {
    const running = pid();
    if (running === undefined) throw new Error(`${component} ${name} does not run (${home})`);
    process.kill(running, 'SIGKILL');
    const deadline = Date.now() + KILL_TIMEOUT_MS;
    while (isNodeProcess(running, home)) {
      if (Date.now() > deadline) throw new Error(`${component} ${name} (pid ${running}) survived SIGKILL`);
      await sleep(50);
    }
  };

  const restart = (): Promise<void> =>
    new Promise((resolve, reject) => {
      execFile(
        'bash',
        [INFRA_SH, 'up', component],
        { env: { ...process.env, STATE_DIR: stateDir() }, timeout: RESTART_TIMEOUT_MS },
        (error, _stdout, stderr) => {
          if (error) reject(new Error(`infra.sh up ${component} failed: ${error.message}\n${stderr}`));
          else resolve();
        },
      );
    });

  return { kind, name, pid, kill, restart };
}
