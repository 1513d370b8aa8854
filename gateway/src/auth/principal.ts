import type { identityV1 } from '@mail/proto';
import type { Role } from '../openapi/document';

/** Who the verified token says the caller is. */
export interface TokenIdentity {
  issuer: string;
  subject: string;
  email: string;
  displayName: string;
}

/** The 401's detail for a token that has no usable e-mail to sign in with. */
export const EMAIL_REQUIRED = 'Invalid token: a valid email claim is required to sign in';

/** Turns the Authorization header into an identity, or throws a 401 HttpError. */
export interface Authenticator {
  authenticate(authorization: string | undefined): Promise<TokenIdentity>;
  /** Whether the identity service should make this caller a platform admin (the dev mock user). */
  readonly grantsPlatformAdmin: boolean;
}

export interface WorkspaceAccess {
  workspaceName: string;
  role: Role;
}

/** The caller as the identity service knows them, attached to every authenticated request. */
export interface Principal {
  user: identityV1.User;
  isPlatformAdmin: boolean;
  /** Effective role per workspace id (for a platform admin: every workspace). */
  workspaces: Map<string, WorkspaceAccess>;
}

export const ROLE_RANK: Record<Role, number> = { viewer: 1, editor: 2, admin: 3, platform_admin: 4 };

/** The development mock user of DEV_AUTH_ENABLED=1. */
export const devAuthenticator: Authenticator = {
  grantsPlatformAdmin: true,
  authenticate: () =>
    Promise.resolve({
      issuer: 'urn:dev-auth',
      subject: 'dev-user',
      email: 'dev@example.com',
      displayName: 'Dev User',
    }),
};
