/* fuzz_request.c -- a libFuzzer target over rankd's whole request path:
 * bytes on a TCP connection -> transport -> protocol -> handler -> store ->
 * a real Redis -> reply.
 *
 * LLVMFuzzerInitialize starts a redis-server (the embedded one, in a
 * temporary directory) and four rankd servers in this process, one per
 * transport and protocol (framed/buffered x binary/compact), with a config
 * file that shards board "s" and gives board "r" subscores. An input's first
 * byte picks the server; the rest is sent on a fresh connection, which is then
 * half-closed. rankd answers what it can and closes the connection; the target
 * reads until it does. A crash, a sanitizer report, a leak, or a connection
 * still open after 10 s (reported as a crash) fails the run. tests/fuzz.sh runs
 * it.
 */
#include <errno.h>
#include <glib/gstdio.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "config.h"
#include "embedded_redis.h"
#include "server.h"
#include "thrift_fixes.h"

#define SERVERS 4

static guint16 ports[SERVERS];
static char *dir;                /* lives until exit, like the servers */
static RankEmbeddedRedis *redis; /* (their threads never stop) */

typedef struct
{
  RankServer *server;
  int never; /* a pipe nothing writes: the accept loop runs for ever */
} Acceptor;

static gpointer
accept_forever (gpointer data)
{
  Acceptor *a = data;

  rank_server_accept (a->server, a->never);
  return NULL;
}

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *conf = NULL;
  g_autofree char *data = NULL;
  RankConfig *boards;

  dir = g_dir_make_tmp ("rankd-fuzz-XXXXXX", NULL);
  conf = g_build_filename (dir, "rankd.conf", NULL);
  data = g_build_filename (dir, "data", NULL);

  signal (SIGPIPE, SIG_IGN);
  g_log_set_writer_func (g_log_writer_default, NULL, NULL);
  g_setenv ("G_MESSAGES_DEBUG", "", TRUE);
  rank_thrift_fixes_apply ();
  g_assert_true (
      g_file_set_contents (conf,
                           "[board s]\nshards=4\nrank=dense\n"
                           "[board p]\nperiod=daily\n"
                           "timezone=Europe/Paris\nrank=competition\n"
                           "[board r]\nshards=2\nsubscores=asc,desc\n"
                           /* A rolling window: its reads (window=true)
                            * and their refusals elsewhere. */
                           "[board w]\nperiod=daily\nwindow=2\n"
                           "retention=1\n"
                           /* Admin on some boards: both the refusals and
                            * the admin methods are reached. */
                           "[grant anonymous]\nread=*\nwrite=*\n"
                           "admin=s;p;r;a*\n",
                           -1, NULL));
  boards = rank_config_load (conf, &error);
  g_assert_no_error (error);
  redis = rank_embedded_redis_start (data, &error);
  g_assert_no_error (error);
  for (int i = 0; i < SERVERS; i++)
    {
      RankServerConfig config = {
        .framed = i < 2,
        .protocol = i % 2 ? RANK_PROTOCOL_COMPACT : RANK_PROTOCOL_BINARY,
        .max_frame = 1024 * 1024,
        .idle_timeout_ms = 60000,
        .max_connections = 64,
        .io_threads = 1,
        .redis_timeout_ms = 2000,
        .dedup_window_ms = 3600 * 1000,
        .boards = boards,
      };
      Acceptor *a = g_new0 (Acceptor, 1);
      int pipe_fds[2];

      g_assert_true (
          rank_address_parse ("127.0.0.1:0", 0, &config.listen, &error));
      a->server = rank_server_new (&config, &error);
      g_assert_no_error (error);
      rank_server_start (a->server, rank_embedded_redis_address (redis), 1);
      g_assert_true (rank_server_wait_redis (a->server, 5000, &error));
      ports[i] = rank_server_port (a->server);
      g_assert_cmpint (pipe (pipe_fds), ==, 0);
      a->never = pipe_fds[0];
      g_thread_unref (g_thread_new ("fuzz-accept", accept_forever, a));
      rank_address_clear (&config.listen);
    }
  /* Everything started here lives until the process exits. */
  return 0;
}

int
LLVMFuzzerTestOneInput (const uint8_t *bytes, size_t len)
{
  struct sockaddr_in sin
      = { .sin_family = AF_INET, .sin_addr.s_addr = htonl (INADDR_LOOPBACK) };
  struct timeval tv = { 10, 0 };
  char buf[65536];
  int fd;

  if (len < 1)
    return 0;
  sin.sin_port = htons (ports[bytes[0] % SERVERS]);
  /* Thousands of connections a second can run the loopback out of
   * ephemeral ports for a moment: retry a while before calling it a
   * failure. */
  for (int attempt = 0;; attempt++)
    {
      fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (fd >= 0 && connect (fd, (struct sockaddr *) &sin, sizeof sin) == 0)
        break;
      if (attempt == 500)
        {
          fprintf (stderr, "cannot connect to rankd: %s\n", g_strerror (errno));
          abort ();
        }
      if (fd >= 0)
        close (fd);
      g_usleep (10 * 1000);
    }
  setsockopt (fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt (fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  /* rankd may close early (bad bytes): a failed send is an answer too. */
  for (size_t off = 1; off < len;)
    {
      ssize_t n = send (fd, bytes + off, len - off, MSG_NOSIGNAL);

      if (n <= 0)
        break;
      off += (size_t) n;
    }
  shutdown (fd, SHUT_WR);
  for (;;)
    {
      ssize_t n = recv (fd, buf, sizeof buf, 0);

      if (n == 0 || (n < 0 && errno == ECONNRESET))
        break;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        {
          fprintf (stderr, "rankd kept a half-closed connection open 10 s\n");
          abort ();
        }
      if (n < 0 && errno != EINTR)
        abort ();
    }
  /* Reset rather than linger: no TIME_WAIT left behind on this side. */
  setsockopt (fd, SOL_SOCKET, SO_LINGER, &(struct linger){ 1, 0 },
              sizeof (struct linger));
  close (fd);
  return 0;
}
