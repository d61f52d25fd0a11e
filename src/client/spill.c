/* spill.c -- an external sort within a memory budget (see spill.h). */
#include "spill.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

/* A record in memory: its key, the order it was added in (which keeps
 * equal records in that order), and its bytes in one of the blocks. */
typedef struct
{
  RankSpillKey key;
  guint64 seq;
  const guint8 *rec;
  gsize len;
} Item;

/* Records are copied into blocks of this size (a larger record gets a
 * block of its own): no realloc of the whole, which would hold twice the
 * budget for a moment. */
#define BLOCK (1024 * 1024)

/* One sorted stream the merge reads: a run file, or the records still in
 * memory (fd -1). */
typedef struct
{
  int fd;
  guint8 *buffer; /* fd's: bytes [head, tail) not read yet */
  gsize head, tail;
  GByteArray *rec;
  guint next; /* the memory's: its next item */
  RankSpillKey key;
  const guint8 *at;
  gsize len;
} Source;

struct _RankSpill
{
  gsize memory, used;
  RankSpillCompare compare;
  GPtrArray *blocks; /* guint8 *, g_free */
  gsize block_used, block_size;
  GArray *items; /* Item */
  GArray *runs;  /* int: the run files' descriptors, oldest first */
  guint64 count;
  guint written; /* runs written */
  gboolean reading;
  Source *sources;
  guint n_sources;
  guint *heap; /* indexes into sources */
  guint heap_len;
  gint last; /* the source of the record returned last; -1: none */
};

guint64
rank_spill_prefix (const char *s, gsize len)
{
  guint64 k = 0;

  for (gsize i = 0; i < 8; i++)
    k = (k << 8) | (i < len ? (guint8) s[i] : 0);
  return k;
}

static int
key_compare (const RankSpillKey *a, const RankSpillKey *b)
{
  for (int i = 0; i < 3; i++)
    if (a->k[i] != b->k[i])
      return a->k[i] < b->k[i] ? -1 : 1;
  return 0;
}

static int
record_compare (const RankSpill *s, const RankSpillKey *ka, const guint8 *a,
                gsize a_len, const RankSpillKey *kb, const guint8 *b,
                gsize b_len)
{
  int c = key_compare (ka, kb);

  if (c == 0 && s->compare != NULL)
    c = s->compare (a, a_len, b, b_len);
  return c;
}

