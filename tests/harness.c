/* harness.c -- test processes on free ports (see harness.h). */
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "address.h"

#define START_TIMEOUT_US (60 * G_USEC_PER_SEC) /* valgrind starts slowly */
#define STOP_TIMEOUT_US (60 * G_USEC_PER_SEC)
#define PORT_ATTEMPTS 5

static guint16
free_port (void)
{
  for (;;)
    {
      struct sockaddr_in sin = { .sin_family = AF_INET,
                                 .sin_addr.s_addr = htonl (INADDR_LOOPBACK) };
      socklen_t len = sizeof sin;
      int fd = socket (AF_INET, SOCK_STREAM, 0);
      guint16 port;

      g_assert_cmpint (fd, >=, 0);
      g_assert_cmpint (bind (fd, (struct sockaddr *) &sin, sizeof sin), ==, 0);
      g_assert_cmpint (getsockname (fd, (struct sockaddr *) &sin, &len), ==, 0);
      close (fd);
      port = ntohs (sin.sin_port);
      /* A Redis Cluster node also listens on port + 10000 (its bus): above
       * 55535 it refuses to start. Linux hands out ports up to 60999. */
      if (port <= 55535)
        return port;
    }
}

static gboolean
port_answers (guint16 port)
{
  struct sockaddr_in sin = { .sin_family = AF_INET,
                             .sin_port = htons (port),
                             .sin_addr.s_addr = htonl (INADDR_LOOPBACK) };
  int fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  gboolean ok = connect (fd, (struct sockaddr *) &sin, sizeof sin) == 0;

  close (fd);
  return ok;
}

static char *
read_log (const RankTestProcess *p)
{
  char *text = NULL;

  if (!g_file_get_contents (p->log, &text, NULL, NULL))
    return g_strdup ("(no log)");
  return text;
}

/* In the child: die with the test, so an aborted test leaves no servers
 * behind. */
static void
die_with_parent (gpointer data)
{
  (void) data;
  prctl (PR_SET_PDEATHSIG, SIGKILL);
}

static void
spawn (RankTestProcess *p)
{
  g_autoptr (GError) error = NULL;
  int log_fd = open (p->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);

  g_assert_cmpint (log_fd, >=, 0);
  if (!g_spawn_async_with_fds (p->dir, p->argv, NULL,
                               G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_SEARCH_PATH,
                               die_with_parent, NULL, &p->pid, -1, log_fd,
                               log_fd, &error))
    g_error ("cannot start %s: %s", p->argv[0], error->message);
  close (log_fd);
}

/* Waits until the port answers. FALSE if the process exited first (the
 * port was taken, say); aborts the test on a timeout. */
static gboolean
wait_started (RankTestProcess *p)
{
  gint64 end = g_get_monotonic_time () + START_TIMEOUT_US;
  int status;

  while (g_get_monotonic_time () < end)
    {
      if (waitpid (p->pid, &status, WNOHANG) == p->pid)
        {
          g_autofree char *log = read_log (p);

          g_test_message ("%s exited at start (status %d):\n%s", p->argv[0],
                          status, log);
          p->pid = 0;
          return FALSE;
        }
      if (port_answers (p->port))
        return TRUE;
      g_usleep (10 * 1000); /* polling a condition, with a deadline */
    }
  g_autofree char *log = read_log (p);
  g_error ("%s did not answer on port %u in time:\n%s", p->argv[0], p->port,
           log);
}

/* Builds p->argv from p->tmpl, replacing "%PORT%" with p->port. */
static void
expand_argv (RankTestProcess *p)
{
  g_autofree char *port = g_strdup_printf ("%u", p->port);
  guint n = g_strv_length (p->tmpl);

  g_strfreev (p->argv);
  p->argv = g_new0 (char *, n + 1);
  for (guint i = 0; i < n; i++)
    {
      g_auto (GStrv) parts = g_strsplit (p->tmpl[i], "%PORT%", -1);

      p->argv[i] = g_strjoinv (port, parts);
    }
}

