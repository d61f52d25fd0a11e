/* embedded_redis.c -- a redis-server child in the data directory
 * (see embedded_redis.h).
 */
#include "embedded_redis.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "error.h"
#include "constants.h"

struct _RankEmbeddedRedis
{
  char *dir;
  RankAddress address;
  int lock_fd;
  pid_t pid;
};

static gboolean
lock_dir (RankEmbeddedRedis *redis, GError **error)
{
  g_autofree char *path = g_build_filename (redis->dir, "rankd.lock", NULL);

  redis->lock_fd = open (path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (redis->lock_fd < 0)
    {
      g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID, "cannot open %s: %s",
                   path, g_strerror (errno));
      return FALSE;
    }
  if (flock (redis->lock_fd, LOCK_EX | LOCK_NB) < 0)
    {
      g_set_error (
          error, RANK_ERROR, RANK_ERROR_INVALID,
          "data directory %s is in use by another rankd (%s is locked)",
          redis->dir, path);
      return FALSE;
    }
  return TRUE;
}

static pid_t
spawn (char **argv, const char *log_path, GError **error)
{
  int log_fd = open (log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  pid_t parent = getpid ();
  sigset_t none;
  pid_t pid;

  if (log_fd < 0)
    {
      g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID, "cannot open %s: %s",
                   log_path, g_strerror (errno));
      return -1;
    }
  pid = fork ();
  if (pid == 0)
    {
      /* Only async-signal-safe calls between fork and exec. rankd blocks
       * SIGINT/SIGTERM (they arrive through a signalfd); Redis must not. */
      sigemptyset (&none);
      sigprocmask (SIG_SETMASK, &none, NULL);
      prctl (PR_SET_PDEATHSIG, SIGTERM);
      if (getppid () != parent)
        _exit (127);
      dup2 (log_fd, STDOUT_FILENO);
      dup2 (log_fd, STDERR_FILENO);
      /* Not in rankd's process group: a Ctrl-C reaches rankd, which then
       * stops Redis in order, after its own connections drained. */
      setpgid (0, 0);
      execv (argv[0], argv);
      _exit (127);
    }
  close (log_fd);
  if (pid < 0)
    g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID, "fork failed: %s",
                 g_strerror (errno));
  return pid;
}

static pid_t
spawn_redis (char *binary, char *socket_path, char *dir, const char *log_path,
             GError **error)
{
  /* clang-format off */
  char *argv[] = {
    binary,
    "--port", "0",
    "--unixsocket", socket_path,
    "--unixsocketperm", "700",
    "--dir", dir,
    "--appendonly", "yes",
    "--appendfsync", "everysec",
    "--save", "",
    "--daemonize", "no",
    NULL,
  };
  /* clang-format on */

  return spawn (argv, log_path, error);
}

static char *
log_tail (const char *path)
{
  g_autofree char *text = NULL;
  gsize len = 0;

  if (!g_file_get_contents (path, &text, &len, NULL) || len == 0)
    return g_strdup ("(empty log)");
  return g_strdup (text + (len > 600 ? len - 600 : 0));
}

static gboolean
answers_ping (const RankAddress *address)
{
  g_autoptr (GError) error = NULL;
  char buf[16];
  int fd = rank_address_connect (address, 1000, &error);
  gboolean ok = FALSE;

  if (fd < 0)
    return FALSE;
  /* Blocking is fine here: the child is ours and the socket is local. */
  fcntl (fd, F_SETFL, fcntl (fd, F_GETFL) & ~O_NONBLOCK);
  if (write (fd, "PING\r\n", 6) == 6)
    {
      ssize_t n = read (fd, buf, sizeof buf - 1);

      ok = n >= 5 && memcmp (buf, "+PONG", 5) == 0;
    }
  close (fd);
  return ok;
}

