/**
 * Where the real servers started by deploy/local/infra.sh listen. The test
 * command exports these; the defaults match infra.sh's default ports.
 */
export interface InfraEnv {
  databaseUrl: string;
  kafkaBrokers: string[];
  clickhouseUrl: string;
}

export function infraEnv(env: NodeJS.ProcessEnv = process.env): InfraEnv {
  return {
    databaseUrl: env.DATABASE_URL ?? 'postgres://mail:mail@127.0.0.1:55432/mail',
    kafkaBrokers: (env.KAFKA_BROKERS ?? '127.0.0.1:59092').split(','),
    clickhouseUrl: env.CLICKHOUSE_URL ?? 'http://127.0.0.1:58123',
  };
}

/** A short random suffix for names that must not collide between test files. */
export function uniqueSuffix(): string {
  return `${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`;
}
