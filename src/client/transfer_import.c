/* transfer_import.c -- rankctl import: a file's records read, ordered,
 * grouped and sent over several connections (see transfer.h). */
#include "transfer_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "api.h"
#include "constants.h"
#include "error.h"

/* What the connections of an import share: the totals, and the progress
 * shown from them. */
typedef struct
{
  GMutex lock;
  RankImportStats *stats;
  RankImportProgress progress;
  gpointer progress_data;
} Shared;

/* One connection's part of an import: the records whose member hashes to
 * it, so that one member's records keep the file's order. */
typedef struct
{
  RankClient *client;
  const char *board;
  GPtrArray *entries;
  GArray *lines;
  const char *digest;
  /* The file's groups (GArray of guint into entries), or NULL: todo and
   * retry then hold entries, else groups. */
  GPtrArray *groups; /* grows (under shared->lock) */
  guint32 max_frame; /* rankd's: each call fits in it */
  GArray *todo;      /* guint: into entries, or into groups */
  GArray *retry;     /* those answered Unavailable */
  Shared *shared;
  GError *error;
} Lane;

/* Adds what one answer counted to the totals, and shows them. */
static void
lane_count (Lane *lane, const RankImportStats *delta)
{
  Shared *s = lane->shared;

  g_mutex_lock (&s->lock);
  s->stats->applied += delta->applied;
  s->stats->repeated += delta->repeated;
  s->stats->refused += delta->refused;
  if (s->progress != NULL)
    s->progress (s->stats, s->progress_data);
  g_mutex_unlock (&s->lock);
}

/* Sends the lane's records, keeping RANK_TRANSFER_IN_FLIGHT calls in
 * flight: the next call leaves as soon as the oldest is answered, so
 * rankctl encodes while rankd and Redis work. */
static gpointer
lane_run (gpointer data)
{
  Lane *lane = data;
  RankClientTransport *t = rank_client_get_transport (lane->client);
  RankImportFlight flights[RANK_TRANSFER_GROUPS_IN_FLIGHT];
  guint window = lane->groups != NULL ? RANK_TRANSFER_GROUPS_IN_FLIGHT
                                      : RANK_TRANSFER_IN_FLIGHT;
  guint next = 0, sent = 0, done = 0;
  GArray *todo = lane->todo;
  gboolean ok = TRUE;

  G_STATIC_ASSERT (RANK_TRANSFER_IN_FLIGHT <= RANK_TRANSFER_GROUPS_IN_FLIGHT);
  G_STATIC_ASSERT (RANK_TRANSFER_GROUP <= RANK_GROUP_MAX_ITEMS);
  while (ok && (done < sent || next < todo->len))
    {
      /* Fill the window; the calls of one fill leave in one write. */
      rank_client_transport_cork (t);
      for (; ok && sent - done < window && next < todo->len; sent++)
        {
          RankImportFlight *f = &flights[sent % window];

          if (lane->groups != NULL)
            {
              f->group = (gint) g_array_index (todo, guint, next++);
              g_mutex_lock (&lane->shared->lock);
              f->index = g_array_copy (lane->groups->pdata[f->group]);
              g_mutex_unlock (&lane->shared->lock);
            }
          else
            {
              guint take = rank_import_records_that_fit (
                  lane->board, lane->entries, todo, next, RANK_TRANSFER_BATCH,
                  lane->max_frame);

              f->group = -1;
              f->index = g_array_sized_new (FALSE, FALSE, sizeof (guint), take);
              g_array_append_vals (f->index, &g_array_index (todo, guint, next),
                                   take);
              next += take;
            }
          ok = rank_import_send_flight (lane->client, lane->board,
                                        lane->entries, lane->digest, f,
                                        &lane->error);
        }
      ok = rank_client_transport_uncork (t, ok ? &lane->error : NULL) && ok;
      if (ok && done < sent)
        {
          RankImportFlight *f = &flights[done % window];
          RankImportStats delta = { 0 };
          g_autoptr (GArray) held = g_array_new (FALSE, FALSE, sizeof (guint));

          ok = rank_import_recv_flight (lane->client, lane->entries,
                                        lane->lines, f, lane->retry, held,
                                        &delta, &lane->error);
          /* A group with a refused record: the others go again, as a group
           * of their own (the same one on every run of the file). */
          if (ok && held->len > 0)
            {
              guint g;

              g_mutex_lock (&lane->shared->lock);
              g = lane->groups->len;
              g_ptr_array_add (lane->groups, g_steal_pointer (&held));
              g_mutex_unlock (&lane->shared->lock);
              g_array_append_val (todo, g);
            }
          g_array_unref (f->index);
          f->index = NULL;
          done++;
          if (ok)
            lane_count (lane, &delta);
        }
    }
  for (; done < sent; done++)
    g_clear_pointer (&flights[done % window].index, g_array_unref);
  return NULL;
}