static gboolean
wait_until_ready (RankEmbeddedRedis *redis, const char *log_path,
                  GError **error)
{
  gint64 end = g_get_monotonic_time ()
               + (gint64) RANK_EMBEDDED_START_TIMEOUT_MS * 1000;
  int status;

  while (g_get_monotonic_time () < end)
    {
      if (waitpid (redis->pid, &status, WNOHANG) == redis->pid)
        {
          g_autofree char *tail = log_tail (log_path);

          redis->pid = -1;
          g_set_error (
              error, RANK_ERROR, RANK_ERROR_UNAVAILABLE,
              "redis-server exited at start (status %d); end of %s:\n%s",
              status, log_path, tail);
          return FALSE;
        }
      if (answers_ping (&redis->address))
        return TRUE;
      g_usleep (20 * 1000); /* polling a condition, with a deadline */
    }
  g_set_error (error, RANK_ERROR, RANK_ERROR_UNAVAILABLE,
               "redis-server did not answer within %d ms; see %s",
               RANK_EMBEDDED_START_TIMEOUT_MS, log_path);
  return FALSE;
}

RankEmbeddedRedis *
rank_embedded_redis_start (const char *data_dir, GError **error)
{
  RankEmbeddedRedis *redis = g_new0 (RankEmbeddedRedis, 1);
  g_autofree char *binary = NULL;
  g_autofree char *log_path = NULL;
  g_autofree char *socket_path = NULL;
  g_autofree char *address = NULL;

  redis->pid = -1;
  redis->lock_fd = -1;
  redis->dir = g_canonicalize_filename (data_dir, NULL);
  if (g_mkdir_with_parents (redis->dir, 0700) < 0)
    {
      g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
                   "cannot create data directory %s: %s", redis->dir,
                   g_strerror (errno));
      goto fail;
    }
  if (!lock_dir (redis, error))
    goto fail;

  binary = g_strdup (g_getenv ("RANKD_REDIS_SERVER"));
  if (binary == NULL)
    binary = g_find_program_in_path ("redis-server");
  if (binary == NULL)
    {
      g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
                   "redis-server not found on PATH (apt-get install "
                   "redis-server), and --redis was not given");
      goto fail;
    }
  socket_path = g_build_filename (redis->dir, RANK_EMBEDDED_SOCKET, NULL);
  address = g_strconcat ("unix:", socket_path, NULL);
  if (!rank_address_parse (address, 0, &redis->address, error))
    goto fail;
  log_path = g_build_filename (redis->dir, "redis.log", NULL);
  redis->pid = spawn_redis (binary, socket_path, redis->dir, log_path, error);
  if (redis->pid < 0 || !wait_until_ready (redis, log_path, error))
    goto fail;
  g_message ("embedded redis-server (pid %d) on %s", (int) redis->pid,
             socket_path);
  return redis;

fail:
  rank_embedded_redis_stop (redis);
  return NULL;
}

const RankAddress *
rank_embedded_redis_address (RankEmbeddedRedis *redis)
{
  return &redis->address;
}

void
rank_embedded_redis_stop (RankEmbeddedRedis *redis)
{
  if (redis == NULL)
    return;
  if (redis->pid > 0)
    {
      gint64 end = g_get_monotonic_time ()
                   + (gint64) RANK_EMBEDDED_STOP_TIMEOUT_MS * 1000;
      int status;
      gboolean gone = FALSE;

      kill (redis->pid, SIGTERM);
      while (!gone && g_get_monotonic_time () < end)
        {
          gone = waitpid (redis->pid, &status, WNOHANG) == redis->pid;
          if (!gone)
            g_usleep (10 * 1000); /* waiting for the child's exit, bounded */
        }
      if (!gone)
        {
          g_warning ("embedded redis-server (pid %d) ignored SIGTERM for %d "
                     "ms; killing it",
                     (int) redis->pid, RANK_EMBEDDED_STOP_TIMEOUT_MS);
          kill (redis->pid, SIGKILL);
          waitpid (redis->pid, &status, 0);
        }
      else
        g_message ("embedded redis-server stopped");
    }
  if (redis->lock_fd >= 0)
    close (redis->lock_fd);
  rank_address_clear (&redis->address);
  g_free (redis->dir);
  g_free (redis);
}
