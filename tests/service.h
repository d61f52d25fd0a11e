/* service.h -- what the service tests (test_service_*.c) share: one
 * redis-server, one rankd and one client on it, and calls on that client.
 *
 * Most tests use the shared rankd and keep apart by board name; tests that
 * need other flags or that kill processes start their own. Each program
 * starts its own shared pair, so the programs can run one at a time or side
 * by side. Run under valgrind by setting RANKD_TEST_WRAPPER (see
 * tests/CMakeLists.txt).
 */
#ifndef RANK_TEST_SERVICE_H
#define RANK_TEST_SERVICE_H

#include "calls.h"
#include "harness.h"

extern RankTestProcess *redis;
extern RankTestProcess *rankd;
extern RankClient *client;

/* g_test_init, then the shared redis-server, rankd and client. */
void service_start (int *argc, char ***argv);

/* g_test_run; then stops the shared rankd, asserting a clean exit (under
 * valgrind: no errors, no definite leak), and Redis. Returns the status. */
int service_run (void);

/* ---- calling the shared rankd ---- */

Result update (const char *board, const char *member, gint64 value,
               const char *rid, int mode, gint64 ts);
Result get_rank (const char *board, const char *member);

/* GetTopN's page; a failure fails the test. */
GPtrArray *top (const char *board, gint32 n, gint32 offset);

/* r is an OK Update with this score, rank and applied; r is cleared. */
void assert_update (Result r, gint64 score, gint64 rank, gboolean applied);

/* GetRank of member answers this score and rank. */
void assert_rank (const char *board, const char *member, gint64 score,
                  gint64 rank);

/* The shared rankd's resident memory, in KiB. */
gsize rankd_rss (void);

/* A new connection to the shared rankd is served (an Update succeeds). */
void assert_still_serving (void);

#endif /* RANK_TEST_SERVICE_H */
