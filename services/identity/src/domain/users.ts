import { InvalidArgumentError, valueError } from '@mail/common';
import type { User, UserPatch } from './model';
import { displayNameOrDefault, validEmail } from './validation';

const UPDATABLE_PATHS = ['email', 'display_name', 'is_platform_admin'];

/**
 * The columns an UpdateUser writes: only those named in the mask. A blank
 * display name falls back to the e-mail's local part, as on create.
 */
export function userPatchFromMask(paths: string[], values: Omit<User, 'id' | 'createdAt' | 'updatedAt'>, current: User): UserPatch {
  const unknown = paths.filter((path) => !UPDATABLE_PATHS.includes(path));
  if (unknown.length > 0) {
    throw new InvalidArgumentError(
      unknown.map((path) => valueError(['update_mask'], path, `'${path}' is not one of ${UPDATABLE_PATHS.join(', ')}`)),
    );
  }
  const patch: UserPatch = {};
  if (paths.includes('email')) patch.email = validEmail(['email'], values.email);
  if (paths.includes('display_name')) patch.displayName = displayNameOrDefault(values.displayName, patch.email ?? current.email);
  if (paths.includes('is_platform_admin')) patch.isPlatformAdmin = values.isPlatformAdmin;
  return patch;
}
