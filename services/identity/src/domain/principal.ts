import { NAME_MAX_LENGTH, displayNameOrDefault, requireText, validTokenEmail } from './validation';
import type { NewUser, User, UserPatch } from './model';

/** What a verified token says about its user, as the gateway forwards it. */
export interface TokenClaims {
  issuer: string;
  subject: string;
  email: string;
  displayName: string;
  grantPlatformAdmin: boolean;
}

/** Claims after normalization; an absent claim is undefined and leaves the stored value alone. */
export interface PrincipalClaims {
  issuer: string;
  subject: string;
  email: string | undefined;
  displayName: string | undefined;
  platformAdmin: boolean;
}

export function principalClaims(token: TokenClaims, bootstrapAdmins: ReadonlySet<string>): PrincipalClaims {
  const email = token.email.trim() === '' ? undefined : validTokenEmail(token.email);
  // The identity provider owns the name, so an over-long one is cut, and NULs (which PostgreSQL
  // text cannot hold) are dropped, rather than locking the user out.
  const displayName = [...token.displayName.replaceAll('\u0000', '').trim()].slice(0, NAME_MAX_LENGTH).join('');
  return {
    issuer: requireText('issuer', token.issuer),
    subject: requireText('subject', token.subject),
    email,
    displayName: displayName === '' ? undefined : displayName,
    platformAdmin: token.grantPlatformAdmin || (email !== undefined && bootstrapAdmins.has(email)),
  };
}

/** Profile of a user seen for the first time; without an e-mail there is nobody to create. */
export function newUserProfile(claims: PrincipalClaims): NewUser {
  const email = requireText('email', claims.email ?? '');
  return { email, displayName: displayNameOrDefault(claims.displayName, email), isPlatformAdmin: claims.platformAdmin };
}

/**
 * The columns the token changes. Empty when nothing changed, so the usual
 * request writes nothing. The platform-admin flag is only ever raised here:
 * revoking it is an explicit UpdateUser.
 */
export function profilePatch(user: User, claims: PrincipalClaims): UserPatch {
  const patch: UserPatch = {};
  if (claims.email !== undefined && claims.email !== user.email) patch.email = claims.email;
  if (claims.displayName !== undefined && claims.displayName !== user.displayName) patch.displayName = claims.displayName;
  if (claims.platformAdmin && !user.isPlatformAdmin) patch.isPlatformAdmin = true;
  return patch;
}
