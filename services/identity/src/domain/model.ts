/** The shapes the store returns and the handlers map to proto messages. */
export type MembershipRole = 'viewer' | 'editor' | 'admin';

/** What a user may do in a workspace: a membership role, or platform_admin everywhere. */
export type EffectiveRole = MembershipRole | 'platform_admin';

export interface User {
  id: string;
  email: string;
  displayName: string;
  isPlatformAdmin: boolean;
  createdAt: Date;
  updatedAt: Date;
}

export interface Workspace {
  id: string;
  name: string;
  createdAt: Date;
  updatedAt: Date;
}

export interface Membership {
  workspaceId: string;
  workspaceName: string;
  role: EffectiveRole;
}

export interface Member {
  user: User;
  workspaceId: string;
  role: MembershipRole;
  createdAt: Date;
  updatedAt: Date;
}

export interface Page<T> {
  items: T[];
  total: number;
  page: number;
  pageSize: number;
}

export interface NewUser {
  email: string;
  displayName: string;
  isPlatformAdmin: boolean;
}

/** Columns to write; absent ones are left unchanged. */
export type UserPatch = Partial<NewUser>;
