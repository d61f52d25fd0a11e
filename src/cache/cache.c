/* cache.c -- the read cache (see cache.h).
 *
 * One mutex guards everything; what it protects is a few hash lookups and
 * list moves per read, far less than a call's decoding and encoding. An
 * answer is an immutable, reference-counted entry, so a worker encodes a
 * hit's rows after letting go of the lock, even if the entry is dropped
 * meanwhile.
 */
#include "cache.h"

#include <string.h>

#include "constants.h"
#include "metrics.h"

/* Bookkeeping an entry costs beyond its rows and strings: the entry, its
 * key, the hash table's node and the two list links, roughly. */
#define ENTRY_OVERHEAD 160
/* What a board's bookkeeping costs beyond its name: the struct, its hash
 * table node and malloc's headers, roughly. Counted with the answers under
 * --read-cache-bytes: reading 500,000 board names once each used to keep
 * 72 MB of these that no bound covered. */
#define BOARD_OVERHEAD (sizeof (Board) + 64)
#define CACHE_DOOR_SLOTS 65536

typedef struct _Board Board;

struct _RankCacheEntry
{
  gatomicrefcount ref;
  RankRow *rows;
  gsize n;
  char *strings; /* the rows' members and data */
  /* Under the cache's lock: */
  char *key;
  gsize bytes;
  gint64 sent_ms;
  GList lru;          /* in cache->lru, most recently used first */
  guint64 generation; /* the board's when its read was sent */
  guint64 used;       /* cache->tick when last served or kept */
  Board *board;       /* which counts it (a board is kept while it has any) */
};

/* A board's bookkeeping lives while the board is read or written, and is
 * counted under --read-cache-bytes like an answer: a board with no answer
 * kept ("idle") goes when the bound needs room and it is older than the
 * least recently used answer. */
struct _Board
{
  char *name;
  guint64 generation;      /* changed by every change; unique in the cache */
  guint64 registered;      /* the epoch its prefixes are registered in */
  guint registered_shards; /* for how many shards */
  guint asked_shards;      /* for how many its registration asks */
  gboolean wanted;         /* in cache->wanted */
  gboolean refused;        /* registration failed in this epoch */
  gboolean tracked;        /* read with read_cache=tracked */
  guint shards;            /* of its options when so read last */
  guint64 deferred;        /* rotations + 1: not asked for until the next */
  gint64 written_us;       /* the last write this rankd acknowledged */
  guint64 used;            /* cache->tick when last read or written */
  guint entries;           /* answers kept */
  GList idle;              /* in cache->idle while it has no answer */
  GList recent;            /* in cache->recent, most recently used first */
};

struct _RankReadCache
{
  GMutex lock;
  gsize max_bytes;
  gsize bytes;
  GHashTable *entries; /* key -> RankCacheEntry */
  GHashTable *boards;  /* name -> Board */
  GQueue lru;
  GQueue recent;       /* every Board, most recently read or written first */
  GQueue idle;         /* Boards with no answer, least recently idle last */
  guint64 tick;        /* counts uses, for the eviction's order */
  guint64 generations; /* the last generation given to any board */
  /* The latest write acknowledged to a board whose bookkeeping went: a
   * board not known may have been written then (reads from replicas). */
  gint64 forgotten_written_us;
  guint64 epoch; /* of the tracking session; 0: none yet */
  gboolean tracking_up;
  gboolean tracking_asked; /* the session was asked to start */
  GPtrArray *wanted;       /* Board *, waiting to be registered */
  guint64 rotations;       /* of the tracked set (rank_read_cache_rotated) */
  RankCacheWantFunc want;
  gpointer want_data;
  /* The doorkeeper: hashes of answer keys that missed, one a slot. An
   * answer is kept only on its key's second miss, so that reads that never
   * come again (GetRank of random members) cost no entry, no eviction. */
  guint32 door[CACHE_DOOR_SLOTS];
};

