/* embedded_redis.c -- a redis-server child in the data directory
 * (see embedded_redis.h).
 *
 * A supervisor thread waits for the child. If it exits while rankd is not
 * stopping, the thread starts it again in the same directory (Redis reloads
 * its append-only file), retrying with back-off; the Redis links reconnect
 * by themselves, as after any lost connection.
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
  char *binary;
  char *socket_path;
  char *log_path;
  RankAddress address;
  int lock_fd;
  GThread *supervisor;
  GMutex lock;
  GCond changed;
  pid_t pid;         /* under lock once the supervisor runs */
  gboolean stopping; /* under lock */
  gboolean exited;   /* under lock: the supervisor reaped the last child */
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

/* The data directory of the embedded Redis should be its owner's only. */
static void
warn_if_shared (const char *dir)
{
  struct stat st;

  if (stat (dir, &st) == 0 && (st.st_mode & 077) != 0)
    g_warning ("data directory %s is open to other users (mode %03o); "
               "rankd's files in it are not (0600), but chmod 700 it",
               dir, (unsigned) (st.st_mode & 0777));
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
      /* Redis's files (the append-only file holds every board) are the
       * owner's alone, whatever the directory's mode. */
      umask (077);
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
wait_until_ready (RankEmbeddedRedis *redis, pid_t pid, const char *log_path,
                  GError **error)
{
  gint64 end = g_get_monotonic_time ()
               + (gint64) RANK_EMBEDDED_START_TIMEOUT_MS * 1000;
  int status;

  while (g_get_monotonic_time () < end)
    {
      if (waitpid (pid, &status, WNOHANG) == pid)
        {
          g_autofree char *tail = log_tail (log_path);

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

/* Starts the child and waits until it answers; its pid, or -1. */
static pid_t
launch (RankEmbeddedRedis *redis, GError **error)
{
  pid_t pid = spawn_redis (redis->binary, redis->socket_path, redis->dir,
                           redis->log_path, error);

  if (pid < 0)
    return -1;
  if (!wait_until_ready (redis, pid, redis->log_path, error))
    {
      kill (pid, SIGKILL);
      waitpid (pid, NULL, 0);
      return -1;
    }
  return pid;
}

/* Waits for the child; restarts it unless rankd is stopping. */
static gpointer
supervise (gpointer data)
{
  RankEmbeddedRedis *redis = data;
  guint backoff_ms = RANK_EMBEDDED_RESTART_MIN_MS;

  for (;;)
    {
      pid_t pid, next = -1;
      int status = 0;

      g_mutex_lock (&redis->lock);
      pid = redis->pid;
      g_mutex_unlock (&redis->lock);
      while (waitpid (pid, &status, 0) < 0 && errno == EINTR)
        ;
      g_mutex_lock (&redis->lock);
      if (redis->stopping)
        break;
      g_mutex_unlock (&redis->lock);
      g_warning ("embedded redis-server (pid %d) %s %d; restarting it",
                 (int) pid, WIFSIGNALED (status) ? "died of signal" : "exited",
                 WIFSIGNALED (status) ? WTERMSIG (status)
                                      : WEXITSTATUS (status));
      while (next < 0)
        {
          g_autoptr (GError) error = NULL;
          gint64 until;

          next = launch (redis, &error);
          if (next >= 0)
            break;
          g_warning ("embedded redis-server did not restart: %s; again in "
                     "%u ms",
                     error->message, backoff_ms);
          until = g_get_monotonic_time () + (gint64) backoff_ms * 1000;
          backoff_ms = MIN (backoff_ms * 2, RANK_EMBEDDED_RESTART_MAX_MS);
          g_mutex_lock (&redis->lock);
          while (!redis->stopping
                 && g_cond_wait_until (&redis->changed, &redis->lock, until))
            ;
          if (redis->stopping)
            {
              redis->pid = -1;
              goto out;
            }
          g_mutex_unlock (&redis->lock);
        }
      backoff_ms = RANK_EMBEDDED_RESTART_MIN_MS;
      g_mutex_lock (&redis->lock);
      redis->pid = next;
      g_mutex_unlock (&redis->lock);
      g_message ("embedded redis-server restarted (pid %d)", (int) next);
    }
  /* Stopping, and the child is gone. */
  redis->pid = -1;
out:
  redis->exited = TRUE;
  g_cond_broadcast (&redis->changed);
  g_mutex_unlock (&redis->lock);
  return NULL;
}

RankEmbeddedRedis *
rank_embedded_redis_start (const char *data_dir, GError **error)
{
  RankEmbeddedRedis *redis = g_new0 (RankEmbeddedRedis, 1);
  g_autofree char *address = NULL;

  g_mutex_init (&redis->lock);
  g_cond_init (&redis->changed);
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
  warn_if_shared (redis->dir);

  redis->binary = g_strdup (g_getenv ("RANKD_REDIS_SERVER"));
  if (redis->binary == NULL)
    redis->binary = g_find_program_in_path ("redis-server");
  if (redis->binary == NULL)
    {
      g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
                   "redis-server not found on PATH (apt-get install "
                   "redis-server), and --redis was not given");
      goto fail;
    }
  redis->socket_path
      = g_build_filename (redis->dir, RANK_EMBEDDED_SOCKET, NULL);
  address = g_strconcat ("unix:", redis->socket_path, NULL);
  if (!rank_address_parse (address, 0, &redis->address, error))
    goto fail;
  redis->log_path = g_build_filename (redis->dir, "redis.log", NULL);
  redis->pid = launch (redis, error);
  if (redis->pid < 0)
    goto fail;
  g_message ("embedded redis-server (pid %d) on %s", (int) redis->pid,
             redis->socket_path);
  redis->supervisor = g_thread_new ("rankd-redis", supervise, redis);
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

/* Without a supervisor (start failed half-way): stop the child here. */
static void
stop_unsupervised (RankEmbeddedRedis *redis)
{
  if (redis->pid > 0)
    {
      kill (redis->pid, SIGKILL);
      waitpid (redis->pid, NULL, 0);
    }
}

void
rank_embedded_redis_stop (RankEmbeddedRedis *redis)
{
  if (redis == NULL)
    return;
  if (redis->supervisor != NULL)
    {
      gint64 end = g_get_monotonic_time ()
                   + (gint64) RANK_EMBEDDED_STOP_TIMEOUT_MS * 1000;
      pid_t termed = 0;

      /* SIGTERM: Redis finishes its append-only file and exits; the
       * supervisor reaps it and, seeing stopping, does not restart it. A
       * restart in progress may still finish: the loop kills that child. */
      g_mutex_lock (&redis->lock);
      redis->stopping = TRUE;
      g_cond_broadcast (&redis->changed);
      while (!redis->exited)
        {
          if (redis->pid > 0 && redis->pid != termed)
            {
              kill (redis->pid, SIGTERM);
              termed = redis->pid;
            }
          else if (redis->pid > 0 && g_get_monotonic_time () > end)
            {
              g_warning ("embedded redis-server (pid %d) ignored SIGTERM for "
                         "%d ms; killing it",
                         (int) redis->pid, RANK_EMBEDDED_STOP_TIMEOUT_MS);
              kill (redis->pid, SIGKILL);
            }
          g_cond_wait_until (&redis->changed, &redis->lock,
                             g_get_monotonic_time () + 100 * 1000);
        }
      g_mutex_unlock (&redis->lock);
      g_thread_join (redis->supervisor);
      g_message ("embedded redis-server stopped");
    }
  else
    stop_unsupervised (redis);
  if (redis->lock_fd >= 0)
    close (redis->lock_fd);
  rank_address_clear (&redis->address);
  g_mutex_clear (&redis->lock);
  g_cond_clear (&redis->changed);
  g_free (redis->binary);
  g_free (redis->socket_path);
  g_free (redis->log_path);
  g_free (redis->dir);
  g_free (redis);
}
