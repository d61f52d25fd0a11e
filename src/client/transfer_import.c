/* transfer_import.c -- rankctl import: a file's records read and checked,
 * put in the order they are sent in by an external sort (spill.h), cut
 * into calls and sent over several connections, all in bounded memory
 * (see transfer.h).
 *
 * The steps:
 *   1. The file is read whole and every record checked (nothing is sent
 *      before the last one reads), while a thread computes its SHA-256
 *      (the request ids' part that names the file). The records go into
 *      a spill in the order they are sent in: by score, highest first,
 *      then time, then record number.
 *   2. That order holds only if no member is there twice, which a file
 *      sorted by member (as export writes it) shows as it is read. At the
 *      first member that is not after the one before, the file is read
 *      again into a spill by member, which gives each member's records
 *      the place of its first one (so that they stay together and in the
 *      file's order: its last SET wins), and then into a spill by place.
 *   3. The records come out of the spill in order, go to a connection by
 *      their member's hash and are cut into calls there; each connection
 *      (a lane, a thread) keeps its calls in flight.
 * What is held at once: the spill's budget (--sort-memory), a few calls a
 * lane, and of the file at most RELEASE bytes of its mapping.
 */
#include "transfer_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api.h"
#include "constants.h"
#include "error.h"
#include "spill.h"

/* The mapping's bytes read so far are dropped (MADV_DONTNEED) each time
 * this many have gathered: without it, the file would stay in rankctl's
 * resident memory as it is read. */
#define RELEASE (8 * 1024 * 1024)
/* Calls waiting for a lane, at most, per call it keeps in flight. */
#define QUEUED_PER_FLIGHT 2
/* Times a call that meets Unavailable is sent again, the first after 200
 * ms, each wait twice the one before. */
#define RETRIES 5

/* ---- the file ---- */

typedef struct
{
  const char *text;
  gsize len;
  gsize released; /* bytes from text on given back */
} Mapped;

static gboolean
map_file (const char *path, Mapped *m, GError **error)
{
  struct stat st;
  int fd = open (path, O_RDONLY | O_CLOEXEC);
  void *p;

  memset (m, 0, sizeof *m);
  if (fd < 0 || fstat (fd, &st) != 0)
    {
      int e = errno;

      if (fd >= 0)
        close (fd);
      g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (e),
                   "cannot read %s: %s", path, g_strerror (e));
      return FALSE;
    }
  m->len = (gsize) st.st_size;
  if (m->len == 0)
    {
      close (fd);
      m->text = "";
      return TRUE;
    }
  p = mmap (NULL, m->len, PROT_READ, MAP_PRIVATE, fd, 0);
  close (fd);
  if (p == MAP_FAILED)
    {
      int e = errno;

      g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (e),
                   "cannot map %s: %s", path, g_strerror (e));
      return FALSE;
    }
  madvise (p, m->len, MADV_SEQUENTIAL);
  m->text = p;
  return TRUE;
}

static void
unmap_file (Mapped *m)
{
  if (m->len > 0)
    munmap ((void *) m->text, m->len);
  memset (m, 0, sizeof *m);
}

/* Gives back the pages of the mapping before upto, once RELEASE bytes of
 * them have gathered. */
static void
release_to (Mapped *m, gsize upto)
{
  gsize page = (gsize) sysconf (_SC_PAGESIZE);
  gsize end = upto / page * page;

  if (end >= m->released + RELEASE)
    {
      madvise ((void *) (m->text + m->released), end - m->released,
               MADV_DONTNEED);
      m->released = end;
    }
}

/* A file's digest, the part of its records' request ids that names it:
 * SHA-256 of its bytes, in hex, read with read(2) on a thread of its own
 * (no page of it stays resident). NULL when it cannot be read (error in
 * the job). */
typedef struct
{
  const char *path;
  GError *error;
} DigestJob;

