/* address.c -- endpoint parsing, connecting and listening (see address.h). */
#include "address.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "error.h"

static gboolean
fail (GError **error, const char *text, const char *why)
{
  g_set_error (
      error, RANK_ERROR, RANK_ERROR_INVALID,
      "address '%s': %s (expected HOST:PORT, [IPV6]:PORT or unix:PATH)", text,
      why);
  return FALSE;
}

gboolean
rank_address_parse (const char *text, guint16 default_port, RankAddress *out,
                    GError **error)
{
  const char *colon;
  g_autofree char *host = NULL;
  guint64 port = default_port;

  memset (out, 0, sizeof *out);
  if (text == NULL || *text == '\0')
    return fail (error, "", "empty");
  if (g_str_has_prefix (text, "unix:"))
    {
      struct sockaddr_un sun;

      if (text[5] == '\0')
        return fail (error, text, "empty socket path");
      if (strlen (text + 5) >= sizeof sun.sun_path)
        return fail (error, text, "socket path too long");
      out->path = g_strdup (text + 5);
      return TRUE;
    }
  if (text[0] == '[')
    {
      const char *end = strchr (text, ']');

      if (end == NULL)
        return fail (error, text, "missing ']'");
      host = g_strndup (text + 1, (gsize) (end - text - 1));
      colon = end[1] == ':' ? end + 1 : NULL;
      if (end[1] != '\0' && colon == NULL)
        return fail (error, text, "junk after ']'");
    }
  else
    {
      colon = strrchr (text, ':');
      host = colon ? g_strndup (text, (gsize) (colon - text)) : g_strdup (text);
    }
  if (colon != NULL)
    {
      char *end = NULL;

      errno = 0;
      port = g_ascii_strtoull (colon + 1, &end, 10);
      if (colon[1] == '\0' || *end != '\0' || errno != 0 || port > 65535)
        return fail (error, text, "port must be 0-65535");
    }
  else if (default_port == 0)
    return fail (error, text, "missing port");
  if (*host == '\0')
    return fail (error, text, "empty host");
  out->host = g_steal_pointer (&host);
  out->port = (guint16) port;
  return TRUE;
}

void
rank_address_clear (RankAddress *address)
{
  g_clear_pointer (&address->host, g_free);
  g_clear_pointer (&address->path, g_free);
}

char *
rank_address_to_string (const RankAddress *address)
{
  if (address->path != NULL)
    return g_strdup_printf ("unix:%s", address->path);
  if (strchr (address->host, ':') != NULL)
    return g_strdup_printf ("[%s]:%u", address->host, address->port);
  return g_strdup_printf ("%s:%u", address->host, address->port);
}

int
rank_address_connect_start (const RankAddress *address, GError **error)
{
  g_autofree char *name = rank_address_to_string (address);
  int fd = -1, saved = 0, one = 1;

  if (address->path != NULL)
    {
      struct sockaddr_un sun = { .sun_family = AF_UNIX };

      g_strlcpy (sun.sun_path, address->path, sizeof sun.sun_path);
      fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
      if (fd >= 0 && connect (fd, (struct sockaddr *) &sun, sizeof sun) < 0)
        {
          saved = errno;
          close (fd);
          fd = -1;
        }
    }
  else
    {
      struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res = NULL;
      char service[8];
      int rc;

      g_snprintf (service, sizeof service, "%u", address->port);
      rc = getaddrinfo (address->host, service, &hints, &res);
      if (rc != 0)
        {
          g_set_error (error, RANK_ERROR, RANK_ERROR_UNAVAILABLE,
                       "cannot resolve %s: %s", name, gai_strerror (rc));
          return -1;
        }
      fd = socket (res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
                   0);
      if (fd >= 0 && connect (fd, res->ai_addr, res->ai_addrlen) < 0
          && errno != EINPROGRESS)
        {
          saved = errno;
          close (fd);
          fd = -1;
        }
      freeaddrinfo (res);
      if (fd >= 0)
        (void) setsockopt (fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
  if (fd < 0)
    g_set_error (error, RANK_ERROR, RANK_ERROR_UNAVAILABLE,
                 "cannot connect to %s: %s", name,
                 g_strerror (saved ? saved : errno));
  return fd;
}

int
rank_address_connect (const RankAddress *address, int timeout_ms,
                      GError **error)
{
  struct pollfd pfd;
  int fd = rank_address_connect_start (address, error);
  int err = 0, rc;
  socklen_t len = sizeof err;

  if (fd < 0)
    return -1;
  pfd = (struct pollfd){ fd, POLLOUT, 0 };
  do
    rc = poll (&pfd, 1, timeout_ms > 0 ? timeout_ms : -1);
  while (rc < 0 && errno == EINTR);
  if (rc == 1 && getsockopt (fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0
      && err == 0)
    return fd;
  close (fd);
  {
    g_autofree char *name = rank_address_to_string (address);

    g_set_error (error, RANK_ERROR, RANK_ERROR_UNAVAILABLE,
                 "cannot connect to %s: %s", name,
                 rc == 0 ? "timed out" : g_strerror (err ? err : errno));
  }
  return -1;
}

int
rank_address_listen (const RankAddress *address, int backlog, GError **error)
{
  g_autofree char *name = rank_address_to_string (address);
  struct addrinfo hints
      = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
  struct addrinfo *res = NULL;
  char service[8];
  int rc, fd = -1, saved = 0, one = 1;

  if (address->path != NULL)
    {
      g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
                   "cannot listen on %s: only TCP is supported", name);
      return -1;
    }
  g_snprintf (service, sizeof service, "%u", address->port);
  rc = getaddrinfo (address->host, service, &hints, &res);
  if (rc != 0)
    {
      g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
                   "cannot resolve %s: %s", name, gai_strerror (rc));
      return -1;
    }
  for (struct addrinfo *ai = res; ai != NULL && fd < 0; ai = ai->ai_next)
    {
      fd = socket (ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (fd < 0)
        {
          saved = errno;
          continue;
        }
      (void) setsockopt (fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      if (bind (fd, ai->ai_addr, ai->ai_addrlen) < 0
          || listen (fd, backlog) < 0)
        {
          saved = errno;
          close (fd);
          fd = -1;
        }
    }
  freeaddrinfo (res);
  if (fd < 0)
    g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
                 "cannot listen on %s: %s", name, g_strerror (saved));
  return fd;
}