static void
entry_free (RankCacheEntry *e)
{
  g_free (e->rows);
  g_free (e->strings);
  g_free (e->key);
  g_free (e);
}

void
rank_cache_entry_unref (RankCacheEntry *e)
{
  if (e != NULL && g_atomic_ref_count_dec (&e->ref))
    entry_free (e);
}

const RankRow *
rank_cache_entry_rows (const RankCacheEntry *e, gsize *n)
{
  *n = e->n;
  return e->rows;
}

static void
board_free (gpointer data)
{
  Board *b = data;

  g_free (b->name);
  g_free (b);
}

RankReadCache *
rank_read_cache_new (gsize max_bytes)
{
  RankReadCache *cache = g_new0 (RankReadCache, 1);

  g_mutex_init (&cache->lock);
  cache->max_bytes = max_bytes;
  cache->entries = g_hash_table_new (g_str_hash, g_str_equal);
  cache->boards
      = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, board_free);
  g_queue_init (&cache->lru);
  g_queue_init (&cache->recent);
  g_queue_init (&cache->idle);
  cache->wanted = g_ptr_array_new ();
  return cache;
}

/* ---- under the lock ---- */

static void
drop_entry (RankReadCache *cache, RankCacheEntry *e)
{
  Board *b = e->board;

  g_hash_table_remove (cache->entries, e->key);
  g_queue_unlink (&cache->lru, &e->lru);
  cache->bytes -= e->bytes;
  if (--b->entries == 0)
    g_queue_push_head_link (&cache->idle, &b->idle);
  rank_cache_entry_unref (e);
}

static gsize
board_bytes (const Board *b)
{
  return BOARD_OVERHEAD + strlen (b->name) + 1;
}

/* An idle board's bookkeeping goes. What it knew that matters after: a
 * write to it that reads from replicas must see (kept as the latest of
 * all forgotten ones), and that its answers are stale, which every new
 * board's fresh generation says. */
static void
drop_board (RankReadCache *cache, Board *b)
{
  g_assert (b->entries == 0);
  if (b->wanted)
    g_ptr_array_remove_fast (cache->wanted, b);
  cache->forgotten_written_us
      = MAX (cache->forgotten_written_us, b->written_us);
  g_queue_unlink (&cache->idle, &b->idle);
  g_queue_unlink (&cache->recent, &b->recent);
  cache->bytes -= board_bytes (b);
  g_hash_table_remove (cache->boards, b->name);
}

/* Back under the bound: of the least recently used answer and the least
 * recently used idle board, the older goes first; never in_use, the board
 * the caller holds. Returns the answers evicted. */
static guint
shrink (RankReadCache *cache, Board *in_use)
{
  guint evicted = 0;

  while (cache->bytes > cache->max_bytes)
    {
      RankCacheEntry *e = cache->lru.tail ? cache->lru.tail->data : NULL;
      Board *b = cache->idle.tail ? cache->idle.tail->data : NULL;

      if (b == in_use)
        b = NULL; /* the most recent anyway: all else went */
      if (b != NULL && (e == NULL || b->used <= e->used))
        drop_board (cache, b);
      else if (e != NULL)
        {
          drop_entry (cache, e);
          evicted++;
        }
      else
        break;
    }
  return evicted;
}

static void
report_size (RankReadCache *cache)
{
  rank_metrics_cache_size (cache->bytes, g_hash_table_size (cache->entries));
}

/* A change of board: its answers are stale from now on. They go when next
 * looked up, or as the least recently used: one change is O(1) however
 * many answers the board has (a random GetRank each of a million members
 * would make every update walk them all). */
static void
board_changed (RankReadCache *cache, Board *b)
{
  b->generation = ++cache->generations;
}

static void
drop_all (RankReadCache *cache)
{
  while (cache->lru.head != NULL)
    drop_entry (cache, cache->lru.head->data);
}