static gint
index_compare (gconstpointer a, gconstpointer b)
{
  guint x = *(const guint *) a, y = *(const guint *) b;

  return x < y ? -1 : x > y;
}

/* Sends the records listed in todo over RANK_TRANSFER_CONNECTIONS
 * connections (client's and more like it), one thread each: rankd decodes
 * one UpdateBatch of a connection at a time, so more connections keep its
 * workers and Redis busy together. Those answered Unavailable end in
 * retry, in record order. */
/* The lanes of count records: RANK_TRANSFER_BATCH records each, at most
 * RANK_TRANSFER_CONNECTIONS. */
static guint
lanes_for (guint count)
{
  return MAX (1, MIN (RANK_TRANSFER_CONNECTIONS, count / RANK_TRANSFER_BATCH));
}

/* The lane of record k among n, by its member's hash (hashes: taken as
 * the file was read, so that the records, sent in another order, are not
 * read again for it). */
static guint
lane_of (GArray *hashes, guint k, guint n)
{
  return g_array_index (hashes, guint, k) % n;
}

/* The calls recorded as a whole that an import of entries makes, the same
 * every time (for the same max_frame): RANK_TRANSFER_GROUP records of one
 * lane a call, fewer if they would not fit in max_frame, in the order of
 * order (send_order). */
static GPtrArray *
make_groups (const char *board, GPtrArray *entries, GArray *hashes,
             GArray *order, guint32 max_frame)
{
  GPtrArray *groups = g_ptr_array_new_with_free_func (
      (GDestroyNotify) (void (*) (void)) g_array_unref);
  guint n = lanes_for (hashes->len);
  GArray *open[RANK_TRANSFER_CONNECTIONS] = { NULL };
  gsize bytes[RANK_TRANSFER_CONNECTIONS] = { 0 };
  gsize board_len = strlen (board);

  for (guint i = 0; i < order->len; i++)
    {
      guint k = g_array_index (order, guint, i);
      guint lane = lane_of (hashes, k, n);
      gsize size = rank_import_record_size (board_len, entries->pdata[k]);

      if (open[lane] == NULL || open[lane]->len == RANK_TRANSFER_GROUP
          || bytes[lane] + size > max_frame)
        {
          open[lane] = g_array_sized_new (FALSE, FALSE, sizeof (guint),
                                          RANK_TRANSFER_GROUP);
          g_ptr_array_add (groups, open[lane]);
          bytes[lane] = RANK_IMPORT_CALL_OVERHEAD;
        }
      g_array_append_val (open[lane], k);
      bytes[lane] += size;
    }
  return groups;
}

