import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';

/**
 * Where the real servers started by deploy/local/infra.sh listen, as the test
 * command exports them (`infra.sh up` prints the export lines). There is no
 * default: a test run on other ports must never reach the servers of
 * another run on the default ones, so a missing variable is an error.
 */
export interface InfraEnv {
  databaseUrl: string;
  kafkaBrokers: string[];
  clickhouseUrl: string;
}

/** The variables that carry the servers' addresses, as `infra.sh up` exports them. */
export const INFRA_VARIABLES = ['DATABASE_URL', 'KAFKA_BROKERS', 'CLICKHOUSE_URL'] as const;
export type InfraVariables = Record<(typeof INFRA_VARIABLES)[number], string>;

/** The servers' address variables of `env`; throws, naming what is missing, unless all are set. */
export function infraVariables(env: Readonly<Record<string, string | undefined>> = process.env): InfraVariables {
  const missing = INFRA_VARIABLES.filter((name) => !env[name]?.trim());
  if (missing.length > 0) {
    throw new Error(
      `${missing.join(', ')} not set: tests and the launcher use only the servers whose addresses are exported ` +
        '(`npm test` and `npm run up` do it; by hand: eval "$(bash deploy/local/infra.sh env)")',
    );
  }
  return { DATABASE_URL: env.DATABASE_URL!, KAFKA_BROKERS: env.KAFKA_BROKERS!, CLICKHOUSE_URL: env.CLICKHOUSE_URL! };
}

export function infraEnv(env: Readonly<Record<string, string | undefined>> = process.env): InfraEnv {
  const variables = infraVariables(env);
  return {
    databaseUrl: variables.DATABASE_URL,
    kafkaBrokers: variables.KAFKA_BROKERS.split(','),
    clickhouseUrl: variables.CLICKHOUSE_URL,
  };
}

/** A short random suffix for names that must not collide between test files. */
export function uniqueSuffix(): string {
  return `${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`;
}

/**
 * The ClickHouse release line (`26.9`) that `npm test` runs and the containers
 * and manifests deploy: that of the chdb-core version deploy/local/servers/clickhouse.sh pins.
 */
export function clickHouseReleaseLine(): string {
  const script = fs.readFileSync(path.join(__dirname, '..', '..', 'servers', 'clickhouse.sh'), 'utf8');
  const line = /^CHDB_CORE_VERSION=(\d+\.\d+)\.\d+$/m.exec(script)?.[1];
  if (line === undefined) throw new Error('deploy/local/servers/clickhouse.sh pins no CHDB_CORE_VERSION=<major>.<minor>.<patch>');
  return line;
}

/** A ClickHouse version (`26.9.2.1`, `18.16.1`) as [major, minor]. */
export function releaseOf(version: string): [number, number] {
  const [major, minor] = version.split('.').map(Number);
  return [major, minor];
}

/** The state folder of the servers `npm test` started (infra.sh's STATE_DIR, by default the checkout's .state). */
export function sharedStateDir(): string {
  return path.resolve(process.env.STATE_DIR?.trim() || path.join(__dirname, '..', '..', '..', '..', '.state'));
}

/**
 * Lends a private state folder (a test's own servers, started by infra.sh
 * with STATE_DIR set to it) what the shared one installed once: the Kafka
 * jars and the tools (chdb-core's ClickHouse, Jaeger, promtool), as symbolic
 * links. infra.sh finds them by the pom's hash and the tools' versions, so the
 * test's servers start without fetching or building anything.
 */
export function lendInstalledServers(stateDir: string): void {
  const shared = sharedStateDir();
  for (const installed of [path.join('kafka', 'libs'), 'tools']) {
    if (!fs.existsSync(path.join(shared, installed))) continue;
    fs.mkdirSync(path.dirname(path.join(stateDir, installed)), { recursive: true });
    fs.symlinkSync(path.join(shared, installed), path.join(stateDir, installed));
  }
}

/**
 * How long `infra.sh up` waits for a test's own server (its READY_TIMEOUT):
 * a Kafka broker restarted after SIGKILL replays its metadata log first, and
 * on a starved CI host that took longer than infra.sh's default 90 s.
 */
const PRIVATE_SERVER_READY_TIMEOUT_S = 240;

/** Runs `infra.sh <args>` for a test's own servers: `env` names their STATE_DIR and ports. */
export async function runPrivateInfra(env: NodeJS.ProcessEnv, ...args: string[]): Promise<void> {
  await promisify(execFile)('bash', [path.join(__dirname, '..', '..', 'infra.sh'), ...args], {
    env: { ...env, READY_TIMEOUT: String(PRIVATE_SERVER_READY_TIMEOUT_S) },
    timeout: (PRIVATE_SERVER_READY_TIMEOUT_S + 60) * 1000,
    maxBuffer: 16 * 1024 * 1024,
  });
}
