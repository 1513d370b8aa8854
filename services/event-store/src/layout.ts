import { identifier, raw, sql, str, type SqlFragment } from './sql';

/**
 * How the event store's tables lie on the servers; the one place that names
 * them (docs/cluster.md).
 *
 * One server (no cluster): each table under its own name, a plain MergeTree
 * of its family.
 *
 * A cluster (CLICKHOUSE_CLUSTER, a cluster of the servers' remote_servers):
 * - a table of per-workspace rows is stored on each server as `<name>_local`,
 *   a Replicated* engine of the same family whose replicas are the servers of
 *   one shard (ZooKeeper path by `{shard}` macro, database and table), and is
 *   read and written as `<name>`, a Distributed table over them sharded by the
 *   workspace: one workspace's rows all live on one shard, so a FINAL, a
 *   GROUP BY or a dedup per event that the shard answers alone is exact.
 *   unmatched_events, which names no workspace, is sharded by its provider
 *   event id the same way (its copies of one event meet on one shard);
 * - a small table that is not per workspace and that queries of the sharded
 *   tables look up (closed workspaces, re-matched event ids, migrations) is
 *   replicated to every server of the cluster under its own name: whichever
 *   shard runs such a query finds all of it locally;
 * - materialized views read and write the local tables: a view fires on the
 *   replica that receives an insert, and replication brings its rows to the
 *   other replicas of the shard.
 * So readers name today's tables in either mode.
 */
export type Placement = 'workspace' | 'provider-event' | 'everywhere';

/** Each table's placement in a cluster; a name not listed (a view, the v1 table) is the same on every server. */
const PLACEMENTS: Record<string, Placement> = {
  events: 'workspace',
  events_by_address: 'workspace',
  event_rollup_daily: 'workspace',
  link_rollup_daily: 'workspace',
  unsettled_days: 'workspace',
  suppression_signals: 'workspace',
  suppression_lifts: 'workspace',
  suppression_state: 'workspace',
  suppression_state_backfill: 'workspace',
  suppression_manual: 'workspace',
  suppression_lift_audit: 'workspace',
  unmatched_events: 'provider-event',
  rematched_events: 'everywhere',
  closed_workspaces: 'everywhere',
  event_store_migrations: 'everywhere',
};

/** The Distributed tables' sharding keys: a string's hash, which every ClickHouse release computes alike (UUIDs as text). */
const SHARDING_KEYS: Record<Exclude<Placement, 'everywhere'>, SqlFragment> = {
  workspace: raw.trusted('cityHash64(toString(workspace_id))'),
  'provider-event': raw.trusted('cityHash64(provider_event_id)'),
};

/** A table of the store: its columns, engine and keys, whatever the layout. */
export interface TableSpec {
  name: string;
  /** `(column Type, ...)`, or `AS <table>` through `layout.local` for the columns of another table. */
  structure: SqlFragment;
  /** A MergeTree family (e.g. ReplacingMergeTree) ... */
  family: string;
  /** ... and its arguments, e.g. the version column. */
  engineArguments?: SqlFragment;
  /** PARTITION BY, ORDER BY, SETTINGS. */
  keys: SqlFragment;
}

export class StoreLayout {
  readonly db: SqlFragment;

  constructor(
    readonly database: string,
    /** undefined: one server's plain tables. */
    readonly cluster?: string,
  ) {
    this.db = identifier(database);
  }

  /** `ON CLUSTER <cluster>` in cluster mode (DDL runs on every server of the cluster), nothing otherwise. */
  get onCluster(): SqlFragment {
    return this.cluster === undefined ? raw.trusted('') : sql` ON CLUSTER ${identifier(this.cluster)}`;
  }

  /** Sharded over the cluster (read through a Distributed table). */
  sharded(name: string): boolean {
    return this.cluster !== undefined && (PLACEMENTS[name] ?? 'everywhere') !== 'everywhere';
  }

  /** db.name that readers and writers use, in either mode. */
  table(name: string): SqlFragment {
    return sql`${this.db}.${identifier(name)}`;
  }

