/* harness.h -- real redis-server and rankd processes for tests.
 *
 * Every process gets a free loopback port and its own temporary directory;
 * starting waits until the port answers (never a fixed sleep), and fails the
 * test with the process's log if it exits or does not answer in time.
 *
 * RANKD_TEST_WRAPPER (e.g. "valgrind --error-exitcode=99 ...") is put in
 * front of every rankd started, so the same tests run under valgrind.
 * RANKD_TEST_BIN runs another rankd than the one built with the tests (an
 * older build: a test of a fix must fail on it).
 */
#ifndef RANK_TEST_HARNESS_H
#define RANK_TEST_HARNESS_H

#include <glib.h>

#include "client.h"

typedef struct
{
  GPid pid;
  guint16 port;
  char *dir;
  char *log;
  char **tmpl; /* argv with "%PORT%" */
  char **argv;
} RankTestProcess;

/* redis-server on 127.0.0.1:<free port>, no persistence unless extra_args
 * (NULL-terminated, may be NULL) say otherwise. */
RankTestProcess *rank_test_redis_start (const char *const *extra_args);

/* rankd on 127.0.0.1:<free port> with --redis 127.0.0.1:redis_port (or its
 * embedded Redis in a temporary data dir when redis_port is 0), plus
 * extra_args. */
RankTestProcess *rank_test_rankd_start (guint16 redis_port,
                                        const char *const *extra_args);

/* The same rankd command again (after stop), on the same port. */
void rank_test_restart (RankTestProcess *process);

/* SIGTERM, wait (bounded), return the exit status as from waitpid. */
int rank_test_stop (RankTestProcess *process);

/* SIGKILL and reap. */
void rank_test_kill (RankTestProcess *process);

void rank_test_process_free (RankTestProcess *process);

/* Whether the process's log (stdout and stderr) contains text. */
gboolean rank_test_log_contains (const RankTestProcess *process,
                                 const char *text);

/* Resident memory of a process, in KiB, from /proc. */
gsize rank_test_rss_kib (GPid pid);

/* A client for rankd at port; asserts the connection succeeds. */
RankClient *rank_test_client (guint16 port, gboolean framed,
                              RankProtocolKind protocol);

/* A raw TCP connection to 127.0.0.1:port (blocking, 10 s timeouts). */
int rank_test_connect_raw (guint16 port);

/* TRUE once the peer closed fd (read returned 0 or an error) within
 * timeout_ms, discarding any bytes that arrive first. */
gboolean rank_test_wait_closed (int fd, int timeout_ms);

/* n copies of ch, NUL-terminated (for names at and past a limit). */
char *rank_test_repeat (char ch, gsize n);

/* A name unique in this run, for boards: prefix + counter. */
char *rank_test_unique (const char *prefix);

#endif /* RANK_TEST_HARNESS_H */
