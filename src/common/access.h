/* access.h -- who calls: a call's peer identity and the roles that may be
 * granted to it (see docs/security.md).
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

#endif /* RANK_ACCESS_H */