  /** The name (without database) of the table that stores the rows on each server: what views, mutations and merges act on. */
  localName(name: string): string {
    return this.sharded(name) ? `${name}_local` : name;
  }

  /** db.localName(name). */
  local(name: string): SqlFragment {
    return sql`${this.db}.${identifier(this.localName(name))}`;
  }

  /**
   * The statements that create the table: the table itself, and in cluster
   * mode the Replicated local table and the Distributed table over it, ON
   * CLUSTER. `ifNotExists: false` makes the first statement fail if the table
   * exists (the caller then knows another process created it).
   */
  createTable(spec: TableSpec, { ifNotExists = true } = {}): SqlFragment[] {
    const ifMissing = raw.trusted(ifNotExists ? 'IF NOT EXISTS ' : '');
    const args = spec.engineArguments;
    if (this.cluster === undefined) {
      const engine = raw.trusted(spec.family);
      return [
        sql`CREATE TABLE ${ifMissing}${this.table(spec.name)} ${spec.structure} ENGINE = ${engine}(${args ?? raw.trusted('')}) ${spec.keys}`,
      ];
    }
    const localName = this.localName(spec.name);
    const placement = PLACEMENTS[spec.name] ?? 'everywhere';
    // Every server of the cluster is a replica of an 'everywhere' table; the servers of one shard, of a sharded one.
    const path = str(`/clickhouse/tables/${placement === 'everywhere' ? 'all' : '{shard}'}/${this.database}/${localName}`);
    const replicated = raw.trusted(`Replicated${spec.family}`);
    const engine = sql`${replicated}(${path}, '{replica}'${args ? sql`, ${args}` : raw.trusted('')})`;
    const statements = [
      sql`CREATE TABLE ${ifMissing}${this.local(spec.name)}${this.onCluster} ${spec.structure} ENGINE = ${engine} ${spec.keys}`,
    ];
    if (placement !== 'everywhere') statements.push(this.createDistributed(spec.name));
    return statements;
  }

  /** The Distributed table `name` over the local tables of a sharded table, ON CLUSTER. */
  createDistributed(name: string): SqlFragment {
    const placement = PLACEMENTS[name];
    if (this.cluster === undefined || placement === undefined || placement === 'everywhere') throw new Error(`${name} is not sharded`);
    const engine = sql`Distributed(${identifier(this.cluster)}, ${this.db}, ${identifier(this.localName(name))}, ${SHARDING_KEYS[placement]})`;
    return sql`CREATE TABLE IF NOT EXISTS ${this.table(name)}${this.onCluster} AS ${this.local(name)} ENGINE = ${engine}`;
  }

  /** A materialized view into the local `target`, its SELECT reading local tables (each replica feeds its own inserts). */
  createView(name: string, target: string, select: SqlFragment): SqlFragment {
    return sql`CREATE MATERIALIZED VIEW IF NOT EXISTS ${this.table(name)}${this.onCluster} TO ${this.local(target)} AS ${select}`;
  }

  /** The statements that drop a table (its Distributed table first), or a view. */
  dropTable(name: string): SqlFragment[] {
    const local = sql`DROP TABLE IF EXISTS ${this.local(name)}${this.onCluster}`;
    return this.sharded(name) ? [sql`DROP TABLE IF EXISTS ${this.table(name)}${this.onCluster}`, local] : [local];
  }

  /**
   * A system table of one replica of each shard (through the cluster()
   * table function, with the cluster's own addresses and credentials, the
   * replica reads go to), or of this server alone. Read it with
   * skip_unavailable_shards: a shard that is down is left out.
   */
  everyShard(systemTable: string): SqlFragment {
    if (this.cluster === undefined) return sql`system.${identifier(systemTable)}`;
    return sql`cluster(${str(this.cluster)}, system, ${identifier(systemTable)})`;
  }
}

/** A database name alone stands for one server's tables, as before cluster mode. */
export type EventDatabase = string | StoreLayout;

export function layoutOf(database: EventDatabase): StoreLayout {
  return typeof database === 'string' ? new StoreLayout(database) : database;
}