static gpointer
digest_of (gpointer data)
{
  DigestJob *job = data;
  g_autoptr (GChecksum) sum = g_checksum_new (G_CHECKSUM_SHA256);
  g_autofree guchar *buffer = g_malloc (1024 * 1024);
  int fd = open (job->path, O_RDONLY | O_CLOEXEC);
  ssize_t n;

  if (fd < 0)
    n = -1;
  else
    while ((n = read (fd, buffer, 1024 * 1024)) != 0)
      {
        if (n < 0 && errno == EINTR)
          continue;
        if (n < 0)
          break;
        g_checksum_update (sum, buffer, n);
      }
  if (n < 0)
    {
      int e = errno;

      g_set_error (&job->error, G_FILE_ERROR, g_file_error_from_errno (e),
                   "cannot read %s: %s", job->path, g_strerror (e));
    }
  if (fd >= 0)
    close (fd);
  return n < 0 ? NULL : g_strdup (g_checksum_get_string (sum));
}

/* ---- the order records are sent in ---- */

#define SIGN_BIT G_GUINT64_CONSTANT (0x8000000000000000)

/* A record's place: by score, highest first (on an ascending board, worst
 * first: as monotone in the sorted set), then time, then its number.
 * Export writes a board sorted by member, so its scores come in random
 * order, and each ZADD then finds its place in the sorted set through
 * nodes Redis has not touched lately; in score order the place of one is
 * next to the last's, in what Redis's caches still hold (1M entries: about
 * 0.5-0.8x Redis CPU an entry, bench/README.md of 4968f11, "Import"). */
static RankSpillKey
place_of (gint64 score, gint64 timestamp_ms, guint64 number)
{
  return (RankSpillKey){ { ~((guint64) score ^ SIGN_BIT),
                           (guint64) timestamp_ms ^ SIGN_BIT, number } };
}

/* The fields of a packed entry (rank_transfer_entry_pack) the order
 * needs. */
typedef struct
{
  const guint8 *member;
  guint32 member_len;
  guint64 number;
  gint64 score, timestamp_ms;
} Packed;

static Packed
packed_of (const guint8 *p)
{
  Packed k;
  guint64 v[4];

  memcpy (&k.member_len, p, sizeof k.member_len);
  k.member = p + 4;
  memcpy (v, p + 4 + k.member_len, sizeof v);
  k.number = v[0];
  k.score = (gint64) v[2];
  k.timestamp_ms = (gint64) v[3];
  return k;
}

typedef enum
{
  BY_PLACE,  /* each record's own: a file whose members are sorted */
  BY_MEMBER, /* member, then number: to find each one's first record */
} Order;

/* Reads every record of the file into spill, in order, each checked to
 * fit in a call within max_frame; *count: how many. With BY_PLACE, stops
 * (TRUE, *sorted FALSE) at the first member that is not after the one
 * before. FALSE at the first record that does not read or fit, the error
 * naming its line. */
static gboolean
read_records (Mapped *m, RankTransferFormat format, const char *board,
              guint32 max_frame, RankSpill *spill, Order order,
              gboolean *sorted, guint64 *count, GError **error)
{
  g_autoptr (GByteArray) packed = g_byte_array_new ();
  g_autofree char *last = NULL;
  RankTransferReader reader;
  RankTransferEntry e = { 0 };
  gsize board_len = strlen (board);
  gboolean ok = TRUE;

  *sorted = TRUE;
  *count = 0;
  rank_transfer_reader_init (&reader, format, m->text, m->len);
  while (ok)
    {
      guint64 line = reader.line;
      gboolean done = FALSE;
      gsize size;
      RankSpillKey key;

      ok = rank_transfer_read (&reader, &e, &done, error);
      if (!ok || done)
        break;
      size
          = RANK_IMPORT_CALL_OVERHEAD + rank_import_record_size (board_len, &e);
      if (size > max_frame)
        {
          /* rankd would close the connection on it, which reads as rankd
           * gone, the import as one to retry. */
          g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
                       "line %" G_GUINT64_FORMAT
                       ": the record takes %" G_GSIZE_FORMAT
                       " bytes in an UpdateBatch call, over rankd's "
                       "--max-frame of %u bytes (give import rankd's "
                       "--max-frame if it is larger)",
                       line, size, max_frame);
          ok = FALSE;
          break;
        }
      if (order == BY_PLACE && last != NULL && strcmp (last, e.member) >= 0)
        {
          *sorted = FALSE;
          break;
        }
      ++*count;
      key = order == BY_PLACE
                ? place_of (e.score, e.timestamp_ms, *count)
                : (RankSpillKey){
                    { rank_spill_prefix (e.member, strlen (e.member)), 0, 0 }
                  };
      rank_transfer_entry_pack (packed, &e, *count, line);
      ok = rank_spill_add (spill, &key, packed->data, packed->len, error);
      if (order == BY_PLACE)
        {
          g_free (last);
          last = g_steal_pointer (&e.member);
        }
      release_to (m, (gsize) (reader.p - m->text));
    }
  rank_transfer_entry_clear (&e);
  return ok;
}