static gboolean
send_all (RankClient *client, const char *board, guint32 max_frame,
          GPtrArray *entries, GArray *lines, GArray *hashes, const char *digest,
          GPtrArray *groups, GArray *todo, GArray *retry,
          RankImportStats *stats, RankImportProgress progress,
          gpointer progress_data, GError **error)
{
  Shared shared = { .stats = stats,
                    .progress = progress,
                    .progress_data = progress_data };
  Lane lanes[RANK_TRANSFER_CONNECTIONS];
  GThread *threads[RANK_TRANSFER_CONNECTIONS] = { NULL };
  guint records = todo->len;
  guint n;
  gboolean ok = TRUE;

  if (groups != NULL)
    {
      records = 0;
      for (guint i = 0; i < todo->len; i++)
        records
            += ((GArray *) groups->pdata[g_array_index (todo, guint, i)])->len;
    }
  n = lanes_for (records);

  g_mutex_init (&shared.lock);
  for (guint i = 0; i < n; i++)
    lanes[i] = (Lane){ .client = i == 0 ? client : NULL,
                       .board = board,
                       .entries = entries,
                       .lines = lines,
                       .digest = digest,
                       .groups = groups,
                       .max_frame = max_frame,
                       .todo = g_array_new (FALSE, FALSE, sizeof (guint)),
                       .retry = g_array_new (FALSE, FALSE, sizeof (guint)),
                       .shared = &shared };
  /* A group goes with its first record: its records share a lane. */
  for (guint i = 0; i < todo->len; i++)
    {
      guint k = g_array_index (todo, guint, i);
      guint first = groups != NULL
                        ? g_array_index ((GArray *) groups->pdata[k], guint, 0)
                        : k;

      g_array_append_val (lanes[lane_of (hashes, first, n)].todo, k);
    }
  for (guint i = 1; i < n && ok; i++)
    {
      lanes[i].client = rank_client_connect_again (client, error);
      ok = lanes[i].client != NULL;
    }
  for (guint i = 1; i < n && ok; i++)
    threads[i] = g_thread_new ("import", lane_run, &lanes[i]);
  if (ok)
    lane_run (&lanes[0]);
  for (guint i = 0; i < n; i++)
    {
      if (threads[i] != NULL)
        g_thread_join (threads[i]);
      if (lanes[i].error != NULL && ok)
        {
          g_propagate_error (error, lanes[i].error);
          lanes[i].error = NULL;
          ok = FALSE;
        }
      g_clear_error (&lanes[i].error);
      g_array_append_vals (retry, lanes[i].retry->data, lanes[i].retry->len);
      g_array_unref (lanes[i].retry);
      g_array_unref (lanes[i].todo);
      if (i > 0 && lanes[i].client != NULL)
        rank_client_free (lanes[i].client);
    }
  g_array_sort (retry, index_compare);
  g_mutex_clear (&shared.lock);
  return ok;
}

/* Whether board takes calls recorded as a whole (the IDL's
 * UpdateBatchRequest.request_id): not sharded, capped, dense-ranked or
 * periodic (an import's times may fall in several periods). */
static gboolean
groups_allowed (RankClient *client, const char *board, gboolean *allowed,
                GError **error)
{
  g_autoptr (rankGetBoardInfoRequest) req
      = g_object_new (RANK_TYPE_GET_BOARD_INFO_REQUEST, "board", board, NULL);
  rankBoardInfo *info = g_object_new (RANK_TYPE_BOARD_INFO, NULL);
  rankInvalidArgument *invalid = NULL;
  rankPermissionDenied *denied = NULL;
  rankUnavailable *unavailable = NULL;
  GError *transport = NULL;
  const char *shards, *cap, *rank, *period;

  if (!rank_ranking_if_get_board_info (rank_client_iface (client), &info, req,
                                       &invalid, &unavailable, &denied,
                                       &transport))
    {
      g_object_unref (info);
      if (denied != NULL)
        {
          /* GetBoardInfo needs the admin role, which an importer (write)
           * need not have: without the board's options, records go one by
           * one, as on a board that cannot take groups. Said once: it
           * costs Redis about twice as much a record. */
          fprintf (stderr,
                   "rankctl: note: no admin role on board '%s' (GetBoardInfo "
                   "refused), so its options are unknown: each record is "
                   "sent with its own request id, at about twice Redis's "
                   "cost a record (still applied at most once)\n",
                   board);
          g_object_unref (denied);
          g_clear_error (&transport);
          *allowed = FALSE;
          return TRUE;
        }
      return rank_transfer_call_failed ((GObject *) invalid,
                                        (GObject *) unavailable, NULL, NULL,
                                        transport, error);
    }
  shards = g_hash_table_lookup (info->options, "shards");
  cap = g_hash_table_lookup (info->options, "cap");
  rank = g_hash_table_lookup (info->options, "rank");
  period = g_hash_table_lookup (info->options, "period");
  *allowed = g_strcmp0 (shards, "1") == 0 && g_strcmp0 (cap, "0") == 0
             && rank != NULL && strcmp (rank, "dense") != 0
             && g_strcmp0 (period, "none") == 0;
  g_object_unref (info);
  return TRUE;
}

/* A file's digest, the part of its records' request ids that names it:
 * SHA-256 of its bytes, in hex. */
typedef struct
{
  const char *text;
  gsize len;
} DigestJob;

static gpointer
digest_of (gpointer data)
{
  const DigestJob *job = data;

  return g_compute_checksum_for_data (G_CHECKSUM_SHA256,
                                      (const guchar *) job->text, job->len);
}

/* A record's place in the order an import sends (send_order): keys that
 * sort as unsigned integers, the score's first. */