/* tmpl has a "%PORT%" placeholder where the port goes. */
static RankTestProcess *
start (GPtrArray *tmpl)
{
  RankTestProcess *p = g_new0 (RankTestProcess, 1);
  g_autoptr (GError) error = NULL;

  p->dir = g_dir_make_tmp ("rankd-test-XXXXXX", &error);
  g_assert_no_error (error);
  p->log = g_build_filename (p->dir, "log", NULL);
  g_ptr_array_add (tmpl, NULL);
  p->tmpl = (char **) g_ptr_array_free (tmpl, FALSE);
  for (int attempt = 0; attempt < PORT_ATTEMPTS; attempt++)
    {
      p->port = free_port ();
      expand_argv (p);
      spawn (p);
      if (wait_started (p))
        return p;
    }
  g_error ("%s did not start after %d attempts", p->tmpl[0], PORT_ATTEMPTS);
}

RankTestProcess *
rank_test_redis_start (const char *const *extra_args)
{
  GPtrArray *argv = g_ptr_array_new ();

  g_ptr_array_add (argv, g_strdup ("redis-server"));
  g_ptr_array_add (argv, g_strdup ("--bind"));
  g_ptr_array_add (argv, g_strdup ("127.0.0.1"));
  g_ptr_array_add (argv, g_strdup ("--port"));
  g_ptr_array_add (argv, g_strdup ("%PORT%"));
  g_ptr_array_add (argv, g_strdup ("--save"));
  g_ptr_array_add (argv, g_strdup (""));
  g_ptr_array_add (argv, g_strdup ("--appendonly"));
  g_ptr_array_add (argv, g_strdup ("no"));
  for (; extra_args && *extra_args; extra_args++)
    g_ptr_array_add (argv, g_strdup (*extra_args));
  return start (argv);
}

RankTestProcess *
rank_test_rankd_start (guint16 redis_port, const char *const *extra_args)
{
  GPtrArray *argv = g_ptr_array_new ();
  const char *wrapper = g_getenv ("RANKD_TEST_WRAPPER");

  if (wrapper != NULL && *wrapper != '\0')
    {
      g_auto (GStrv) words = NULL;

      g_assert_true (g_shell_parse_argv (wrapper, NULL, &words, NULL));
      for (char **w = words; *w; w++)
        g_ptr_array_add (argv, g_strdup (*w));
    }
  /* RANKD_TEST_BIN: another rankd (an older build, to see a test fail
   * before its fix). */
  g_ptr_array_add (argv, g_strdup (g_getenv ("RANKD_TEST_BIN") != NULL
                                       ? g_getenv ("RANKD_TEST_BIN")
                                       : RANKD_BIN));
  g_ptr_array_add (argv, g_strdup ("--listen"));
  g_ptr_array_add (argv, g_strdup ("127.0.0.1:%PORT%"));
  if (redis_port != 0)
    {
      g_ptr_array_add (argv, g_strdup ("--redis"));
      g_ptr_array_add (argv, g_strdup_printf ("127.0.0.1:%u", redis_port));
    }
  else
    {
      g_ptr_array_add (argv, g_strdup ("--data-dir"));
      g_ptr_array_add (argv, g_strdup ("data"));
    }
  for (; extra_args && *extra_args; extra_args++)
    g_ptr_array_add (argv, g_strdup (*extra_args));
  return start (argv);
}

void
rank_test_restart (RankTestProcess *p)
{
  g_assert_cmpint (p->pid, ==, 0);
  spawn (p);
  if (!wait_started (p))
    g_error ("%s did not restart on port %u", p->argv[0], p->port);
}