static Board *
board_of (RankReadCache *cache, const char *name, gboolean create)
{
  Board *b = g_hash_table_lookup (cache->boards, name);

  if (b == NULL && create)
    {
      b = g_new0 (Board, 1);
      b->name = g_strdup (name);
      /* Never one a read in flight for a forgotten board of that name
       * holds in its ticket. */
      b->generation = ++cache->generations;
      b->written_us = cache->forgotten_written_us;
      b->idle.data = b->recent.data = b;
      g_hash_table_insert (cache->boards, b->name, b);
      g_queue_push_head_link (&cache->idle, &b->idle);
      g_queue_push_head_link (&cache->recent, &b->recent);
      cache->bytes += board_bytes (b);
    }
  return b;
}

/* b is read or written now. */
static void
board_used (RankReadCache *cache, Board *b)
{
  b->used = ++cache->tick;
  g_queue_unlink (&cache->recent, &b->recent);
  g_queue_push_head_link (&cache->recent, &b->recent);
  if (b->entries == 0)
    {
      g_queue_unlink (&cache->idle, &b->idle);
      g_queue_push_head_link (&cache->idle, &b->idle);
    }
}

/* ---- reads ---- */

gboolean
rank_read_cache_wanted (const RankBoardOptions *options)
{
  return options->read_cache_tracked || options->read_cache_ms > 0;
}

/* Length-prefixed parts: no name or member can make two keys collide. */
static void
append_part (GString *key, const char *part)
{
  g_string_append_printf (key, "%zu:%s", strlen (part), part);
}

char *
rank_read_cache_key_top (const char *board, const char *period, gint64 offset,
                         gint n, gboolean with_data)
{
  GString *key = g_string_new ("T");

  append_part (key, board);
  append_part (key, period);
  g_string_append_printf (key, "%" G_GINT64_FORMAT ",%d,%d", offset, n,
                          with_data ? 1 : 0);
  return g_string_free (key, FALSE);
}

char *
rank_read_cache_key_rank (const char *board, const char *period,
                          const char *member)
{
  GString *key = g_string_new ("R");

  append_part (key, board);
  append_part (key, period);
  append_part (key, member);
  return g_string_free (key, FALSE);
}

/* How old an answer may be served. A tracked one too is bounded: Redis
 * reports no change it cannot see key by key (SWAPDB, in Redis 7.0, sends
 * no invalidation at all), and this bounds how long that stays wrong. */
static gint64
max_age_ms (const RankBoardOptions *options)
{
  if (options->read_cache_ms > 0)
    return options->read_cache_ms;
  if (options->read_cache_tracked)
    return RANK_READ_CACHE_TRACKED_MAX_AGE_MS;
  return G_MAXINT64;
}

/* Whether key missed before (the doorkeeper); remembers it if not. */
static gboolean
seen_before (RankReadCache *cache, const char *key)
{
  guint32 h = g_str_hash (key) | 1;
  guint32 *slot = &cache->door[h % CACHE_DOOR_SLOTS];

  if (*slot == h)
    return TRUE;
  *slot = h;
  return FALSE;
}

/* Whether a tracked board's answers may be kept now; asks for its
 * registration when not. */
static gboolean
tracked_now (RankReadCache *cache, Board *b, const RankBoardOptions *options,
             gboolean *ask)
{
  if (cache->tracking_up && b->registered == cache->epoch
      && b->registered_shards >= options->shards)
    return TRUE;
  if (!cache->tracking_up && !cache->tracking_asked)
    *ask = cache->tracking_asked = TRUE;
  if (cache->tracking_up && !b->wanted && !b->refused
      && b->deferred != cache->rotations + 1)
    {
      b->wanted = TRUE;
      b->asked_shards = MAX (b->asked_shards, options->shards);
      g_ptr_array_add (cache->wanted, b);
      *ask = TRUE;
    }
  return FALSE;
}

