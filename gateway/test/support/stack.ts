import fs from 'node:fs';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { EnvReader, Readiness, call, createClient, createLogger } from '@mail/common';
import {
  GRPC_ADDRESS_VARIABLES,
  createTestClickHouse,
  createTestPostgres,
  startStack,
  type ServiceName,
  type Stack,
  type TestClickHouse,
  type TestPostgres,
} from '@mail/local';
import { identityV1 } from '@mail/proto';
import { createApp } from '../../src/app';
import { devAuthenticator } from '../../src/auth/principal';
import { closeServiceClients, createServiceClients } from '../../src/clients';
import { readGatewayConfig } from '../../src/config';
import { loadOpenApiDocument } from '../../src/openapi/document';
import { gatewayTestEnv } from './env';
import type { JsonObject } from './json';

/**
 * The set-up of the gateway's end-to-end area tests: the real service
 * processes of `processes` (startStack) over a private Postgres database (and
 * ClickHouse database when asked), the gateway's whole request pipeline
 * in-process (DEV_AUTH_ENABLED=1: the dev user is platform admin) dialling
 * them, and workspaces created through identity.
 *
 * The gateway runs in-process rather than as a process because its process
 * waits for every dependency before it reports ready; an area test starts
 * only the services it needs.
 */

export interface GatewayStackOptions {
  /** Names the private databases (gateway_<label>) and the state folder (<label>-test-). */
  label: string;
  /** The services to start; include identity when `workspaces` is given. */
  processes: ServiceName[];
  /** Also a private ClickHouse database, passed on as CLICKHOUSE_URL and CLICKHOUSE_DATABASE. */
  clickhouse?: boolean;
  /** Names of workspaces to create, one after the other; their ids come back in this order. */
  workspaces?: string[];
  /** More environment for the processes (it wins over the private databases' addresses). */
  env?: Record<string, string>;
}

export interface GatewayStack {
  /** Base URL of the in-process gateway. */
  url: string;
  stack: Stack;
  postgres: TestPostgres;
  /** Set when `clickhouse` was asked for. */
  clickhouse: TestClickHouse | undefined;
  /** Ids of the created workspaces, in the order of their names. */
  workspaces: string[];
  /** Gateway, then the processes, then the databases and the state folder. */
  close(): Promise<void>;
}

export async function startGatewayStack(options: GatewayStackOptions): Promise<GatewayStack> {
  const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), `${options.label}-test-`));
  let postgres: TestPostgres | undefined;
  let clickhouse: TestClickHouse | undefined;
  let stack: Stack | undefined;
  let closeGateway: (() => Promise<void>) | undefined;
  const close = async (): Promise<void> => {
    await closeGateway?.();
    await stack?.stopAll();
    await Promise.all([postgres?.drop(), clickhouse?.drop()]);
    fs.rmSync(stateDir, { recursive: true, force: true });
  };
  try {
    const databaseLabel = `gateway_${options.label}`;
    [postgres, clickhouse] = await Promise.all([
      createTestPostgres(databaseLabel),
      options.clickhouse ? createTestClickHouse(databaseLabel) : undefined,
    ]);
    const env: Record<string, string> = { DATABASE_URL: postgres.url, LOG_LEVEL: 'warn' };
    if (clickhouse) Object.assign(env, { CLICKHOUSE_URL: clickhouse.url, CLICKHOUSE_DATABASE: clickhouse.database });
    Object.assign(env, options.env);
    stack = await startStack({ stateDir, logDir: path.join(stateDir, 'logs'), processes: options.processes, env });

    const addresses = Object.fromEntries(options.processes.map((name) => [GRPC_ADDRESS_VARIABLES[name], stack!.urls.grpc[name]]));
    const config = readGatewayConfig(new EnvReader(gatewayTestEnv(addresses)));
    const logger = createLogger('gateway', 'silent');
    const clients = createServiceClients(config.services, logger);
    const app = createApp({
      document: loadOpenApiDocument(),
      clients,
      authenticator: devAuthenticator,
      readiness: new Readiness(),
      logger,
    });
    const server = app.listen(0, '127.0.0.1');
    closeGateway = async () => {
      await new Promise((resolve) => server.close(resolve));
      closeServiceClients(clients);
    };
    await new Promise((resolve) => server.once('listening', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

    const workspaces: string[] = [];
    if (options.workspaces?.length) {
      const identity = createClient(identityV1.IdentityServiceClient, stack.urls.grpc.identity);
      try {
        for (const name of options.workspaces) {
          workspaces.push((await call(identity.createWorkspace.bind(identity), { name })).workspace!.id);
        }
      } finally {
        identity.close();
      }
    }
    return { url, stack, postgres, clickhouse, workspaces, close };
  } catch (error) {
    await close();
    throw error;
  }
}

export interface JsonAnswer {
  status: number;
  /** The parsed body when the answer is JSON, else undefined. */
  body: JsonObject;
  headers: Headers;
}

/** One request to the gateway: a JSON body when given, the workspace_id header unless null; redirects are not followed. */
export async function requestJson(
  baseUrl: string,
  method: string,
  route: string,
  body: unknown,
  workspace: string | null,
): Promise<JsonAnswer> {
  const headers: Record<string, string> = {};
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (workspace) headers.workspace_id = workspace;
  const response = await fetch(`${baseUrl}${route}`, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    redirect: 'manual',
  });
  const text = await response.text();
  const json = response.headers.get('content-type')?.startsWith('application/json');
  return { status: response.status, body: json ? JSON.parse(text) : undefined, headers: response.headers };
}
