import { UnavailableError } from '@mail/common';

/** How the ClickHouse reads of one analytics process are shared among workspaces. */
export interface ReadLimits {
  /**
   * Reads one workspace runs at once in its turn (ANALYTICS_CLICKHOUSE_READS): one call's reads; a
   * workspace running several calls runs its share of them.
   */
  slots: number;
  /** How long, in all, one call's reads may wait for their turn (ANALYTICS_READ_WAIT_MS); past it the call is UNAVAILABLE. */
  waitMs: number;
  /** How long a turn holds the next workspace back at most (ANALYTICS_READ_TURN_MS): past it, the next turn begins beside it. */
  turnMs: number;
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

/** A stretch of time in which one workspace's reads may start. */
interface Turn {
  readonly workspaceId: string;
  /** Reads started in the turn, and those of them still running. */
  started: number;
  running: number;
  /** When another workspace first waited during the turn. */
  heldSince?: number;
}

/**
 * Admission of ClickHouse reads, fair across workspaces: one workspace
 * running all the reads it is allowed cannot hold back another's.
 *
 * ClickHouse shares its cores among whatever runs, and a better `priority`
 * pauses a query only while it reads parts, not while it aggregates. So what
 * a workspace's call waits for, once it comes, is the other workspaces' work
 * already running on the server, and that is what the turns keep small:
 *
 * - Workspaces take turns: while one workspace's turn lasts, the reads of
 *   the others wait. The next turn goes to the waiting workspace served least
 *   recently (round-robin) once the reads of the turn before are done, or once
 *   that turn has held it back for `turnMs` (a long read never holds the
 *   others back longer: past it, the next turn's reads run beside it).
 * - In its turn a workspace runs at most its share of reads at once:
 *   `slots` ÷ its running calls, at least a third of `slots`. A workspace
 *   running one call runs all its reads at once and is answered as fast as
 *   when alone; a workspace running many keeps a few reads on the server,
 *   which is what the next workspace waits for. Once another workspace
 *   waits, the turn starts no more reads than its share in all.
 * - Within a turn, the reads of the workspace's oldest call go first, then
 *   in the order they came. Each read runs at ClickHouse priority = its call's
 *   rank among its workspace's running calls, oldest first (ClickHouse
 *   pauses a query while queries of a better priority run).
 * - A call's reads wait `waitMs` at most from the call's start: past it the
 *   read fails with UnavailableError (gRPC UNAVAILABLE, HTTP 503 with
 *   Retry-After), never a hang.
 */
export class FairReads {
  /** Each workspace's running calls, oldest first. */
  private readonly calls = new Map<string, ReadCall[]>();
  /** Waiting reads per workspace, in the order they came. */
  private readonly waiting = new Map<string, Waiter[]>();
  /** When each workspace with running calls last began a turn (a count of turns). */
  private readonly lastTurn = new Map<string, number>();
  private turnsBegun = 0;
  /** The turn reads may start in. */
  private current: Turn | undefined;
  /** Reads running, of every turn. */
  private runningReads = 0;
  /** Wakes the queue when the current turn has held the next workspace back for `turnMs`. */
  private turnTimer: NodeJS.Timeout | undefined;

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

  /**
   * Reads the workspace runs at once in its turn: `slots` for one call, fewer for more calls, but never
   * fewer than a third of `slots`. Fewer would leave the server idle between a busy workspace's reads, more
   * is what the next workspace waits for (bench/README.md, "Fairness across workspaces").
   */
  private shareOf(workspaceId: string): number {
    const calls = this.calls.get(workspaceId)?.length ?? 1;
    return Math.max(Math.ceil(this.limits.slots / calls), Math.ceil(this.limits.slots / 3));
  }