RankCacheEntry *
rank_read_cache_get (RankReadCache *cache, const char *board,
                     const RankBoardOptions *options, const char *key,
                     RankCacheTicket *ticket)
{
  gint64 now_ms = g_get_monotonic_time () / 1000;
  gint64 max_age = max_age_ms (options);
  RankCacheEntry *e;
  gboolean ask = FALSE, usable = TRUE;
  guint evicted;
  gsize bytes;
  Board *b;

  g_mutex_lock (&cache->lock);
  bytes = cache->bytes;
  b = board_of (cache, board, TRUE);
  board_used (cache, b);
  if (options->read_cache_tracked)
    {
      b->tracked = TRUE;
      b->shards = options->shards;
      usable = tracked_now (cache, b, options, &ask);
    }
  e = usable ? g_hash_table_lookup (cache->entries, key) : NULL;
  if (e != NULL
      && (e->generation != b->generation || now_ms - e->sent_ms > max_age))
    {
      drop_entry (cache, e);
      e = NULL;
    }
  if (e != NULL)
    {
      g_queue_unlink (&cache->lru, &e->lru);
      g_queue_push_head_link (&cache->lru, &e->lru);
      e->used = cache->tick;
      g_atomic_ref_count_inc (&e->ref);
    }
  else
    {
      ticket->keep = usable && seen_before (cache, key);
      ticket->generation = b->generation;
      ticket->epoch = cache->epoch;
      ticket->sent_ms = now_ms;
    }
  /* A board new to the cache costs its bookkeeping. */
  evicted = shrink (cache, b);
  if (cache->bytes != bytes)
    report_size (cache);
  g_mutex_unlock (&cache->lock);
  if (evicted > 0)
    rank_metrics_cache_evicted (evicted);
  rank_metrics_cache_read (e != NULL);
  if (ask && cache->want != NULL)
    cache->want (cache->want_data);
  return e;
}

/* One allocation for the rows' strings; rows point into it. */
static RankCacheEntry *
entry_new (const RankRow *rows, gsize n)
{
  RankCacheEntry *e = g_new0 (RankCacheEntry, 1);
  gsize len = 0;
  char *p;

  g_atomic_ref_count_init (&e->ref);
  for (gsize i = 0; i < n; i++)
    len += rows[i].member_len + (rows[i].data ? rows[i].data_len : 0);
  e->rows = g_memdup2 (rows, n * sizeof *rows);
  e->n = n;
  e->strings = p = g_malloc (MAX (len, 1));
  for (gsize i = 0; i < n; i++)
    {
      memcpy (p, rows[i].member, rows[i].member_len);
      e->rows[i].member = p;
      p += rows[i].member_len;
      if (rows[i].data != NULL)
        {
          memcpy (p, rows[i].data, rows[i].data_len);
          e->rows[i].data = p;
          p += rows[i].data_len;
        }
    }
  e->bytes = ENTRY_OVERHEAD + n * sizeof *rows + len;
  e->lru.data = e;
  return e;
}

void
rank_read_cache_put (RankReadCache *cache, const char *board, const char *key,
                     const RankCacheTicket *ticket, const RankRow *rows,
                     gsize n)
{
  RankCacheEntry *e, *old;
  Board *b;
  guint evicted = 0;

  if (!ticket->keep)
    return;
  e = entry_new (rows, n);
  e->sent_ms = ticket->sent_ms;
  e->bytes += strlen (key);
  g_mutex_lock (&cache->lock);
  b = board_of (cache, board, FALSE);
  if (b == NULL || b->generation != ticket->generation
      || cache->epoch != ticket->epoch || e->bytes > cache->max_bytes)
    {
      g_mutex_unlock (&cache->lock);
      entry_free (e);
      return;
    }
  old = g_hash_table_lookup (cache->entries, key);
  if (old != NULL)
    drop_entry (cache, old);
  e->key = g_strdup (key);
  g_hash_table_insert (cache->entries, e->key, e);
  e->generation = ticket->generation;
  e->board = b;
  if (b->entries++ == 0)
    g_queue_unlink (&cache->idle, &b->idle);
  e->used = ++cache->tick;
  g_queue_push_head_link (&cache->lru, &e->lru);
  cache->bytes += e->bytes;
  evicted = shrink (cache, b);
  report_size (cache);
  g_mutex_unlock (&cache->lock);
  if (evicted > 0)
    rank_metrics_cache_evicted (evicted);
}