typedef struct
{
  guint64 score_key; /* higher scores first */
  guint64 time_key;  /* then earlier times */
  guint index;       /* the record's number, from 0 */
} Place;

#define SIGN_BIT G_GUINT64_CONSTANT (0x8000000000000000)

static Place
place_of (const RankTransferEntry *e, guint index)
{
  return (Place){ ~((guint64) e->score ^ SIGN_BIT),
                  (guint64) e->timestamp_ms ^ SIGN_BIT, index };
}

/* Every record of the file into entries, with its line, its member's
 * hash and its place; sorted: whether the members came in strictly
 * increasing order (as export writes them: then no member is there
 * twice). FALSE at the first record that does not read. */
static gboolean
read_entries (RankTransferReader *reader, GPtrArray *entries, GArray *lines,
              GArray *hashes, GArray *places, gboolean *sorted, GError **error)
{
  const RankTransferEntry *last = NULL;

  *sorted = TRUE;
  for (;;)
    {
      RankTransferEntry *e = g_new0 (RankTransferEntry, 1);
      guint line = (guint) reader->line, hash;
      gboolean done = FALSE;
      Place p;

      if (!rank_transfer_read (reader, e, &done, error) || done)
        {
          rank_transfer_entry_destroy (e);
          return done;
        }
      if (last != NULL && *sorted && strcmp (last->member, e->member) >= 0)
        *sorted = FALSE;
      p = place_of (e, entries->len);
      g_array_append_val (places, p);
      g_array_append_val (lines, line);
      hash = g_str_hash (e->member);
      g_array_append_val (hashes, hash);
      g_ptr_array_add (entries, e);
      last = e;
    }
}

/* Byte d of a place's keys, the time's 8 first. */
static inline guint
place_byte (const Place *p, guint d)
{
  return (
      guint) ((d < 8 ? p->time_key >> (8 * d) : p->score_key >> (8 * (d - 8)))
              & 0xff);
}

/* Sorts places by score_key, then time_key, keeping their order where
 * both are equal: a least-significant-byte radix sort, which is stable;
 * a byte that is the same in every place takes no pass. 1M places: about
 * half of g_array_sort's time. */
static void
places_sort (GArray *places)
{
  guint n = places->len;
  g_autofree Place *spare = NULL;
  g_autofree guint *counts = NULL;
  Place *src = (Place *) (gpointer) places->data, *dst;

  if (n < 2)
    return;
  spare = g_new (Place, n);
  counts = g_new0 (guint, 16 * 256);
  dst = spare;
  for (guint i = 0; i < n; i++)
    for (guint d = 0; d < 16; d++)
      counts[d * 256 + place_byte (&src[i], d)]++;
  for (guint d = 0; d < 16; d++)
    {
      guint *c = counts + d * 256;
      guint at = 0;
      Place *t;

      if (c[place_byte (&src[0], d)] == n)
        continue;
      for (guint b = 0; b < 256; b++)
        {
          guint k = c[b];

          c[b] = at;
          at += k;
        }
      for (guint i = 0; i < n; i++)
        dst[c[place_byte (&src[i], d)]++] = src[i];
      t = src;
      src = dst;
      dst = t;
    }
  if (src != (Place *) (gpointer) places->data)
    memcpy (places->data, src, n * sizeof (Place));
}

/* The order an import sends entries in: by score, highest first (on an
 * ascending board, worst first: as monotone in the sorted set), then time.
 * Export writes a board sorted by member, so its scores come in random
 * order, and each ZADD then finds its place in the sorted set through
 * nodes Redis has not touched lately; in score order the place of one is
 * next to the last's, in what Redis's caches still hold (1M entries: about
 * 0.5-0.8x Redis CPU an entry, bench/README.md of 4968f11, "Import"). The
 * records of one member take its first record's place, so they stay together
 * and in the file's order (its last SET wins); a file whose members are sorted
 * has none twice and needs no table for that. */