int
rank_test_stop (RankTestProcess *p)
{
  gint64 end = g_get_monotonic_time () + STOP_TIMEOUT_US;
  int status = -1;

  if (p->pid == 0)
    return 0;
  kill (p->pid, SIGTERM);
  while (waitpid (p->pid, &status, WNOHANG) != p->pid)
    {
      if (g_get_monotonic_time () > end)
        {
          kill (p->pid, SIGKILL);
          waitpid (p->pid, &status, 0);
          g_autofree char *log = read_log (p);
          g_error ("%s ignored SIGTERM:\n%s", p->argv[0], log);
        }
      g_usleep (10 * 1000); /* polling the child's exit, with a deadline */
    }
  p->pid = 0;
  if (!(WIFEXITED (status) && WEXITSTATUS (status) == 0))
    {
      g_autofree char *log = read_log (p);

      g_test_message ("%s exited with status 0x%x; its log:\n%s", p->argv[0],
                      status, log);
    }
  return status;
}

void
rank_test_kill (RankTestProcess *p)
{
  int status;

  if (p->pid == 0)
    return;
  kill (p->pid, SIGKILL);
  waitpid (p->pid, &status, 0);
  p->pid = 0;
}

void
rank_test_process_free (RankTestProcess *p)
{
  g_autofree char *cmd = NULL;

  if (p == NULL)
    return;
  rank_test_kill (p);
  cmd = g_strdup_printf ("rm -rf '%s'", p->dir);
  if (system (cmd) != 0)
    g_test_message ("could not remove %s", p->dir);
  g_strfreev (p->argv);
  g_strfreev (p->tmpl);
  g_free (p->log);
  g_free (p->dir);
  g_free (p);
}

gsize
rank_test_rss_kib (GPid pid)
{
  g_autofree char *path = g_strdup_printf ("/proc/%d/status", (int) pid);
  g_autofree char *text = NULL;
  const char *line;

  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  line = strstr (text, "VmRSS:");
  g_assert_nonnull (line);
  return (gsize) g_ascii_strtoull (line + 6, NULL, 10);
}

RankClient *
rank_test_client (guint16 port, gboolean framed, RankProtocolKind protocol)
{
  g_autoptr (GError) error = NULL;
  RankClient *client = rank_client_connect ("127.0.0.1", port, framed, protocol,
                                            30000, &error);

  g_assert_no_error (error);
  return client;
}

int
rank_test_connect_raw (guint16 port)
{
  struct sockaddr_in sin = { .sin_family = AF_INET,
                             .sin_port = htons (port),
                             .sin_addr.s_addr = htonl (INADDR_LOOPBACK) };
  struct timeval tv = { 10, 0 };
  int fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

  g_assert_cmpint (connect (fd, (struct sockaddr *) &sin, sizeof sin), ==, 0);
  setsockopt (fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt (fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  return fd;
}

gboolean
rank_test_wait_closed (int fd, int timeout_ms)
{
  gint64 end = g_get_monotonic_time () + (gint64) timeout_ms * 1000;
  char buf[4096];

  for (;;)
    {
      struct pollfd pfd = { fd, POLLIN, 0 };
      gint64 left = (end - g_get_monotonic_time ()) / 1000;

      if (left <= 0 || poll (&pfd, 1, (int) left) <= 0)
        return FALSE;
      ssize_t n = recv (fd, buf, sizeof buf, 0);
      if (n <= 0)
        return TRUE;
    }
}

char *
rank_test_unique (const char *prefix)
{
  static gint counter;

  return g_strdup_printf ("%s-%d-%d", prefix, (int) getpid (),
                          g_atomic_int_add (&counter, 1));
}

char *
rank_test_repeat (char ch, gsize n)
{
  char *s = g_malloc (n + 1);

  memset (s, ch, n);
  s[n] = '\0';
  return s;
}

gboolean
rank_test_log_contains (const RankTestProcess *p, const char *text)
{
  g_autofree char *log = NULL;

  return g_file_get_contents (p->log, &log, NULL, NULL)
         && strstr (log, text) != NULL;
}
