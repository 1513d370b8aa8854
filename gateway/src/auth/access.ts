import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { HttpError, forbidden, fromGrpcError, notFound, unauthorized } from '../errors/http-error';
import { parseUuid } from '../pydantic/scalars';
import type { MatchedOperation, OperationObject } from '../openapi/document';
import type { PrincipalResolver } from './principal-cache';
import { EMAIL_REQUIRED, ROLE_RANK, type Authenticator, type Principal, type WorkspaceAccess } from './principal';
import { roleFromProto } from './roles';

/**
 * Access control lives here and only here, driven by each operation's
 * `x-required-role` and `x-workspace-from` in the OpenAPI document, so no
 * route handler can forget a check.
 */

/** What the access checks leave on res.locals: the operation, the caller and the workspace it acts in. */
export interface AccessLocals {
  operation?: OperationObject;
  principal?: Principal;
  workspaceId?: string;
  /** The workspace the request names, when its header or path gives a valid UUID (known before validation). */
  namedWorkspaceId?: string;
  /** The access checks are done: by step 2, or by step 3 when step 2 could not tell the workspace. */
  authorized?: boolean;
}

export const accessLocals = (res: Response): AccessLocals => res.locals as AccessLocals;

export function principalOf(res: Response): Principal {
  const principal = accessLocals(res).principal;
  if (!principal) throw new Error('principalOf() used on a route without authentication');
  return principal;
}

/** The workspace the request acts in, after its role check passed. */
export function workspaceIdOf(res: Response): string {
  const workspaceId = accessLocals(res).workspaceId;
  if (!workspaceId) throw new Error('workspaceIdOf() used on a route without a workspace scope');
  return workspaceId;
}

/** Step 1, before validation: verify the token (401) and load the caller's memberships. */
export function authenticate(
  authenticator: Authenticator,
  principals: PrincipalResolver,
  matchOperation: (method: string, path: string) => MatchedOperation | undefined,
): RequestHandler {
  return async (req: Request, res: Response, next: NextFunction) => {
    const match = matchOperation(req.method, req.path);
    if (!match) return next();
    accessLocals(res).operation = match.operation;
    const level = match.operation['x-required-role'];
    if (level === 'public') return next();
    const token = await authenticator.authenticate(req.headers.authorization);
    // The first of repeated headers, as the Pydantic validation (laxRequests) reads it after this.
    const workspaceId = workspaceToAuthorize(match, req.path, req.headersDistinct.workspace_id?.[0]);
    accessLocals(res).namedWorkspaceId = workspaceId;
    const resolved = await principals
      .resolve({
        issuer: token.issuer,
        subject: token.subject,
        email: token.email,
        displayName: token.displayName,
        grantPlatformAdmin: authenticator.grantsPlatformAdmin,
        workspaceId,
      })
      .catch((error: unknown) => {
        const httpError = fromGrpcError(error);
        // The service rejects claims it cannot provision from (a first sign-in without a valid e-mail):
        // that is the token's fault, not a body field's.
        throw httpError.status === 422 ? unauthorized(EMAIL_REQUIRED) : httpError;
      });
    if (!resolved.user) throw new HttpError(503, 'Identity service gave no user');
    accessLocals(res).principal = {
      user: resolved.user,
      isPlatformAdmin: resolved.user.isPlatformAdmin,
      workspaces: new Map<string, WorkspaceAccess>(
        resolved.memberships.map((m) => [m.workspaceId, { workspaceName: m.workspaceName, role: roleFromProto(m.role) }]),
      ),
    };
    next();
  };
}

/**
 * The workspace the access checks will look up, so that ResolvePrincipal
 * returns only its membership instead of every one (a platform admin's list
 * grows with every workspace); undefined for operations without a workspace
 * scope, which get the full list (/auth/me shows it). This runs before
 * validation: only a valid UUID is passed, in the canonical form validation
 * turns it into; anything else stays unset, and validation answers.
 */
export function workspaceToAuthorize(
  match: MatchedOperation,
  urlPath: string,
  workspaceHeader: string | string[] | undefined,
): string | undefined {
  const level = match.operation['x-required-role'];
  const scope = match.operation['x-workspace-from'] ?? 'header';
  if (level === undefined || level === 'public' || level === 'authenticated' || scope === 'none') return undefined;
  const given = scope === 'path' ? urlPath.split('/')[match.path.split('/').indexOf('{id}')] : workspaceHeader;
  if (typeof given !== 'string') return undefined;
  const parsed = parseUuid(given);
  return 'uuid' in parsed ? parsed.uuid : undefined;
}

/** express-openapi-validator's view of the matched route (app-level middleware has no req.params). */
function pathParameter(req: Request, name: string): string | undefined {
  return (req as Request & { openapi?: { pathParams?: Record<string, string> } }).openapi?.pathParams?.[name];
}

/**
 * The role (403) and the workspace scope (403, or 404 for an unknown workspace); false when the operation
 * acts in a workspace and `workspaceId` is not known yet.
 */
function checkAccess(res: Response, workspaceId: string | undefined): boolean {
  const { operation, principal } = accessLocals(res);
  const level = operation?.['x-required-role'];
  if (!operation || !principal || level === 'public' || level === 'authenticated' || level === undefined) return true;
  if (level === 'platform_admin' && !principal.isPlatformAdmin) throw forbidden('Platform admin role required');
  if ((operation['x-workspace-from'] ?? 'header') === 'none') return true;
  if (!workspaceId) return false;
  const access = principal.workspaces.get(workspaceId.toLowerCase());
  if (!access) {
    // A platform admin sees every workspace, so an unknown one does not exist.
    throw principal.isPlatformAdmin ? notFound('Workspace not found') : forbidden('Not a member of this workspace');
  }
  if (ROLE_RANK[access.role] < ROLE_RANK[level]) throw forbidden(`The ${level} role is required`);
  accessLocals(res).workspaceId = workspaceId.toLowerCase();
  return true;
}

/**
 * Step 2, before validation: the access checks, as soon as the request names its workspace validly, so
 * that a caller outside it or below the role gets 401/403 whatever the body holds, and no body of theirs
 * is ever validated (docs/api.md, "Errors"). A request whose workspace header or path is invalid goes on
 * to validation, which reports that with every other violation.
 */
export const authorizeNamedWorkspace: RequestHandler = (_req, res, next) => {
  accessLocals(res).authorized = checkAccess(res, accessLocals(res).namedWorkspaceId);
  next();
};

/** Step 3, after validation: the access checks step 2 could not do, with the workspace id as validation read it. */
export const authorize: RequestHandler = (req, res, next) => {
  const { operation, authorized } = accessLocals(res);
  if (authorized || !operation) return next();
  const scope = operation['x-workspace-from'] ?? 'header';
  const workspaceId = scope === 'path' ? pathParameter(req, 'id') : req.header('workspace_id');
  if (!workspaceId) throw new Error(`operation ${operation.operationId} has no workspace id in its ${scope}`);
  accessLocals(res).authorized = checkAccess(res, workspaceId);
  next();
};
