/**
 * Typed access to environment variables. Each process builds one config object
 * with these readers at start-up and passes it down; nothing else reads
 * process.env.
 */
export class ConfigError extends Error {}

type Env = Record<string, string | undefined>;

export class EnvReader {
  constructor(private readonly env: Env = process.env) {}

  string(name: string, fallback?: string): string {
    const value = this.optionalString(name) ?? fallback;
    if (value === undefined) throw new ConfigError(`${name} must be set`);
    return value;
  }

  optionalString(name: string): string | undefined {
    const value = this.env[name];
    return value === undefined || value.trim() === '' ? undefined : value.trim();
  }

  int(name: string, fallback?: number): number {
    const raw = this.optionalString(name);
    if (raw === undefined) {
      if (fallback === undefined) throw new ConfigError(`${name} must be set`);
      return fallback;
    }
    if (!/^-?\d+$/.test(raw)) throw new ConfigError(`${name} must be an integer, got "${raw}"`);
    return Number(raw);
  }

  /** An integer of at least 1: a count, a size or a time limit that zero would turn off. */
  positiveInt(name: string, fallback?: number): number {
    const value = this.int(name, fallback);
    if (value < 1) throw new ConfigError(`${name} must be at least 1, got ${value}`);
    return value;
  }

  /** An integer, or undefined when the variable is unset or empty. */
  optionalInt(name: string): number | undefined {
    return this.optionalString(name) === undefined ? undefined : this.int(name);
  }

  bool(name: string, fallback = false): boolean {
    const raw = this.optionalString(name);
    if (raw === undefined) return fallback;
    if (['1', 'true', 'yes', 'on'].includes(raw.toLowerCase())) return true;
    if (['0', 'false', 'no', 'off'].includes(raw.toLowerCase())) return false;
    throw new ConfigError(`${name} must be 1 or 0, got "${raw}"`);
  }

  list(name: string, fallback: string[] = []): string[] {
    const raw = this.optionalString(name);
    if (raw === undefined) return fallback;
    return raw
      .split(',')
      .map((item) => item.trim())
      .filter((item) => item !== '');
  }
}

/** Shared settings every service process reads. */
export interface ProcessConfig {
  serviceName: string;
  /** host:port the gRPC server binds. */
  grpcAddress: string;
  /** Port of the HTTP ops server (/metrics, /healthz, /readyz); 0 picks one. */
  opsPort: number;
  logLevel: string;
  shutdownTimeoutMs: number;
}

export function readProcessConfig(
  env: EnvReader,
  serviceName: string,
  grpcAddressVariable: string,
  defaults: { grpcAddress: string; opsPort: number },
): ProcessConfig {
  return {
    serviceName,
    grpcAddress: env.string(grpcAddressVariable, defaults.grpcAddress),
    opsPort: env.int('OPS_PORT', defaults.opsPort),
    logLevel: env.string('LOG_LEVEL', 'info'),
    shutdownTimeoutMs: env.int('SHUTDOWN_TIMEOUT_MS', 10_000),
  };
}