static int
item_compare (gconstpointer pa, gconstpointer pb, gpointer data)
{
  const Item *a = pa, *b = pb;
  int c
      = record_compare (data, &a->key, a->rec, a->len, &b->key, b->rec, b->len);

  if (c != 0)
    return c;
  return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* Byte d of an item's key, from the least significant: k[2]'s 8 first. */
static inline guint
key_byte (const Item *it, guint d)
{
  return (guint) ((it->key.k[2 - d / 8] >> (8 * (d % 8))) & 0xff);
}

/* Sorts items by key, equal keys in the order added: a least-significant
 * byte first radix sort, which is stable; a byte that is the same in every
 * item takes no pass. Without a compare function, this is about a third of
 * g_array_sort's time (which copies each 48-byte item as it merges). */
static void
radix_sort (GArray *items)
{
  guint n = items->len;
  g_autofree Item *spare = NULL;
  g_autofree guint *counts = NULL;
  Item *src = (Item *) (gpointer) items->data, *dst;

  if (n < 2)
    return;
  spare = g_new (Item, n);
  counts = g_new0 (guint, 24 * 256);
  dst = spare;
  for (guint i = 0; i < n; i++)
    for (guint d = 0; d < 24; d++)
      counts[d * 256 + key_byte (&src[i], d)]++;
  for (guint d = 0; d < 24; d++)
    {
      guint *c = counts + d * 256;
      guint at = 0;
      Item *t;

      if (c[key_byte (&src[0], d)] == n)
        continue;
      for (guint b = 0; b < 256; b++)
        {
          guint k = c[b];

          c[b] = at;
          at += k;
        }
      for (guint i = 0; i < n; i++)
        dst[c[key_byte (&src[i], d)]++] = src[i];
      t = src;
      src = dst;
      dst = t;
    }
  if (src != (Item *) (gpointer) items->data)
    memcpy (items->data, src, n * sizeof (Item));
}

/* The records in memory, in order. */
static void
sort_items (RankSpill *s)
{
  if (s->compare == NULL)
    radix_sort (s->items);
  else
    g_array_sort_with_data (s->items, item_compare, s);
}

RankSpill *
rank_spill_new (gsize memory, RankSpillCompare compare)
{
  RankSpill *s = g_new0 (RankSpill, 1);

  s->memory = MAX (memory, RANK_SPILL_MIN_MEMORY);
  s->compare = compare;
  s->blocks = g_ptr_array_new_with_free_func (g_free);
  s->items = g_array_new (FALSE, FALSE, sizeof (Item));
  s->runs = g_array_new (FALSE, FALSE, sizeof (int));
  s->last = -1;
  return s;
}

static void
sources_clear (RankSpill *s)
{
  for (guint i = 0; i < s->n_sources; i++)
    {
      Source *src = &s->sources[i];

      if (src->fd >= 0)
        close (src->fd);
      g_free (src->buffer);
      if (src->rec != NULL)
        g_byte_array_unref (src->rec);
    }
  g_clear_pointer (&s->sources, g_free);
  g_clear_pointer (&s->heap, g_free);
  s->n_sources = s->heap_len = 0;
}

static void
memory_clear (RankSpill *s)
{
  g_ptr_array_set_size (s->blocks, 0);
  g_array_set_size (s->items, 0);
  s->block_used = s->block_size = 0;
  s->used = 0;
}

void
rank_spill_free (RankSpill *s)
{
  if (s == NULL)
    return;
  sources_clear (s);
  for (guint i = 0; i < s->runs->len; i++)
    close (g_array_index (s->runs, int, i));
  g_array_unref (s->runs);
  g_ptr_array_unref (s->blocks);
  g_array_unref (s->items);
  g_free (s);
}

guint64
rank_spill_count (const RankSpill *s)
{
  return s->count;
}

guint
rank_spill_runs (const RankSpill *s)
{
  return s->written;
}

static gboolean
io_failed (GError **error, const char *what)
{
  int e = errno;

  g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (e),
               "cannot %s a sort run in %s (TMPDIR): %s", what,
               g_get_tmp_dir (), g_strerror (e));
  return FALSE;
}

/* A new run file, already removed from its directory; -1 on failure. */
static int
run_open (GError **error)
{
  g_autofree char *path = NULL;
  int fd = g_file_open_tmp ("rankctl-sort-XXXXXX", &path, error);

  if (fd < 0)
    g_prefix_error (
        error, "cannot make a sort run in %s (TMPDIR): ", g_get_tmp_dir ());
  else
    unlink (path);
  return fd;
}

/* A run being written: its bytes gathered, RANK_SPILL_READ_BUFFER at a
 * time. */
typedef struct
{
  int fd;
  GByteArray *out;
  gboolean ok;
} RunWriter;

static void
run_flush (RunWriter *w)
{
  gsize done = 0;

  while (w->ok && done < w->out->len)
    {
      ssize_t n = write (w->fd, w->out->data + done, w->out->len - done);

      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        w->ok = FALSE;
      else
        done += (gsize) n;
    }
  g_byte_array_set_size (w->out, 0);
}

static void
run_put (RunWriter *w, const RankSpillKey *key, const guint8 *rec, gsize len)
{
  guint32 n = (guint32) len;

  g_byte_array_append (w->out, (const guint8 *) &n, sizeof n);
  g_byte_array_append (w->out, (const guint8 *) key, sizeof *key);
  if (len > 0)
    g_byte_array_append (w->out, rec, (guint) len);
  if (w->out->len >= RANK_SPILL_READ_BUFFER)
    run_flush (w);
}

/* The records in memory, sorted, as a run of their own; the memory is
 * then free for more. */
static gboolean
spill_out (RankSpill *s, GError **error)
{
  RunWriter w = { run_open (error), NULL, TRUE };

  if (w.fd < 0)
    return FALSE;
  w.out = g_byte_array_sized_new (2 * RANK_SPILL_READ_BUFFER);
  sort_items (s);
  for (guint i = 0; w.ok && i < s->items->len; i++)
    {
      const Item *it = &g_array_index (s->items, Item, i);

      run_put (&w, &it->key, it->rec, it->len);
    }
  run_flush (&w);
  g_byte_array_unref (w.out);
  if (!w.ok)
    {
      io_failed (error, "write");
      close (w.fd);
      return FALSE;
    }
  g_array_append_val (s->runs, w.fd);
  s->written++;
  memory_clear (s);
  return TRUE;
}

