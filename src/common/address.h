/* address.h -- "HOST:PORT", "[V6]:PORT" and "unix:PATH" endpoints.
 *
 * Used for --listen, --redis and the embedded Redis's socket.
 */
#ifndef RANK_ADDRESS_H
#define RANK_ADDRESS_H

#include <glib.h>

typedef struct
{
  char *host; /* NULL for a unix socket */
  guint16 port;
  char *path; /* unix socket path, or NULL */
} RankAddress;

/* Parses text; default_port is used when it has no ":PORT" (0: required). */
gboolean rank_address_parse (const char *text, guint16 default_port,
                             RankAddress *out, GError **error);
void rank_address_clear (RankAddress *address);

/* "host:port" or "unix:path", for messages. Free with g_free. */
char *rank_address_to_string (const RankAddress *address);

/* Opens a connected, non-blocking, close-on-exec stream socket within
 * timeout_ms; -1 with error set on failure. */
int rank_address_connect (const RankAddress *address, int timeout_ms,
                          GError **error);

/* Starts a non-blocking connect: returns the socket, connected or with the
 * connection under way (watch it for writability, then read SO_ERROR). */
int rank_address_connect_start (const RankAddress *address, GError **error);

/* Opens a listening socket (SO_REUSEADDR, close-on-exec). */
int rank_address_listen (const RankAddress *address, int backlog,
                         GError **error);

#endif /* RANK_ADDRESS_H */