/* The records of by_member (finished) into by_place, each member's at its
 * first record's place. */
static gboolean
first_places (RankSpill *by_member, RankSpill *by_place, GError **error)
{
  g_autoptr (GByteArray) member = g_byte_array_new ();
  RankSpillKey first = { { 0 } };

  for (;;)
    {
      RankSpillKey key;
      const guint8 *rec;
      gsize len;
      Packed k;

      if (!rank_spill_next (by_member, &key, &rec, &len, error))
        return FALSE;
      if (rec == NULL)
        return TRUE;
      k = packed_of (rec);
      if (k.member_len != member->len
          || memcmp (k.member, member->data, k.member_len) != 0)
        {
          g_byte_array_set_size (member, 0);
          g_byte_array_append (member, k.member, k.member_len);
          first = place_of (k.score, k.timestamp_ms, 0);
        }
      key = first;
      key.k[2] = k.number;
      if (!rank_spill_add (by_place, &key, rec, len, error))
        return FALSE;
    }
}

/* ---- the lanes ---- */

/* What the lanes and the main thread share: the totals and the progress
 * shown from them, and whether a lane failed (all then stop). */
typedef struct
{
  GMutex lock;
  GCond changed;
  RankImportStats *stats;
  RankImportProgress progress;
  gpointer progress_data;
  gboolean failed;
} Shared;

/* One connection's part of an import: the records whose member hashes to
 * it (so that one member's records keep their order), in calls the main
 * thread makes and queues. */
