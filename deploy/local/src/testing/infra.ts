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
