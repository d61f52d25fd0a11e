/* calls.h -- calling rankd from tests through the generated C client, with
 * every outcome (result, declared exception, TApplicationException) as a
 * Result the test can assert on. A transport failure aborts the test.
 */
#ifndef RANK_TEST_CALLS_H
#define RANK_TEST_CALLS_H

#include <hiredis/hiredis.h>

#include "api.h"
#include "harness.h"

typedef enum
{
  OK,
  INVALID,
  NOT_FOUND,
  UNAVAILABLE,
  APP_ERROR,
} Kind;

extern const char *const kind_names[];

typedef struct
{
  Kind kind;
  char *message;
  gint64 score;
  gint64 rank;
  gboolean has_rank;
  gboolean applied;
  guint n_subscores; /* Update's response, GetRank's entry */
  gint64 subscores[8];
} Result;

void result_clear (Result *r);

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (Result, result_clear)

/* update_on's mode and ts when the request leaves them unset. */
#define NO_MODE 0
#define NO_TIME G_MININT64

Result update_on (RankClient *c, const char *board, const char *member,
                  gint64 value, const char *rid, int mode, gint64 ts);

/* The request update_on sends, for a test to add to (subscores, data...)
 * and send with update_request_on, which leaves it the caller's. */
rankUpdateRequest *update_request_new (const char *board, const char *member,
                                       gint64 value, const char *rid, int mode,
                                       gint64 ts);
Result update_request_on (RankClient *c, rankUpdateRequest *req);

Result get_rank_on (RankClient *c, const char *board, const char *member);

/* GetRank of a past period of a periodic board. */
Result get_rank_back_on (RankClient *c, const char *board, const char *member,
                         gint32 periods_back);

/* Returns the page (rankEntry objects), or NULL with r describing why. */
GPtrArray *top_on (RankClient *c, const char *board, gint32 n, gint32 offset,
                   Result *r);

/* GetTopN of the board's rolling window (window=true). */
GPtrArray *top_window_on (RankClient *c, const char *board, gint32 n,
                          gint32 offset, Result *r);
GPtrArray *top_back_on (RankClient *c, const char *board, gint32 n,
                        gint32 offset, gint32 periods_back, Result *r);

/* GetTopN asking for the members' data. */
GPtrArray *top_data_on (RankClient *c, const char *board, gint32 n,
                        gint32 offset, Result *r);

/* What update_until_acknowledged met on the way. */
typedef struct
{
  guint unavailable;
  guint transport_errors;
  guint not_applied; /* acknowledged as already applied: a retry */
} RetryStats;

/* Sends an INCREMENT of member by delta until rankd at port acknowledges
 * it, retrying every Unavailable and transport error with the same request
 * id (a new connection after a transport error; *client may be NULL at
 * first), RETRY_PAUSE_MS apart; fails the test past deadline (monotonic
 * us). *unavailable_total, if set, counts Unavailable answers atomically. */
void update_until_acknowledged (RankClient **client, guint16 port,
                                const char *board, const char *member,
                                gint64 delta, const char *rid, gint64 deadline,
                                RetryStats *stats, gint *unavailable_total);

void assert_ok (const Result *r);

/* r is a kind failure whose message contains want (unless NULL). */
void assert_fails (const Result *r, Kind kind, const char *want);

redisContext *redis_connect (guint16 port);

/* Calls encoded by hand (framed, strict binary): frame_begin writes the
 * frame's room for its length and the message header, the frame_put_*
 * functions a field header (frame_field) or a value, frame_end the stop
 * and the length. For bytes the generated client would never send. */
GByteArray *frame_begin (const char *method, gint32 seqid);
void frame_put_u8 (GByteArray *b, guint8 v);
void frame_put_u32 (GByteArray *b, guint32 v);
void frame_put_str (GByteArray *b, const char *s);
void frame_field (GByteArray *b, guint8 type, guint8 id);
/* Every method's args hold one request struct: its fields go between
 * these two. */
void frame_request (GByteArray *b);
void frame_request_end (GByteArray *b);
void frame_end (GByteArray *b);