typedef struct
{
  RankClient *client;
  const char *board;
  const char *digest;
  guint window;         /* calls in flight */
  GQueue queue;         /* RankImportCall *, from the main thread */
  gboolean closed;      /* no more will come */
  RankImportCall *open; /* the call the main thread is filling */
  gsize open_bytes;
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

/* The lane's next queued call; waits for one if wait. NULL at the end,
 * when nothing is queued (and not wait), or once a lane failed. */
static RankImportCall *
lane_take (Lane *lane, gboolean wait)
{
  Shared *s = lane->shared;
  RankImportCall *call = NULL;

  g_mutex_lock (&s->lock);
  while (wait && !s->failed && !lane->closed && g_queue_is_empty (&lane->queue))
    g_cond_wait (&s->changed, &s->lock);
  if (!s->failed)
    call = g_queue_pop_head (&lane->queue);
  g_cond_broadcast (&s->changed);
  g_mutex_unlock (&s->lock);
  return call;
}

static void
lane_fail (Lane *lane)
{
  g_mutex_lock (&lane->shared->lock);
  lane->shared->failed = TRUE;
  g_cond_broadcast (&lane->shared->changed);
  g_mutex_unlock (&lane->shared->lock);
}

static guint
records_in (GQueue *calls)
{
  guint n = 0;

  for (GList *l = calls->head; l != NULL; l = l->next)
    n += ((RankImportCall *) l->data)->records->len;
  return n;
}

/* Sends the lane's calls, keeping lane->window of them in flight: the next
 * leaves as soon as the oldest is answered, so rankctl encodes while rankd
 * and Redis work. A call that meets Unavailable is sent again after a
 * wait, before any new one, up to RETRIES times. */
static gpointer
lane_run (gpointer data)
{
  Lane *lane = data;
  RankClientTransport *t = rank_client_get_transport (lane->client);
  GQueue flying = G_QUEUE_INIT; /* sent, in order */
  GQueue again = G_QUEUE_INIT;  /* to send before new ones */
  GQueue later = G_QUEUE_INIT;  /* met Unavailable: again after a wait */
  guint attempts = 0;
  gboolean ok = TRUE, end = FALSE;

  while (ok)
    {
      /* Fill the window; the calls of one fill leave in one write. */
      rank_client_transport_cork (t);
      while (ok && flying.length < lane->window)
        {
          RankImportCall *call = g_queue_pop_head (&again);

          if (call == NULL && g_queue_is_empty (&later) && !end)
            {
              call = lane_take (lane, g_queue_is_empty (&flying));
              end = call == NULL && g_queue_is_empty (&flying);
            }
          if (call == NULL)
            break;
          g_queue_push_tail (&flying, call);
          ok = rank_import_send_call (lane->client, lane->board, lane->digest,
                                      call, &lane->error);
        }
      ok = rank_client_transport_uncork (t, ok ? &lane->error : NULL) && ok;
      if (!ok || g_queue_is_empty (&flying))
        break;
      {
        RankImportCall *call = g_queue_pop_head (&flying);
        RankImportCall *retry = NULL, *held = NULL;
        RankImportStats delta = { 0 };

        ok = rank_import_recv_call (lane->client, call, &retry, &held, &delta,
                                    &lane->error);
        if (held != NULL)
          g_queue_push_tail (&again, held);
        if (retry != NULL)
          g_queue_push_tail (&later, retry);
        if (retry != call)
          rank_import_call_free (call);
        if (ok)
          lane_count (lane, &delta);
      }
      /* Once every call in flight is answered, those that met Unavailable
       * go again, after a wait. */
      if (ok && g_queue_is_empty (&flying) && !g_queue_is_empty (&later))
        {
          if (++attempts > RETRIES)
            {
              g_set_error (&lane->error, RANK_ERROR, RANK_ERROR_UNAVAILABLE,
                           "%u records still unavailable after %d retries; "
                           "run the import again (what was applied is not "
                           "applied twice)",
                           records_in (&later), RETRIES);
              ok = FALSE;
              break;
            }
          g_usleep ((gulong) (100000 << attempts));
          while (!g_queue_is_empty (&later))
            g_queue_push_tail (&again, g_queue_pop_head (&later));
        }
      else if (ok && g_queue_is_empty (&later) && g_queue_is_empty (&again))
        attempts = 0;
    }
  if (!ok)
    lane_fail (lane);
  g_queue_clear_full (&flying, rank_import_call_free);
  g_queue_clear_full (&again, rank_import_call_free);
  g_queue_clear_full (&later, rank_import_call_free);
  return NULL;
}

/* Queues call for lane, waiting while its queue is full. FALSE (call
 * freed) once a lane failed. */
static gboolean
lane_give (Lane *lane, RankImportCall *call)
{
  Shared *s = lane->shared;
  gboolean ok;

  g_mutex_lock (&s->lock);
  while (!s->failed && lane->queue.length >= QUEUED_PER_FLIGHT * lane->window)
    g_cond_wait (&s->changed, &s->lock);
  ok = !s->failed;
  if (ok)
    g_queue_push_tail (&lane->queue, call);
  g_cond_broadcast (&s->changed);
  g_mutex_unlock (&s->lock);
  if (!ok)
    rank_import_call_free (call);
  return ok;
}

static void
lane_close (Lane *lane)
{
  g_mutex_lock (&lane->shared->lock);
  lane->closed = TRUE;
  g_cond_broadcast (&lane->shared->changed);
  g_mutex_unlock (&lane->shared->lock);
}

/* The lanes of count records: RANK_TRANSFER_BATCH records each, at most
 * RANK_TRANSFER_CONNECTIONS. */
static guint
lanes_for (guint64 count)
{
  return (guint) MAX (
      1, MIN (RANK_TRANSFER_CONNECTIONS, count / RANK_TRANSFER_BATCH));
}

/* Adds a record to its lane's open call, queueing the call first when the
 * record would not go in it: RANK_TRANSFER_GROUP records a call recorded
 * as a whole, else RANK_TRANSFER_BATCH, fewer when they would not fit in
 * max_frame (one at least). The same file gives the same calls every time
 * (for the same max_frame). */
static gboolean
lane_add (Lane *lane, RankImportRecord *r, gboolean grouped, guint32 max_frame)
{
  gsize size = rank_import_record_size (strlen (lane->board), &r->entry);
  guint most = grouped ? RANK_TRANSFER_GROUP : RANK_TRANSFER_BATCH;

  if (lane->open != NULL
      && (lane->open->records->len == most
          || lane->open_bytes + size > max_frame))
    {
      RankImportCall *full = g_steal_pointer (&lane->open);

      if (!lane_give (lane, full))
        {
          rank_import_record_free (r);
          return FALSE;
        }
    }
  if (lane->open == NULL)
    {
      lane->open = rank_import_call_new (grouped);
      lane->open_bytes = RANK_IMPORT_CALL_OVERHEAD;
    }
  g_ptr_array_add (lane->open->records, r);
  lane->open_bytes += size;
  return TRUE;
}

/* Sends the records of spill (finished), in its order, over lanes_for
 * (count) connections (client's and more like it), one thread each:
 * rankd decodes one UpdateBatch of a connection at a time, so more
 * connections keep its workers and Redis busy together. */
static gboolean
send_all (RankClient *client, const char *board, guint32 max_frame,
          const char *digest, gboolean grouped, RankSpill *spill, guint64 count,
          RankImportStats *stats, RankImportProgress progress,
          gpointer progress_data, GError **error)
{
  Shared shared = { .stats = stats,
                    .progress = progress,
                    .progress_data = progress_data };
  Lane lanes[RANK_TRANSFER_CONNECTIONS];
  GThread *threads[RANK_TRANSFER_CONNECTIONS] = { NULL };
  guint n = lanes_for (count);
  gboolean ok = TRUE;

  G_STATIC_ASSERT (RANK_TRANSFER_IN_FLIGHT <= RANK_TRANSFER_GROUPS_IN_FLIGHT);
  G_STATIC_ASSERT (RANK_TRANSFER_GROUP <= RANK_GROUP_MAX_ITEMS);
  g_mutex_init (&shared.lock);
  g_cond_init (&shared.changed);
  for (guint i = 0; i < n; i++)
    {
      lanes[i] = (Lane){ .client = i == 0 ? client : NULL,
                         .board = board,
                         .digest = digest,
                         .window = grouped ? RANK_TRANSFER_GROUPS_IN_FLIGHT
                                           : RANK_TRANSFER_IN_FLIGHT,
                         .shared = &shared };
      g_queue_init (&lanes[i].queue);
    }
  for (guint i = 1; i < n && ok; i++)
    {
      lanes[i].client = rank_client_connect_again (client, error);
      ok = lanes[i].client != NULL;
    }
  for (guint i = 0; i < n && ok; i++)
    threads[i] = g_thread_new ("import", lane_run, &lanes[i]);
  while (ok)
    {
      RankSpillKey key;
      const guint8 *rec;
      gsize len;
      RankImportRecord *r;

      if (!rank_spill_next (spill, &key, &rec, &len, error))
        {
          ok = FALSE;
          break;
        }
      if (rec == NULL)
        break;
      r = rank_import_record_unpack (rec);
      if (!lane_add (&lanes[g_str_hash (r->entry.member) % n], r, grouped,
                     max_frame))
        break; /* a lane failed: its error says why */
    }
  for (guint i = 0; i < n; i++)
    {
      if (lanes[i].open != NULL && ok)
        lane_give (&lanes[i], g_steal_pointer (&lanes[i].open));
      g_clear_pointer (&lanes[i].open, rank_import_call_free);
      lane_close (&lanes[i]);
    }
  if (!ok)
    {
      /* The spill failed: the lanes stop too. */
      g_mutex_lock (&shared.lock);
      shared.failed = TRUE;
      g_cond_broadcast (&shared.changed);
      g_mutex_unlock (&shared.lock);
    }
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
      g_queue_clear_full (&lanes[i].queue, rank_import_call_free);
      if (i > 0 && lanes[i].client != NULL)
        rank_client_free (lanes[i].client);
    }
  if (ok && shared.failed)
    {
      /* (Not expected: a lane that fails says why.) */
      g_set_error (error, RANK_ERROR, RANK_ERROR_INTERNAL,
                   "the import stopped");
      ok = FALSE;
    }
  g_cond_clear (&shared.changed);
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

/* Reads and checks the whole file into a spill in the order its records
 * are sent in (steps 1 and 2 above); *count: its records. */
static RankSpill *
sorted_records (const char *path, RankTransferFormat format, const char *board,
                guint32 max_frame, gsize memory, guint64 *count, GError **error)
{
  g_autoptr (RankSpill) by_place = rank_spill_new (memory, NULL);
  g_autoptr (RankSpill) by_member = NULL;
  Mapped m;
  gboolean sorted = TRUE;
  gboolean ok = map_file (path, &m, error)
                && read_records (&m, format, board, max_frame, by_place,
                                 BY_PLACE, &sorted, count, error);

  if (ok && !sorted)
    {
      /* Read again from the start, by member; the spill by place so far
       * is of no use. This spill and the one by place that follows are
       * both held while the one fills the other: half the budget each. */
      g_clear_pointer (&by_place, rank_spill_free);
      unmap_file (&m);
      by_member = rank_spill_new (memory / 2, rank_transfer_pack_compare);
      ok = map_file (path, &m, error)
           && read_records (&m, format, board, max_frame, by_member, BY_MEMBER,
                            &sorted, count, error);
    }
  unmap_file (&m);
  if (!ok)
    {
      g_prefix_error (error, "%s: ", path);
      return NULL;
    }
  if (by_member != NULL)
    {
      by_place = rank_spill_new (memory / 2, NULL);
      ok = rank_spill_finish (by_member, error)
           && first_places (by_member, by_place, error);
      g_clear_pointer (&by_member, rank_spill_free);
    }
  if (!ok || !rank_spill_finish (by_place, error))
    return NULL;
  return g_steal_pointer (&by_place);
}

gboolean
rank_transfer_import (RankClient *client, const char *board, const char *path,
                      RankTransferFormat format, guint32 max_frame,
                      gsize memory, RankImportProgress progress,
                      gpointer progress_data, RankImportStats *stats,
                      GError **error)
{
  g_autoptr (RankSpill) spill = NULL;
  g_autoptr (RankClient) fresh = NULL;
  g_autofree char *digest = NULL;
  DigestJob job = { path, NULL };
  GThread *digesting;
  gboolean grouped = FALSE;
  guint64 count = 0;

  memset (stats, 0, sizeof *stats);
  /* The whole file is read and checked before anything is sent; its
   * digest is computed meanwhile, on a thread of its own. */
  digesting = g_thread_new ("digest", digest_of, &job);
  spill
      = sorted_records (path, format, board, max_frame, memory, &count, error);
  digest = g_thread_join (digesting);
  if (spill == NULL || digest == NULL)
    {
      if (spill != NULL)
        g_propagate_error (error, g_steal_pointer (&job.error));
      g_clear_error (&job.error);
      return FALSE;
    }
  stats->records = count;
  /* Reading 50M records takes a minute or more, over rankd's idle timeout
   * (60 s by default): client's connection may be gone by now. The sending
   * is done on new ones. */
  fresh = rank_client_connect_again (client, error);
  if (fresh == NULL || !groups_allowed (fresh, board, &grouped, error))
    return FALSE;
  return send_all (fresh, board, max_frame, digest, grouped, spill, count,
                   stats, progress, progress_data, error);
}