gboolean
rank_spill_add (RankSpill *s, const RankSpillKey *key, const guint8 *record,
                gsize len, GError **error)
{
  Item it = { *key, s->count, NULL, len };
  guint8 *block;

  g_return_val_if_fail (!s->reading, FALSE);
  if (s->items->len > 0 && s->used + len + sizeof (Item) > s->memory
      && !spill_out (s, error))
    return FALSE;
  if (s->block_size - s->block_used < len || s->blocks->len == 0)
    {
      s->block_size = MAX (BLOCK, len);
      g_ptr_array_add (s->blocks, g_malloc (s->block_size));
      s->block_used = 0;
    }
  block = s->blocks->pdata[s->blocks->len - 1];
  if (len > 0)
    memcpy (block + s->block_used, record, len);
  it.rec = block + s->block_used;
  s->block_used += len;
  s->used += len + sizeof (Item);
  g_array_append_val (s->items, it);
  s->count++;
  return TRUE;
}

/* Copies the next n bytes of a run into dst; *got how many there were
 * (fewer only at the file's end). */
static gboolean
run_read (Source *src, guint8 *dst, gsize n, gsize *got, GError **error)
{
  *got = 0;
  while (*got < n)
    {
      gsize take = MIN (n - *got, src->tail - src->head);
      ssize_t r;

      memcpy (dst + *got, src->buffer + src->head, take);
      src->head += take;
      *got += take;
      if (*got == n)
        break;
      r = read (src->fd, src->buffer, RANK_SPILL_READ_BUFFER);
      if (r < 0 && errno == EINTR)
        continue;
      if (r < 0)
        return io_failed (error, "read");
      if (r == 0)
        break;
      src->head = 0;
      src->tail = (gsize) r;
    }
  return TRUE;
}

/* Reads a source's next record into it; *more FALSE at its end. */
static gboolean
source_advance (Source *src, GArray *items, gboolean *more, GError **error)
{
  guint32 n;
  gsize got;

  if (src->fd < 0)
    {
      const Item *it;

      *more = src->next < items->len;
      if (!*more)
        return TRUE;
      it = &g_array_index (items, Item, src->next++);
      /* Sorted, the records lie anywhere in the blocks: the one a few
       * places on is fetched while this one is used (perf: the reader's
       * first touch of each missed the caches). */
      if (src->next + 8 < items->len)
        __builtin_prefetch (g_array_index (items, Item, src->next + 8).rec);
      src->key = it->key;
      src->at = it->rec;
      src->len = it->len;
      return TRUE;
    }
  if (!run_read (src, (guint8 *) &n, sizeof n, &got, error))
    return FALSE;
  *more = got > 0;
  if (got == 0)
    return TRUE;
  g_byte_array_set_size (src->rec, n);
  if (got != sizeof n
      || !run_read (src, (guint8 *) &src->key, sizeof src->key, &got, error)
      || got != sizeof src->key
      || !run_read (src, src->rec->data, n, &got, error) || got != n)
    {
      errno = EIO; /* cut short: the file changed under us */
      return io_failed (error, "read");
    }
  /* Never NULL, which would end the stream: an empty record's data may
   * be. */
  src->at = n > 0 ? src->rec->data : (const guint8 *) "";
  src->len = n;
  return TRUE;
}

/* Whether source a's record goes before b's (on equal records, the older
 * source first: the order they were added in). */
static gboolean
source_before (const RankSpill *s, guint a, guint b)
{
  const Source *x = &s->sources[a], *y = &s->sources[b];
  int c = record_compare (s, &x->key, x->at, x->len, &y->key, y->at, y->len);

  return c < 0 || (c == 0 && a < b);
}

static void
heap_down (RankSpill *s, guint i)
{
  for (;;)
    {
      guint l = 2 * i + 1, r = l + 1, m = i, t;

      if (l < s->heap_len && source_before (s, s->heap[l], s->heap[m]))
        m = l;
      if (r < s->heap_len && source_before (s, s->heap[r], s->heap[m]))
        m = r;
      if (m == i)
        return;
      t = s->heap[i];
      s->heap[i] = s->heap[m];
      s->heap[m] = t;
      i = m;
    }
}

