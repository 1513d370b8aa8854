import { InvalidArgumentError } from '@mail/common';
import { identityV1 } from '@mail/proto';
import type { EffectiveRole, MembershipRole } from './model';

const { Role } = identityV1;

const TO_PROTO: Record<EffectiveRole, identityV1.Role> = {
  viewer: Role.ROLE_VIEWER,
  editor: Role.ROLE_EDITOR,
  admin: Role.ROLE_ADMIN,
  platform_admin: Role.ROLE_PLATFORM_ADMIN,
};

const ASSIGNABLE = new Map<identityV1.Role, MembershipRole>([
  [Role.ROLE_VIEWER, 'viewer'],
  [Role.ROLE_EDITOR, 'editor'],
  [Role.ROLE_ADMIN, 'admin'],
]);

export function roleToProto(role: EffectiveRole): identityV1.Role {
  return TO_PROTO[role];
}

/**
 * The role a membership may carry. platform_admin is a user flag, not a
 * membership role, so it is rejected here like any value outside the enum.
 */
export function assignableRole(role: identityV1.Role): MembershipRole {
  const assignable = ASSIGNABLE.get(role);
  if (assignable) return assignable;
  const publicName = role === Role.ROLE_PLATFORM_ADMIN ? 'platform_admin' : null;
  throw new InvalidArgumentError([
    {
      loc: ['role'],
      type: 'enum',
      msg: "Input should be 'viewer', 'editor' or 'admin'",
      input: publicName,
      ctx: { expected: "'viewer', 'editor' or 'admin'" },
    },
  ]);
}