/* ---- changes ---- */

static void
changed (RankReadCache *cache, const char *board, gboolean by_redis)
{
  Board *b;

  g_mutex_lock (&cache->lock);
  b = board_of (cache, board, FALSE);
  if (b != NULL)
    board_changed (cache, b);
  g_mutex_unlock (&cache->lock);
  if (b != NULL)
    rank_metrics_cache_dropped (by_redis);
}

void
rank_read_cache_changed (RankReadCache *cache, const char *board)
{
  changed (cache, board, FALSE);
}

void
rank_read_cache_invalidated (RankReadCache *cache, const char *key, gsize len)
{
  const char *open = memchr (key, '{', len);
  const char *close
      = open ? memchr (open, '}', len - (gsize) (open - key)) : NULL;
  g_autofree char *board = NULL;

  if (close == NULL)
    return;
  board = g_strndup (open + 1, (gsize) (close - open - 1));
  if (g_str_has_prefix (key, "rk:s:"))
    {
      char *slash = strrchr (board, '/');

      if (slash == NULL)
        return;
      *slash = '\0';
    }
  changed (cache, board, TRUE);
}

void
rank_read_cache_changed_all (RankReadCache *cache)
{
  GHashTableIter it;
  gpointer b;

  g_mutex_lock (&cache->lock);
  g_hash_table_iter_init (&it, cache->boards);
  while (g_hash_table_iter_next (&it, NULL, &b))
    board_changed (cache, b);
  drop_all (cache);
  report_size (cache);
  g_mutex_unlock (&cache->lock);
  rank_metrics_cache_dropped (TRUE);
}

/* ---- writes, for reads from replicas ---- */

void
rank_read_cache_wrote (RankReadCache *cache, const char *board)
{
  gint64 now = g_get_monotonic_time ();
  Board *b;

  guint evicted;

  g_mutex_lock (&cache->lock);
  b = board_of (cache, board, TRUE);
  board_used (cache, b);
  b->written_us = MAX (b->written_us, now);
  evicted = shrink (cache, b);
  report_size (cache);
  g_mutex_unlock (&cache->lock);
  if (evicted > 0)
    rank_metrics_cache_evicted (evicted);
}

gint64
rank_read_cache_written_at (RankReadCache *cache, const char *board)
{
  gint64 at;
  Board *b;

  g_mutex_lock (&cache->lock);
  b = board_of (cache, board, FALSE);
  at = b != NULL ? b->written_us : cache->forgotten_written_us;
  g_mutex_unlock (&cache->lock);
  return at;
}

/* ---- the tracking session ---- */

void
rank_read_cache_set_want (RankReadCache *cache, RankCacheWantFunc func,
                          gpointer data)
{
  cache->want = func;
  cache->want_data = data;
}

guint64
rank_read_cache_tracking (RankReadCache *cache, gboolean up)
{
  GHashTableIter it;
  gpointer v;
  guint64 epoch;

  g_mutex_lock (&cache->lock);
  cache->epoch++;
  cache->tracking_up = up;
  g_ptr_array_set_size (cache->wanted, 0);
  g_hash_table_iter_init (&it, cache->boards);
  while (g_hash_table_iter_next (&it, NULL, &v))
    {
      Board *b = v;

      board_changed (cache, b);
      b->wanted = b->refused = FALSE;
      b->deferred = 0;
      b->registered_shards = b->asked_shards = 0;
    }
  drop_all (cache);
  report_size (cache);
  epoch = cache->epoch;
  g_mutex_unlock (&cache->lock);
  rank_metrics_tracking (up);
  return epoch;
}

