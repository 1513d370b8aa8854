import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';

/**
 * One server of a local cluster that deploy/local/infra.sh runs (the
 * components kafka-cluster and clickhouse-cluster), for fault tests: kill it
 * as a crash would, start it again. Its PID file is
 * $STATE_DIR/<component>/<name>/<kind>.pid.
 */
export interface ClusterNode {
  readonly name: string;
  /** SIGKILL from the PID file; resolves once the process is gone (a no-op when it does not run). */
  kill(): Promise<void>;
  /** `infra.sh up <component>`: starts whatever of the cluster does not run; resolves once it answers. */
  restart(): Promise<void>;
  /** The running process, or undefined. */
  pid(): number | undefined;
}

const REPO_ROOT = path.resolve(__dirname, '..', '..', '..');
const INFRA = path.join(REPO_ROOT, 'deploy', 'local', 'infra.sh');
const COMPONENTS = { kafka: 'kafka-cluster', clickhouse: 'clickhouse-cluster' } as const;

export function clusterNode(kind: 'kafka' | 'clickhouse', name: string): ClusterNode {
  const stateDir = path.resolve(process.env.STATE_DIR?.trim() || path.join(REPO_ROOT, '.state'));
  const home = path.join(stateDir, COMPONENTS[kind], name);
  const pidFile = path.join(home, `${kind}.pid`);
  const pid = (): number | undefined => {
    let value: number;
    try {
      value = Number(fs.readFileSync(pidFile, 'utf8').trim());
    } catch {
      return undefined;
    }
    // Its command line names its folder: a recycled PID is never taken for it.
    return Number.isInteger(value) && value > 0 && alive(value) && commandLine(value).includes(home) ? value : undefined;
  };
  return {
    name,
    pid,
    kill: async () => {
      const running = pid();
      if (running === undefined) return;
      process.kill(running, 'SIGKILL');
      const deadline = Date.now() + 10_000;
      while (alive(running)) {
        if (Date.now() > deadline) throw new Error(`${kind} ${name} (pid ${running}) survived SIGKILL for 10 s`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    },
    restart: async () => {
      await promisify(execFile)('bash', [INFRA, 'up', COMPONENTS[kind]], {
        env: { ...process.env, STATE_DIR: stateDir },
        timeout: 180_000,
        maxBuffer: 16 * 1024 * 1024,
      });
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

/** Running and not a zombie: a SIGKILLed server may wait a moment for PID 1 to reap it. */
function alive(pid: number): boolean {
  try {
    return !/^State:\s*Z/m.test(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  } catch {
    return false;
  }
}
