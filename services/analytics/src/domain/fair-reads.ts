import { UnavailableError } from '@mail/common';

/** How the ClickHouse reads of one analytics process are shared among workspaces. */
export interface ReadLimits {
  /**
   * Reads that run at once at each priority and better (ANALYTICS_CLICKHOUSE_READS);
   * twice this in all, since ClickHouse pauses the lower-priority ones while the others run.
   */
  slots: number;
  /** How long, in all, one call's reads may wait for their turn (ANALYTICS_READ_WAIT_MS); past it the call is UNAVAILABLE. */
  waitMs: number;
}

/** A read's turn: the ClickHouse `priority` it runs at, and the release of its place once it is done. */
export interface Admission {
  priority: number;
  release: () => void;
}

/** One gRPC call of one workspace, whose reads take turns with everyone else's. */
export interface ReadCall {
  readonly workspaceId: string;
  /** Resolves in the read's turn. */
  admit(): Promise<Admission>;
  /** The call is over: its reads still waiting are dropped. */
  end(): void;
}

interface Waiter {
  call: ReadCall;
  admit(admission: Admission): void;
  refuse(error: Error): void;
}

interface Candidate {
  waiter: Waiter;
  priority: number;
}

/**
 * Admission of ClickHouse reads, fair across workspaces: one workspace
 * running all the reads it is allowed cannot hold back another's.
 *
 * - A read's priority is its call's rank among its workspace's running
 *   calls, oldest first, when the read starts: each workspace's oldest call
 *   reads at ClickHouse priority 1, its next at 2, and so on. ClickHouse
 *   pauses a query while queries of a better priority run, so workspaces
 *   share the server call for call: one that runs many calls at once gets
 *   one call's share, as one that runs a single call does, and the rest of
 *   its calls wait their turn.
 * - At most `slots` reads of a priority and better run at once, and twice
 *   that in all: a read never waits for reads it outranks (ClickHouse has
 *   paused them), and a busy workspace's reads cannot fill every place.
 *   Past `slots`, a workspace still gets its share of them (mayRun).
 * - The next read is one of the best priority; among workspaces with such a
 *   read waiting, the one served least recently (round-robin), and within a
 *   workspace the first to come.
 * - A call's reads wait `waitMs` at most from the call's start: past it the
 *   read fails with UnavailableError (gRPC UNAVAILABLE, HTTP 503 with
 *   Retry-After), never a hang.
 */
export class FairReads {
  /** Each workspace's running calls, oldest first. */
  private readonly calls = new Map<string, ReadCall[]>();
  private readonly running = new Set<{ workspaceId: string; priority: number }>();
  /** Waiting reads per workspace, the workspaces in round-robin order: the least recently served first. */
  private readonly waiting = new Map<string, Waiter[]>();

  constructor(private readonly limits: ReadLimits) {}

  /** Reads waiting for their turn, of every workspace. */
  get waitingReads(): number {
    let count = 0;
    for (const queue of this.waiting.values()) count += queue.length;
    return count;
  }

  startCall(workspaceId: string): ReadCall {
    const deadline = Date.now() + this.limits.waitMs;
    const call: ReadCall = {
      workspaceId,
      admit: () => this.admit(call, deadline),
      end: () => this.end(call),
    };
    const calls = this.calls.get(workspaceId);
    if (calls) calls.push(call);
    else this.calls.set(workspaceId, [call]);
    return call;
  }

  /** The call's rank among its workspace's running calls, oldest first: the priority of its reads now. */
  private priorityOf(call: ReadCall): number {
    return (this.calls.get(call.workspaceId)?.indexOf(call) ?? 0) + 1;
  }