/* Stops p and asserts it exited 0 (under valgrind: no errors). */
void stop_checked (RankTestProcess *p);

/* A redis-server and a rankd with config_text as its --config file (and a
 * fixed --random-seed), and a client: what test programs with their own
 * boards share. */
typedef struct
{
  RankTestProcess *redis;
  RankTestProcess *rankd;
  RankClient *client;
  char *dir;
  char *config;
} RankTestBed;

void rank_test_bed_start (RankTestBed *bed, const char *config_text);

/* Stops rankd (asserting a clean exit) and Redis; removes the files. */
void rank_test_bed_stop (RankTestBed *bed);

/* The tests' argument lists, as the methods had them before each took one
 * request struct: each builds the request and calls the generated client. */
gboolean positional_get_around (rankRankingIf *iface, GPtrArray **out,
                                const char *board, const char *member,
                                gint32 radius, gint32 periods_back,
                                gboolean with_data,
                                rankInvalidArgument **invalid,
                                rankNotFound **not_found,
                                rankUnavailable **unavailable, GError **error);
gboolean positional_get_ranks (rankRankingIf *iface, GPtrArray **out,
                               const char *board, GPtrArray *members,
                               gint32 periods_back,
                               rankInvalidArgument **invalid,
                               rankUnavailable **unavailable, GError **error);
gboolean positional_remove (rankRankingIf *iface, rankRemoveResponse **out,
                            const char *board, const char *member,
                            const char *request_id,
                            rankInvalidArgument **invalid,
                            rankUnavailable **unavailable, GError **error);
gboolean positional_count (rankRankingIf *iface, gint64 *out, const char *board,
                           gint32 periods_back, rankInvalidArgument **invalid,
                           rankUnavailable **unavailable, GError **error);
gboolean positional_count_between (rankRankingIf *iface, gint64 *out,
                                   const char *board, gint64 min_score,
                                   gint64 max_score, gint32 periods_back,
                                   rankInvalidArgument **invalid,
                                   rankUnavailable **unavailable,
                                   GError **error);
gboolean positional_get_percentile (
    rankRankingIf *iface, double *out, const char *board, const char *member,
    gint32 periods_back, rankInvalidArgument **invalid,
    rankNotFound **not_found, rankUnavailable **unavailable, GError **error);
gboolean positional_get_score_at_percentile (
    rankRankingIf *iface, gint64 *out, const char *board, double pct,
    gint32 periods_back, rankInvalidArgument **invalid,
    rankNotFound **not_found, rankUnavailable **unavailable, GError **error);
gboolean positional_sample (rankRankingIf *iface, GPtrArray **out,
                            const char *board, gint64 min_score,
                            gint64 max_score, gint32 count, gint32 periods_back,
                            rankInvalidArgument **invalid,
                            rankUnavailable **unavailable, GError **error);
gboolean positional_set_member_data (rankRankingIf *iface, const char *board,
                                     const char *member, GHashTable *data,
                                     rankInvalidArgument **invalid,
                                     rankNotFound **not_found,
                                     rankUnavailable **unavailable,
                                     GError **error);
gboolean positional_get_member_data (
    rankRankingIf *iface, GHashTable **out, const char *board,
    const char *member, gint32 periods_back, rankInvalidArgument **invalid,
    rankNotFound **not_found, rankUnavailable **unavailable, GError **error);
gboolean positional_get_rank (rankRankingIf *iface, rankEntry **out,
                              const char *board, const char *member,
                              gint32 periods_back,
                              rankInvalidArgument **invalid,
                              rankNotFound **not_found,
                              rankUnavailable **unavailable, GError **error);
gboolean positional_send_get_rank (rankRankingIf *iface, const char *board,
                                   const char *member, gint32 periods_back,
                                   GError **error);
gboolean positional_send_get_top_n (rankRankingIf *iface, const char *board,
                                    gint32 n, gint32 offset,
                                    gint32 periods_back, gboolean with_data,
                                    GError **error);

#endif /* RANK_TEST_CALLS_H */
