// Who is signed in, and what their role may do.

const ROLE_RANK = { viewer: 0, operator: 1, admin: 2 };

export const session = {
  /// The answer of GET /api/v1/auth/me, or null before sign-in.
  me: null,
  /// The caller's role is at least `role` (`viewer`, `operator` or `admin`).
  can(role) {
    return !!this.me && ROLE_RANK[this.me.role] >= ROLE_RANK[role];
  },
};
