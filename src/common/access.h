/* access.h -- who calls, and what they may do: a call's peer identity, the
 * roles a method needs, and the grants of roles to identities on boards
 * (see docs/security.md).
 *
 * A grant gives an identity a role on the boards whose names match a
 * pattern (a glob of '*' and '?': "season_*", "*" for every board). The
 * grants come from the configuration file's [grant NAME] sections and
 * rankd's --grant options (config.h). With none at all, every caller has
 * read and write on every board and nobody has admin: the quick start
 * works, and no client that merely reaches the port can delete, reset,
 * export or list boards. Once any grant exists, a caller has exactly what
 * its own grants give (anonymous callers: [grant anonymous]'s).
 */
#ifndef RANK_ACCESS_H
#define RANK_ACCESS_H

#include <glib.h>

/* Who is at the other end of a connection, fixed once it is accepted (and,
 * on a TLS listener, once its handshake is done). */
typedef struct
{
  /* The client certificate's name (--tls-identity), "uid:N" on a unix
   * socket, or NULL: anonymous. */
  char *identity;
  gboolean tls; /* the connection is TLS */
} RankPeer;

/* What a method needs: reads, writes, board administration; or nothing
 * (GetServerInfo: anyone may ask who they are). */
typedef enum
{
  RANK_ROLE_READ,
  RANK_ROLE_WRITE,
  RANK_ROLE_ADMIN,
  RANK_ROLES,
  RANK_ROLE_NONE = RANK_ROLES,
} RankRole;

/* The section name of the grants of calls without an identity. A client
 * certificate named "anonymous" gets nothing from it. */
#define RANK_ACCESS_ANONYMOUS "anonymous"

/* "read", "write", "admin" ("none" for RANK_ROLE_NONE). */
const char *rank_role_name (RankRole role);

/* The role named name; FALSE if it names none. */
gboolean rank_role_parse (const char *name, RankRole *role);

/* The grants of one configuration: built while it loads, then read-only
 * (any thread). */
typedef struct _RankGrants RankGrants;

RankGrants *rank_grants_new (void);
void rank_grants_free (RankGrants *grants);

/* Whether pattern is a board pattern: 1-200 bytes of what a board name may
 * hold, '*' and '?' included; error names what is wrong. */
gboolean rank_grants_pattern_ok (const char *pattern, GError **error);

/* Gives name (an identity, or RANK_ACCESS_ANONYMOUS) role on the boards
 * pattern matches (checked by the caller); role RANK_ROLE_NONE only
 * records that name has a section (it then has what its other grants give,
 * and the grants are configured). */
void rank_grants_add (RankGrants *grants, const char *name, RankRole role,
                      const char *pattern);

/* A --grant option: "NAME=ROLE[,ROLE...]" gives NAME each role on every
 * board. FALSE, with error naming what is wrong, if it does not parse. */
gboolean rank_grants_add_option (RankGrants *grants, const char *option,
                                 GError **error);

/* Whether any grant (or section) was given: else the defaults hold. */
gboolean rank_grants_configured (const RankGrants *grants);

/* Whether identity (NULL: anonymous) has role on board. grants NULL: the
 * defaults. */
gboolean rank_grants_allow (const RankGrants *grants, const char *identity,
                            RankRole role, const char *board);

/* Whether identity has role on some board (for ListBoards: it then sees
 * the boards it has the role on). */
gboolean rank_grants_any (const RankGrants *grants, const char *identity,
                          RankRole role);

/* identity's grants as "ROLE:PATTERN" strings, sorted, NULL-terminated
 * (empty: none); free with g_strfreev. */
char **rank_grants_describe (const RankGrants *grants, const char *identity);

#endif /* RANK_ACCESS_H */
