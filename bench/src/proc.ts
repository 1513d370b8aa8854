/**
 * What Linux says about a process: CPU time and resident memory, from /proc.
 * Every reader answers 0 or undefined for a process that is gone.
 */
import fs from 'node:fs';
import path from 'node:path';

/** Linux reports process CPU time in ticks of 1/100 s. */
const MS_PER_TICK = 10;

/** Fields of /proc/<pid>/stat after the command name (which may contain spaces). */
function statFields(pid: number): string[] | undefined {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return undefined;
  }
}

/** User + system CPU milliseconds a process has used. */
export function cpuMs(pid: number | undefined): number {
  const fields = pid === undefined ? undefined : statFields(pid);
  // utime and stime are fields 14 and 15 of stat, 12th and 13th after the name.
  return fields ? (Number(fields[11]) + Number(fields[12])) * MS_PER_TICK : 0;
}

/**
 * User + system CPU milliseconds of a process and all it started: its own, its
 * exited children's (the kernel adds a child's time, with that of the children
 * it waited for, to the parent's cutime and cstime once the parent waits for it),
 * and every live descendant's. So backends that come and go during a
 * measurement (Postgres forks one per connection) are counted too.
 */
export function processTreeCpuMs(root: number | undefined): number {
  if (root === undefined) return 0;
  const stats = new Map<number, string[]>();
  const children = new Map<number, number[]>();
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    const fields = statFields(pid);
    if (!fields) continue;
    stats.set(pid, fields);
    const parent = Number(fields[1]);
    children.set(parent, [...(children.get(parent) ?? []), pid]);
  }
  let ticks = 0;
  for (const queue = [root]; queue.length > 0;) {
    const pid = queue.pop()!;
    const fields = stats.get(pid);
    if (!fields) continue;
    // utime, stime, cutime, cstime: fields 14 to 17 of stat.
    ticks += Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14]);
    queue.push(...(children.get(pid) ?? []));
  }
  return ticks * MS_PER_TICK;
}

/** A kB line of /proc/<pid>/status (VmRSS, VmHWM, RssAnon), in MB. */
export function statusMb(pid: number | undefined, field: 'VmRSS' | 'VmHWM' | 'RssAnon'): number | undefined {
  if (pid === undefined) return undefined;
  try {
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Number(match[1]) / 1024 : undefined;
  } catch {
    return undefined;
  }
}

/** PIDs whose parent is `parent` (one level). */
export function childrenOf(parent: number): number[] {
  const children: number[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const fields = statFields(Number(entry));
    if (fields && Number(fields[1]) === parent) children.push(Number(entry));
  }
  return children;
}

/** The servers of deploy/local/infra.sh, through their PID files under STATE_DIR (default <repo>/.state). */
export function infraServerPids(): { postgres?: number; kafka?: number; clickhouse?: number } {
  const stateDir = process.env.STATE_DIR ?? path.resolve(__dirname, '..', '..', '.state');
  const firstLine = (file: string): number | undefined => {
    try {
      const pid = Number(fs.readFileSync(path.join(stateDir, file), 'utf8').split('\n')[0].trim());
      return Number.isInteger(pid) && pid > 0 && fs.existsSync(`/proc/${pid}`) ? pid : undefined;
    } catch {
      return undefined;
    }
  };
  return {
    postgres: firstLine('postgres/data/postmaster.pid'),
    kafka: firstLine('kafka/kafka.pid'),
    clickhouse: firstLine('clickhouse/clickhouse.pid'),
  };
}

/** Private resident memory of the postmaster and all its backends, MB (shared buffers counted once: not at all). */
export function postgresPrivateMb(postmaster: number | undefined): number | undefined {
  if (postmaster === undefined) return undefined;
  return [postmaster, ...childrenOf(postmaster)].reduce((sum, pid) => sum + (statusMb(pid, 'RssAnon') ?? 0), 0);
}

/** Idle and total CPU ticks of the whole machine so far (the "cpu" line of /proc/stat). */
function machineTicks(): { idle: number; total: number } {
  const fields = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  // idle and iowait are the 4th and 5th numbers.
  return { idle: fields[3] + fields[4], total: fields.reduce((sum, ticks) => sum + ticks, 0) };
}

/** The share of the machine's CPU time that was idle over the next `ms`. */
async function idleShare(ms: number): Promise<number> {
  const before = machineTicks();
  await new Promise((resolve) => setTimeout(resolve, ms));
  const after = machineTicks();
  return (after.idle - before.idle) / Math.max(1, after.total - before.total);
}

/**
 * Waits, up to `maxMs`, for a window of `windowMs` in which the machine's CPU
 * is mostly (85 %) idle; `onBusy` hears the busy share of each window that was not.
 */
export async function waitUntilIdle(windowMs: number, maxMs: number, onBusy: (busyShare: number) => void = () => undefined): Promise<void> {
  const deadline = Date.now() + maxMs;
  for (let idle = await idleShare(windowMs); idle < 0.85 && Date.now() < deadline; idle = await idleShare(windowMs)) onBusy(1 - idle);
}
