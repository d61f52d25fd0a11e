/* shard.c -- member and shard placement, page merging (see shard.h). */
#include "shard.h"

#include <string.h>

guint32
rank_shard_hash (const char *member, gsize len)
{
  guint32 h = 2166136261u; /* FNV-1a offset basis */

  for (gsize i = 0; i < len; i++)
    {
      h ^= (guint8) member[i];
      h *= 16777619u; /* FNV prime */
    }
  return h;
}

guint
rank_shard_of (const char *member, gsize len, guint shards)
{
  return shards <= 1 ? 0 : rank_shard_hash (member, len) % shards;
}

guint
rank_shard_node (guint shard, guint nodes)
{
  return nodes <= 1 ? 0 : shard % nodes;
}

int
rank_shard_entry_compare (const RankShardEntry *a, const RankShardEntry *b)
{
  int c;

  if (a->zscore != b->zscore)
    return a->zscore < b->zscore ? -1 : 1;
  c = memcmp (a->key, b->key, MIN (a->key_len, b->key_len));
  if (c != 0)
    return c;
  return a->key_len < b->key_len ? -1 : a->key_len > b->key_len ? 1 : 0;
}

/* A k-way merge by scanning the k heads: k is at most RANK_SHARDS_MAX, and a
 * heap would save little at that size. */
gsize
rank_shard_merge (const RankShardEntry *const *pages, const gsize *lens,
                  guint k, gsize offset, gsize n, const RankShardEntry **out)
{
  g_autofree gsize *head = g_new0 (gsize, k);
  gsize taken = 0, stored = 0;

  while (stored < n)
    {
      const RankShardEntry *best = NULL;
      guint from = 0;

      for (guint i = 0; i < k; i++)
        if (head[i] < lens[i]
            && (best == NULL
                || rank_shard_entry_compare (&pages[i][head[i]], best) < 0))
          {
            best = &pages[i][head[i]];
            from = i;
          }
      if (best == NULL)
        break;
      head[from]++;
      if (taken++ >= offset)
        out[stored++] = best;
    }
  return stored;
}
