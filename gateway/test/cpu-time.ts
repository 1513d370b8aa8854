import fs from 'node:fs';

/**
 * The CPU time (user and system, in ms) a process has used so far. For the
 * "and quickly" checks: a loaded host stretches wall-clock time many times
 * over, but hardly the CPU time the work itself takes.
 */
export function cpuMs(pid: number = process.pid): number {
  if (pid === process.pid) {
    const { user, system } = process.cpuUsage();
    return (user + system) / 1000;
  }
  // utime and stime, fields 14 and 15 of proc(5), in clock ticks of 10 ms; the fields are counted from the state (field 3).
  const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}
