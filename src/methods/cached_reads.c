/* cached_reads.c -- reads of cached boards (see cached_reads.h).
 *
 * A read of a cached board sent to Redis (the flight's leader), and the
 * calls for the same answer that wait for it instead of asking Redis too:
 * after an invalidation, the 64 reads in flight of a hot page would
 * otherwise all miss at once. Only calls that began while nothing of the
 * board had changed since the leader was sent may wait (generation and
 * epoch): a later one must see what changed. Per worker, no lock.
 */
#include "cached_reads.h"

typedef struct
{
  guint64 generation, epoch;
  GPtrArray *waiters; /* Call * */
} Flight;

static void
cached_read_call_clear (Call *call)
{
  g_free (((CachedReadCall *) call)->cache_key);
}

const CallKind handler_cached_read_calls
    = { sizeof (CachedReadCall), cached_read_call_clear };

void
handler_flight_free (gpointer data)
{
  Flight *f = data;

  g_ptr_array_unref (f->waiters);
  g_free (f);
}

/* The leader's answer came: those waiting for it read the cache again,
 * where it now is (or, if it could not be kept, one of them asks Redis);
 * an error is theirs too. */
void
handler_land (CachedReadCall *read, const GError *error)
{
  Flight *f = NULL;
  char *key = NULL;

  if (read->leads)
    g_hash_table_steal_extended (read->call.handler->inflight, read->cache_key,
                                 (gpointer *) &key, (gpointer *) &f);
  g_free (key);
  if (f == NULL)
    return;
  for (guint i = 0; i < f->waiters->len; i++)
    {
      Call *w = f->waiters->pdata[i];

      if (error != NULL)
        handler_reply_error (w, error);
      else
        w->run (w);
    }
  handler_flight_free (f);
}

gboolean
handler_cached (CachedReadCall *read, char *key, gboolean list)
{
  Call *call = &read->call;
  RankCacheEntry *e
      = rank_read_cache_get (call->handler->cache, call->ctx.board,
                             call->ctx.options, key, &read->ticket);
  const RankRow *rows;
  gsize n;

  if (e == NULL)
    {
      GHashTable *inflight = call->handler->inflight;
      Flight *f
          = read->ticket.keep ? g_hash_table_lookup (inflight, key) : NULL;

      if (f != NULL && f->generation == read->ticket.generation
          && f->epoch == read->ticket.epoch)
        {
          g_ptr_array_add (f->waiters, call);
          g_free (key);
          return TRUE;
        }
      if (read->ticket.keep && f == NULL)
        {
          f = g_new0 (Flight, 1);
          f->generation = read->ticket.generation;
          f->epoch = read->ticket.epoch;
          f->waiters = g_ptr_array_new ();
          g_hash_table_insert (inflight, g_strdup (key), f);
          read->leads = TRUE;
        }
      read->cache_key = key;
      return FALSE;
    }
  g_free (key);
  rows = rank_cache_entry_rows (e, &n);
  handler_reply_rows (call, rows, n, list);
  rank_cache_entry_unref (e);
  return TRUE;
}

gboolean
handler_cache_wanted (Call *call)
{
  return call->handler->cache != NULL
         && rank_read_cache_wanted (call->ctx.options);
}