char **
rank_read_cache_take_wanted (RankReadCache *cache, GArray *shards)
{
  GStrvBuilder *names = g_strv_builder_new ();
  char **out;

  g_mutex_lock (&cache->lock);
  for (guint i = 0; i < cache->wanted->len; i++)
    {
      Board *b = cache->wanted->pdata[i];
      guint n = b->asked_shards;

      b->wanted = FALSE;
      g_strv_builder_add (names, b->name);
      g_array_append_val (shards, n);
    }
  g_ptr_array_set_size (cache->wanted, 0);
  g_mutex_unlock (&cache->lock);
  out = g_strv_builder_end (names);
  g_strv_builder_unref (names);
  return out;
}

void
rank_read_cache_registered (RankReadCache *cache, const char *board,
                            guint shards, guint64 epoch)
{
  Board *b;

  g_mutex_lock (&cache->lock);
  b = board_of (cache, board, FALSE);
  if (b != NULL && epoch == cache->epoch && cache->tracking_up)
    {
      b->registered = epoch;
      b->registered_shards = MAX (b->registered_shards, shards);
    }
  g_mutex_unlock (&cache->lock);
}

/* board is not asked for again in this session, or (deferred) until the
 * tracked set's next rotation. */
static void
hold_back (RankReadCache *cache, const char *board, gboolean deferred)
{
  Board *b;

  g_mutex_lock (&cache->lock);
  b = board_of (cache, board, FALSE);
  if (b != NULL && deferred)
    b->deferred = cache->rotations + 1;
  else if (b != NULL)
    b->refused = TRUE;
  g_mutex_unlock (&cache->lock);
}

void
rank_read_cache_refused (RankReadCache *cache, const char *board)
{
  hold_back (cache, board, FALSE);
}

void
rank_read_cache_deferred (RankReadCache *cache, const char *board)
{
  hold_back (cache, board, TRUE);
}

void
rank_read_cache_untracked (RankReadCache *cache, const char *board)
{
  Board *b;

  g_mutex_lock (&cache->lock);
  b = board_of (cache, board, FALSE);
  if (b != NULL && b->registered != 0)
    {
      board_changed (cache, b);
      b->registered = 0;
      b->registered_shards = 0;
    }
  g_mutex_unlock (&cache->lock);
}

void
rank_read_cache_rotated (RankReadCache *cache)
{
  g_mutex_lock (&cache->lock);
  cache->rotations++;
  g_mutex_unlock (&cache->lock);
}

/* Prefixes a board of shards shards takes in the session (tracking.c). */
static guint
slots_of (guint shards)
{
  return shards > 1 ? shards + 1 : 1;
}

char **
rank_read_cache_recent_tracked (RankReadCache *cache, guint max_slots,
                                GArray *shards)
{
  GStrvBuilder *names = g_strv_builder_new ();
  guint slots = 0;
  char **out;

  g_mutex_lock (&cache->lock);
  for (GList *l = cache->recent.head; l != NULL && slots < max_slots;
       l = l->next)
    {
      Board *b = l->data;

      if (!b->tracked || b->refused || slots + slots_of (b->shards) > max_slots)
        continue;
      slots += slots_of (b->shards);
      g_strv_builder_add (names, b->name);
      g_array_append_val (shards, b->shards);
    }
  g_mutex_unlock (&cache->lock);
  out = g_strv_builder_end (names);
  g_strv_builder_unref (names);
  return out;
}

void
rank_read_cache_free (RankReadCache *cache)
{
  if (cache == NULL)
    return;
  while (cache->lru.head != NULL)
    drop_entry (cache, cache->lru.head->data);
  g_hash_table_unref (cache->entries);
  g_hash_table_unref (cache->boards);
  g_ptr_array_unref (cache->wanted);
  g_mutex_clear (&cache->lock);
  g_free (cache);
}
