/* orderkey.h -- how a (score, time, member) triple becomes a sorted-set entry.
 *
 * Redis orders a sorted set by its double score, then by member bytes
 * (memcmp, shorter first). rankd stores:
 *
 *   zset score  = -score          exact: |score| <= 2^53-1 fits a double
 *   zset member = time(6) member  time = Unix ms, 48-bit big-endian
 *
 * so ascending sorted-set order is rank order: higher score first, then the
 * earlier time, then member id ascending bytewise. One double cannot carry
 * score and time exactly (53 + 43 bits); the time lives in the member instead.
 *
 * A board with subscores puts them before the time, 8 bytes each:
 *
 *   zset member = sub1(8) .. subK(8) time(6) member
 *
 * a subscore x as the big-endian bytes of (x XOR 2^63) when it sorts lower
 * first (asc), of their complement when higher first (desc): bytewise order
 * is then the subscore's rank order, over the whole i64 range. The bytes
 * before the member id are the member's prefix: RANK_ORDERKEY_TIME_BYTES +
 * 8 * subscores of them. The board's times hash keeps each member's place:
 *
 *   times hash value = prefix  zset score(8)
 *
 * the zset score as a big-endian 8-byte two's complement integer
 * (update.lua's place and place_of, with Lua's struct), so that an update
 * reads its member's key and score with one HGET.
 */
#ifndef RANK_ORDERKEY_H
#define RANK_ORDERKEY_H

#include <glib.h>

#define RANK_ORDERKEY_TIME_BYTES 6
#define RANK_ORDERKEY_SUBSCORE_BYTES 8

/* The prefix length of a board with n subscores. */
#define RANK_ORDERKEY_PREFIX_BYTES(n)                                          \
  (RANK_ORDERKEY_SUBSCORE_BYTES * (n) + RANK_ORDERKEY_TIME_BYTES)

/* Writes subscore x, sorting lower first when asc, into out. */
void rank_orderkey_encode_subscore (gint64 x, gboolean asc,
                                    guint8 out[RANK_ORDERKEY_SUBSCORE_BYTES]);
gint64
rank_orderkey_decode_subscore (const guint8 in[RANK_ORDERKEY_SUBSCORE_BYTES],
                               gboolean asc);

/* Writes ms (0 <= ms < 2^48) big-endian into out. */
void rank_orderkey_encode_time (gint64 ms,
                                guint8 out[RANK_ORDERKEY_TIME_BYTES]);
gint64 rank_orderkey_decode_time (const guint8 in[RANK_ORDERKEY_TIME_BYTES]);

#define RANK_PLACE_SCORE_BYTES 8

/* Writes zscore (|zscore| <= 2^53-1), a sorted-set score, as the times
 * hash holds it after the prefix. */
void rank_orderkey_encode_place_score (gint64 zscore,
                                       guint8 out[RANK_PLACE_SCORE_BYTES]);
gint64
rank_orderkey_decode_place_score (const guint8 in[RANK_PLACE_SCORE_BYTES]);

/* The sorted-set score stored for a score. */
double rank_orderkey_zscore (gint64 score);

/* Parses a sorted-set score as Redis prints it ("-42",
 * "-9.007199254740991e+15") back into the score; FALSE if it is not an exact
 * integer in range. */
gboolean rank_orderkey_parse_zscore (const char *text, gsize len,
                                     gint64 *score);

#endif /* RANK_ORDERKEY_H */
