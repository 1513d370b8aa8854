import { identityV1 } from '@mail/proto';
import type { Role } from '../openapi/document';

const FROM_PROTO: Partial<Record<identityV1.Role, Role>> = {
  [identityV1.Role.ROLE_VIEWER]: 'viewer',
  [identityV1.Role.ROLE_EDITOR]: 'editor',
  [identityV1.Role.ROLE_ADMIN]: 'admin',
  [identityV1.Role.ROLE_PLATFORM_ADMIN]: 'platform_admin',
};

const TO_PROTO: Record<Role, identityV1.Role> = {
  viewer: identityV1.Role.ROLE_VIEWER,
  editor: identityV1.Role.ROLE_EDITOR,
  admin: identityV1.Role.ROLE_ADMIN,
  platform_admin: identityV1.Role.ROLE_PLATFORM_ADMIN,
};

export function roleFromProto(role: identityV1.Role): Role {
  const mapped = FROM_PROTO[role];
  if (!mapped) throw new Error(`unknown role ${role}`);
  return mapped;
}

export function roleToProto(role: Role): identityV1.Role {
  return TO_PROTO[role];
}