static GArray *
send_order (GPtrArray *entries, GArray *places, gboolean sorted)
{
  GArray *order;

  if (!sorted)
    {
      g_autoptr (GHashTable) first = g_hash_table_new (g_str_hash, g_str_equal);

      for (guint k = 0; k < entries->len; k++)
        {
          const RankTransferEntry *e = entries->pdata[k];
          Place *p = &g_array_index (places, Place, k);
          gpointer was;

          if (g_hash_table_lookup_extended (first, e->member, NULL, &was))
            {
              const Place *f
                  = &g_array_index (places, Place, GPOINTER_TO_UINT (was));

              p->score_key = f->score_key;
              p->time_key = f->time_key;
            }
          else
            g_hash_table_insert (first, e->member, GUINT_TO_POINTER (k));
        }
    }
  places_sort (places);
  order = g_array_sized_new (FALSE, FALSE, sizeof (guint), places->len);
  for (guint i = 0; i < places->len; i++)
    g_array_append_val (order, g_array_index (places, Place, i).index);
  return order;
}

gboolean
rank_transfer_import (RankClient *client, const char *board, const char *path,
                      RankTransferFormat format, guint32 max_frame,
                      RankImportProgress progress, gpointer progress_data,
                      RankImportStats *stats, GError **error)
{
  g_autofree char *text = NULL;
  g_autofree char *digest = NULL;
  g_autoptr (GPtrArray) entries
      = g_ptr_array_new_with_free_func (rank_transfer_entry_destroy);
  g_autoptr (GArray) lines = g_array_new (FALSE, FALSE, sizeof (guint));
  g_autoptr (GArray) hashes = g_array_new (FALSE, FALSE, sizeof (guint));
  g_autoptr (GArray) places = g_array_new (FALSE, FALSE, sizeof (Place));
  g_autoptr (GArray) order = NULL;
  g_autoptr (GArray) todo = NULL;
  g_autoptr (GPtrArray) groups = NULL;
  gboolean grouped = FALSE, sorted;
  RankTransferReader reader;
  gsize len = 0;
  DigestJob job;
  GThread *digesting;
  gboolean all_read;

  memset (stats, 0, sizeof *stats);
  if (!g_file_get_contents (path, &text, &len, error))
    return FALSE;
  /* The whole file is read and checked before anything is sent; its
   * digest is computed meanwhile, on a thread of its own. For 1M entries
   * the lanes connect 0.6-0.8 s after rankctl starts (perf trace -e
   * connect), 0.3-0.45 s of it reading the records; reading the file's two
   * halves on two threads did not connect them sooner (bench/README.md of
   * 4968f11). */
  job = (DigestJob){ text, len };
  digesting = g_thread_new ("digest", digest_of, &job);
  rank_transfer_reader_init (&reader, format, text, len);
  all_read
      = read_entries (&reader, entries, lines, hashes, places, &sorted, error);
  digest = g_thread_join (digesting);
  if (!all_read
      || !rank_import_records_fit (board, entries, lines, max_frame, error))
    {
      g_prefix_error (error, "%s: ", path);
      return FALSE;
    }
  stats->records = entries->len;
  if (!groups_allowed (client, board, &grouped, error))
    return FALSE;
  order = send_order (entries, places, sorted);
  g_clear_pointer (&places, g_array_unref);
  if (grouped)
    {
      groups = make_groups (board, entries, hashes, order, max_frame);
      todo = g_array_sized_new (FALSE, FALSE, sizeof (guint), groups->len);
      for (guint g = 0; g < groups->len; g++)
        g_array_append_val (todo, g);
    }
  else
    todo = g_steal_pointer (&order);
  g_clear_pointer (&order, g_array_unref);
  for (int attempt = 0; todo->len > 0; attempt++)
    {
      g_autoptr (GArray) retry = g_array_new (FALSE, FALSE, sizeof (guint));

      if (attempt > 5)
        {
          guint left = todo->len;

          if (groups != NULL)
            {
              left = 0;
              for (guint i = 0; i < todo->len; i++)
                left += ((GArray *)
                             groups->pdata[g_array_index (todo, guint, i)])
                            ->len;
            }
          g_set_error (error, RANK_ERROR, RANK_ERROR_UNAVAILABLE,
                       "%u records still unavailable after 5 retries; run "
                       "the import again (what was applied is not applied "
                       "twice)",
                       left);
          return FALSE;
        }
      if (attempt > 0)
        g_usleep ((gulong) (100000 << attempt)); /* backoff before a retry */
      if (!send_all (client, board, max_frame, entries, lines, hashes, digest,
                     groups, todo, retry, stats, progress, progress_data,
                     error))
        return FALSE;
      g_array_unref (todo);
      todo = g_steal_pointer (&retry);
    }
  return TRUE;
}