  private end(call: ReadCall): void {
    const calls = this.calls.get(call.workspaceId);
    const index = calls?.indexOf(call) ?? -1;
    if (!calls || index < 0) return;
    calls.splice(index, 1);
    if (calls.length === 0) this.calls.delete(call.workspaceId);
    const error = new UnavailableError('The call ended before its read started');
    for (const waiter of this.waiting.get(call.workspaceId)?.filter((candidate) => candidate.call === call) ?? []) {
      this.remove(waiter);
      waiter.refuse(error);
    }
    // The workspace's younger calls moved up a rank.
    this.admitWaiting();
  }

  private admit(call: ReadCall, deadline: number): Promise<Admission> {
    return new Promise((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const waiter: Waiter = {
        call,
        admit: (admission) => {
          clearTimeout(timer);
          resolve(admission);
        },
        refuse: (error) => {
          clearTimeout(timer);
          reject(error);
        },
      };
      const queue = this.waiting.get(call.workspaceId);
      if (queue) queue.push(waiter);
      else this.waiting.set(call.workspaceId, [waiter]);
      this.admitWaiting();
      if (!this.waiting.get(call.workspaceId)?.includes(waiter)) return;
      const refuse = () => {
        this.remove(waiter);
        waiter.refuse(new UnavailableError('Analytics is busy: the read waited too long for its turn, retry later'));
      };
      const wait = deadline - Date.now();
      if (wait <= 0) refuse();
      else timer = setTimeout(refuse, wait);
    });
  }

  /** Starts waiting reads, in the order they get places, while they may run. */
  private admitWaiting(): void {
    for (;;) {
      const candidates = this.candidates();
      const next = candidates.find((candidate) => this.mayRun(candidate, candidates));
      if (!next) return;
      this.remove(next.waiter);
      // The workspace served goes to the back of the round.
      const { workspaceId } = next.waiter.call;
      const queue = this.waiting.get(workspaceId);
      if (queue) {
        this.waiting.delete(workspaceId);
        this.waiting.set(workspaceId, queue);
      }
      this.start(workspaceId, next.priority, next.waiter);
    }
  }

  /** The waiting reads in the order they get places: the best priority, then the least recently served workspace, then the first to come. */
  private candidates(): Candidate[] {
    const candidates: Candidate[] = [];
    for (const queue of this.waiting.values()) {
      for (const waiter of queue) candidates.push({ waiter, priority: this.priorityOf(waiter.call) });
    }
    // Stable: workspaces stay in round-robin order, and each one's reads in the order they came.
    return candidates.sort((a, b) => a.priority - b.priority);
  }

  /**
   * Within the places in all, a read may start while fewer than `slots` reads
   * of its priority and better run, or while its workspace runs fewer of
   * them than its share of `slots` among the workspaces that run or wait
   * for reads of that priority and better: a workspace cannot keep another
   * from its share by filling the places first.
   */
  private mayRun({ waiter, priority }: Candidate, candidates: Candidate[]): boolean {
    if (this.running.size >= 2 * this.limits.slots) return false;
    const atOrAbove = [...this.running].filter((read) => read.priority <= priority);
    if (atOrAbove.length < this.limits.slots) return true;
    const sharing = new Set([
      ...atOrAbove.map((read) => read.workspaceId),
      ...candidates.filter((candidate) => candidate.priority <= priority).map((candidate) => candidate.waiter.call.workspaceId),
    ]);
    const own = atOrAbove.filter((read) => read.workspaceId === waiter.call.workspaceId).length;
    return own < Math.ceil(this.limits.slots / sharing.size);
  }

  private start(workspaceId: string, priority: number, waiter: Waiter): void {
    const read = { workspaceId, priority };
    this.running.add(read);
    waiter.admit({
      priority,
      release: () => {
        if (this.running.delete(read)) this.admitWaiting();
      },
    });
  }

  private remove(waiter: Waiter): void {
    const queue = this.waiting.get(waiter.call.workspaceId);
    if (!queue) return;
    const index = queue.indexOf(waiter);
    if (index >= 0) queue.splice(index, 1);
    if (queue.length === 0) this.waiting.delete(waiter.call.workspaceId);
  }
}