/* Starts a merge of runs (which it takes) and, if with_memory, the
 * records in memory (sorted first), last. */
static gboolean
merge_start (RankSpill *s, const int *runs, guint n_runs, gboolean with_memory,
             GError **error)
{
  guint n = n_runs + (with_memory ? 1 : 0);

  s->sources = g_new0 (Source, n);
  s->heap = g_new (guint, n);
  s->n_sources = n;
  s->heap_len = 0;
  s->last = -1;
  if (with_memory)
    sort_items (s);
  /* Every run is a source's first, so that sources_clear closes them all
   * whatever fails below. */
  for (guint i = 0; i < n_runs; i++)
    {
      Source *src = &s->sources[i];

      src->fd = runs[i];
      src->buffer = g_malloc (RANK_SPILL_READ_BUFFER);
      src->rec = g_byte_array_new ();
    }
  for (guint i = n_runs; i < n; i++)
    s->sources[i].fd = -1;
  for (guint i = 0; i < n; i++)
    {
      Source *src = &s->sources[i];
      gboolean more = FALSE;

      if (src->fd >= 0 && lseek (src->fd, 0, SEEK_SET) != 0)
        return io_failed (error, "read");
      if (!source_advance (src, s->items, &more, error))
        return FALSE;
      if (more)
        s->heap[s->heap_len++] = i;
    }
  for (guint i = s->heap_len / 2; i-- > 0;)
    heap_down (s, i);
  return TRUE;
}

static gboolean
merge_next (RankSpill *s, RankSpillKey *key, const guint8 **record, gsize *len,
            GError **error)
{
  const Source *src;

  if (s->last >= 0)
    {
      gboolean more = FALSE;

      if (!source_advance (&s->sources[s->last], s->items, &more, error))
        return FALSE;
      if (!more)
        s->heap[0] = s->heap[--s->heap_len];
      heap_down (s, 0);
      s->last = -1;
    }
  if (s->heap_len == 0)
    {
      *record = NULL;
      *len = 0;
      return TRUE;
    }
  s->last = (gint) s->heap[0];
  src = &s->sources[s->last];
  *key = src->key;
  *record = src->at;
  *len = src->len;
  return TRUE;
}

/* Merges the RANK_SPILL_FAN_IN oldest runs into one, which takes their
 * place (it is older than the rest). */
static gboolean
merge_round (RankSpill *s, GError **error)
{
  int runs[RANK_SPILL_FAN_IN];
  RunWriter w = { run_open (error), NULL, TRUE };
  gboolean ok = w.fd >= 0;

  if (!ok)
    return FALSE;
  w.out = g_byte_array_sized_new (2 * RANK_SPILL_READ_BUFFER);
  memcpy (runs, s->runs->data, sizeof runs);
  g_array_remove_range (s->runs, 0, RANK_SPILL_FAN_IN);
  ok = merge_start (s, runs, RANK_SPILL_FAN_IN, FALSE, error);
  while (ok && w.ok)
    {
      RankSpillKey key;
      const guint8 *rec;
      gsize len;

      ok = merge_next (s, &key, &rec, &len, error);
      if (!ok || rec == NULL)
        break;
      run_put (&w, &key, rec, len);
    }
  run_flush (&w);
  g_byte_array_unref (w.out);
  sources_clear (s);
  if (ok && !w.ok)
    ok = io_failed (error, "write");
  if (!ok)
    {
      close (w.fd);
      return FALSE;
    }
  g_array_prepend_val (s->runs, w.fd);
  return TRUE;
}

gboolean
rank_spill_finish (RankSpill *s, GError **error)
{
  g_autoptr (GArray) runs = NULL;

  g_return_val_if_fail (!s->reading, FALSE);
  s->reading = TRUE;
  while (s->runs->len + 1 > RANK_SPILL_FAN_IN)
    if (!merge_round (s, error))
      return FALSE;
  runs = s->runs;
  s->runs = g_array_new (FALSE, FALSE, sizeof (int));
  return merge_start (s, (const int *) (gpointer) runs->data, runs->len, TRUE,
                      error);
}

gboolean
rank_spill_next (RankSpill *s, RankSpillKey *key, const guint8 **record,
                 gsize *len, GError **error)
{
  g_return_val_if_fail (s->reading, FALSE);
  return merge_next (s, key, record, len, error);
}
