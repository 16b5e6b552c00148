// Who is signed in, what their role may do, and in which namespaces.

const ROLE_RANK = { viewer: 0, operator: 1, admin: 2 };

export const session = {
  /// The answer of GET /api/v1/auth/me, or null before sign-in.
  me: null,
  /// The caller's role is at least `role` (`viewer`, `operator` or `admin`).
  can(role) {
    return !!this.me && ROLE_RANK[this.me.role] >= ROLE_RANK[role];
  },
  /// The token may act in some namespaces only (`namespaces` lists them): the pages that show
  /// every namespace (overview, executors, cluster, tokens, audit) answer it 403.
  restricted() {
    return !!this.me && Array.isArray(this.me.namespaces);
  },
  /// The token may act in `ns`.
  mayActIn(ns) {
    return !!this.me && (!this.restricted() || this.me.namespaces.includes(ns));
  },
};
