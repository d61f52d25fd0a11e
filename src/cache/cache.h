/* cache.h -- the read cache: GetTopN pages and GetRank answers of boards
 * with read_cache=tracked or read_cache_ms=N, kept in rankd and answered
 * without Redis.
 *
 * One cache per rankd, shared by its workers (a mutex), so that an update
 * answered by one worker drops the board's answers for all of them before
 * the client hears back: a read through the same rankd after an update it
 * acknowledged always sees it (read-your-writes per rankd).
 *
 * Tracked boards: an answer is kept until Redis reports that a key of the
 * board changed (tracking.h: CLIENT TRACKING in broadcast mode, on the
 * board's key prefixes, invalidations on a subscribed connection), and at
 * most RANK_READ_CACHE_TRACKED_MAX_AGE_MS, for what Redis does not report
 * (SWAPDB). The cache serves a tracked board only while every node's
 * tracking session is up and the board's prefixes are registered in it; an
 * answer is kept only if nothing about the board changed between the
 * moment its read was sent and its reply (the board's generation), and the
 * session did not change either (the epoch). A lost session drops
 * everything.
 *
 * Timed boards (read_cache_ms): an answer is served until it is that old,
 * counted from when its read was sent; no tracking.
 *
 * Memory is bounded by --read-cache-bytes: least recently used answers go
 * first. Sizes count the answer's rows, strings and bookkeeping, and each
 * board's own bookkeeping (kept while the board has answers, else going
 * as the least recently used answer would). An answer
 * is kept from its second miss on (a doorkeeper of key hashes), so that a
 * stream of reads that never repeat fills nothing.
 *
 * It also keeps, per board with read_from=replica, when this rankd last
 * acknowledged a write to it, for the reads that follow (read-your-writes
 * from replicas).
 */
#ifndef RANK_CACHE_H
#define RANK_CACHE_H

#include <glib.h>

#include "config.h"
#include "store.h"

typedef struct _RankReadCache RankReadCache;
typedef struct _RankCacheEntry RankCacheEntry;

/* What a miss takes along to its reply: whether and how the answer may be
 * kept. */
typedef struct
{
  gboolean keep;
  guint64 generation; /* the board's, when the read was sent */
  guint64 epoch;      /* the tracking session's */
  gint64 sent_ms;     /* monotonic */
} RankCacheTicket;

/* The tracking session's side (tracking.c): asked to register boards. */
typedef void (*RankCacheWantFunc) (gpointer data);

RankReadCache *rank_read_cache_new (gsize max_bytes);
void rank_read_cache_free (RankReadCache *cache);

/* Whether options ask for the cache at all. */
gboolean rank_read_cache_wanted (const RankBoardOptions *options);

/* The key of an answer: a GetTopN page or a GetRank of member, of board's
 * period (label: "" for ordinary boards). Free with g_free. */
char *rank_read_cache_key_top (const char *board, const char *period,
                               gint64 offset, gint n, gboolean with_data);
char *rank_read_cache_key_rank (const char *board, const char *period,
                                const char *member);

/* The answer under key, if one may be served now (a reference: unref when
 * done); NULL on a miss, with ticket filled for rank_read_cache_put. A
 * tracked board not yet registered is asked for. Any thread. */
RankCacheEntry *rank_read_cache_get (RankReadCache *cache, const char *board,
                                     const RankBoardOptions *options,
                                     const char *key, RankCacheTicket *ticket);

/* Keeps rows[0..n) under key (copied), if ticket allows and nothing
 * changed meanwhile. */
void rank_read_cache_put (RankReadCache *cache, const char *board,
                          const char *key, const RankCacheTicket *ticket,
                          const RankRow *rows, gsize n);

const RankRow *rank_cache_entry_rows (const RankCacheEntry *entry, gsize *n);
void rank_cache_entry_unref (RankCacheEntry *entry);

/* board changed (an update this rankd applied, or Redis's invalidation):
 * its answers go, and reads in flight will not be kept. */
void rank_read_cache_changed (RankReadCache *cache, const char *board);

/* Redis's invalidation of key (len bytes): its board's answers go, if it
 * is one of rankd's ("rk:{board}:..." or a shard's "rk:s:{board/i}:..."). */
void rank_read_cache_invalidated (RankReadCache *cache, const char *key,
                                  gsize len);

/* Every answer goes (FLUSHALL, FLUSHDB). */
void rank_read_cache_changed_all (RankReadCache *cache);

/* ---- read-your-writes for reads from replicas (backend.h) ---- */

/* This rankd acknowledges a write to board now. */
void rank_read_cache_wrote (RankReadCache *cache, const char *board);

/* When this rankd last acknowledged a write to board (monotonic us; 0:
 * never): a replica that reads for it must have what the primary had
 * then. */
gint64 rank_read_cache_written_at (RankReadCache *cache, const char *board);

/* ---- for the tracking session (tracking.c) ---- */

/* func is called (from any thread, under no lock) when a board wants
 * registering. */
void rank_read_cache_set_want (RankReadCache *cache, RankCacheWantFunc func,
                               gpointer data);

/* The session went up (every node tracks) or down: a new epoch, and
 * everything goes. Returns the new epoch. */
guint64 rank_read_cache_tracking (RankReadCache *cache, gboolean up);

/* Boards waiting to be registered, with the shards of their options
 * (NULL-terminated names; shards[i] for names[i]); the list is emptied. */
char **rank_read_cache_take_wanted (RankReadCache *cache, GArray *shards);

/* board's prefixes (of shards shards) are registered in the session of
 * epoch (ignored if that session is gone): its answers may be kept from
 * now on. */
void rank_read_cache_registered (RankReadCache *cache, const char *board,
                                 guint shards, guint64 epoch);

/* A registration failed: the board is not cached (asked again after a
 * new session). */
void rank_read_cache_refused (RankReadCache *cache, const char *board);

/* The session has no room for board now: it is not cached, and not asked
 * for again until the tracked set was rotated (or a new session). */
void rank_read_cache_deferred (RankReadCache *cache, const char *board);

/* board's prefixes left the session: its answers go and are not kept
 * until it is registered again. */
void rank_read_cache_untracked (RankReadCache *cache, const char *board);

/* The tracked set was rotated: deferred boards may ask again. */
void rank_read_cache_rotated (RankReadCache *cache);

/* The tracked boards most recently read, most recent first, as many as
 * take at most max_slots prefixes (a board of S > 1 shards takes S + 1),
 * with their shards (NULL-terminated; shards[i] for names[i]). */
char **rank_read_cache_recent_tracked (RankReadCache *cache, guint max_slots,
                                       GArray *shards);

#endif /* RANK_CACHE_H */