  private end(call: ReadCall): void {
    const calls = this.calls.get(call.workspaceId);
    const index = calls?.indexOf(call) ?? -1;
    if (!calls || index < 0) return;
    calls.splice(index, 1);
    if (calls.length === 0) {
      this.calls.delete(call.workspaceId);
      this.lastTurn.delete(call.workspaceId);
    }
    const error = new UnavailableError('The call ended before its read started');
    for (const waiter of this.waiting.get(call.workspaceId)?.filter((candidate) => candidate.call === call) ?? []) {
      this.remove(waiter);
      waiter.refuse(error);
    }
    // The workspace's share grew, and its younger calls moved up a rank.
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
        // The turn may no longer hold anyone back.
        this.admitWaiting();
      };
      const wait = deadline - Date.now();
      if (wait <= 0) refuse();
      else timer = setTimeout(refuse, wait);
    });
  }

  /** Starts the waiting reads that may run, and begins the turns that are due. */
  private admitWaiting(): void {
    for (;;) {
      const turn = this.current;
      const next = this.nextWorkspace();
      if (turn) {
        // Held while another workspace waits; a wait that ended (refused, its call gone) holds nobody back.
        if (next === undefined) turn.heldSince = undefined;
        else turn.heldSince ??= Date.now();
        const waiter = this.firstWaiting(turn.workspaceId);
        if (waiter && this.mayStart(turn)) {
          this.start(turn, waiter);
          continue;
        }
      }
      if (next === undefined) return;
      if (turn && turn.running > 0 && !this.heldTooLong(turn)) {
        this.wakeWhenHeldTooLong(turn);
        return;
      }
      this.beginTurn(next);
    }
  }

  /** The waiting workspace, other than the current turn's, that began a turn least recently. */
  private nextWorkspace(): string | undefined {
    let next: string | undefined;
    for (const workspaceId of this.waiting.keys()) {
      if (workspaceId === this.current?.workspaceId) continue;
      if (next === undefined || (this.lastTurn.get(workspaceId) ?? -1) < (this.lastTurn.get(next) ?? -1)) next = workspaceId;
    }
    return next;
  }

  /** The workspace's waiting read of its oldest call, the first to come among them. */
  private firstWaiting(workspaceId: string): Waiter | undefined {
    let first: Waiter | undefined;
    for (const waiter of this.waiting.get(workspaceId) ?? []) {
      if (!first || this.priorityOf(waiter.call) < this.priorityOf(first.call)) first = waiter;
    }
    return first;
  }

  /**
   * The turn may start a read while it runs fewer than its workspace's share,
   * and, once another workspace waits, while it has started fewer than that
   * share in all; never more than twice `slots` reads run at once, turns
   * together (the client's connections).
   */
  private mayStart(turn: Turn): boolean {
    const share = this.shareOf(turn.workspaceId);
    if (this.runningReads >= 2 * this.limits.slots || turn.running >= share) return false;
    return turn.heldSince === undefined || turn.started < share;
  }

  private heldTooLong(turn: Turn): boolean {
    return turn.heldSince !== undefined && Date.now() - turn.heldSince >= this.limits.turnMs;
  }

  private wakeWhenHeldTooLong(turn: Turn): void {
    if (this.turnTimer) return;
    const wait = Math.max(0, (turn.heldSince ?? Date.now()) + this.limits.turnMs - Date.now());
    this.turnTimer = setTimeout(() => {
      this.turnTimer = undefined;
      this.admitWaiting();
    }, wait);
    this.turnTimer.unref();
  }

  private beginTurn(workspaceId: string): void {
    clearTimeout(this.turnTimer);
    this.turnTimer = undefined;
    this.current = { workspaceId, started: 0, running: 0 };
    this.lastTurn.set(workspaceId, this.turnsBegun++);
  }

  private start(turn: Turn, waiter: Waiter): void {
    this.remove(waiter);
    turn.started++;
    turn.running++;
    this.runningReads++;
    let released = false;
    waiter.admit({
      priority: this.priorityOf(waiter.call),
      release: () => {
        if (released) return;
        released = true;
        turn.running--;
        this.runningReads--;
        this.admitWaiting();
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
