/* shard.h -- sharded boards: which shard holds a member, which Redis node
 * holds a shard, and merging the shards' pages into the board's order.
 *
 * A sharded board is split by member: member m lives in shard
 * fnv1a32(m) mod shards (FNV-1a, 32 bits, over the member id's bytes), and
 * shard i on node i mod nodes. Both are fixed: changing the shard count of
 * a board, or the node list, moves members to other keys or nodes (README,
 * "Sharded boards").
 *
 * Each shard is ordered as an ordinary board is: by sorted-set score
 * (-score), then by order key (time prefix, then member id) bytewise. No
 * member is in two shards, so merging the shards in that order gives
 * exactly the order of one board holding all their entries.
 */
#ifndef RANK_SHARD_H
#define RANK_SHARD_H

#include <glib.h>

guint32 rank_shard_hash (const char *member, gsize len);

/* 0..shards-1 */
guint rank_shard_of (const char *member, gsize len, guint shards);

/* 0..nodes-1 */
guint rank_shard_node (guint shard, guint nodes);

/* One entry of a shard's page. */
typedef struct
{
  gint64 zscore;   /* the sorted-set score: -score */
  const char *key; /* the order key: time prefix, then member id */
  gsize key_len;
} RankShardEntry;

/* <0, 0, >0 as a is before, the same as, after b in a board's order
 * (Redis's sorted-set order: score, then key bytes, shorter first). */
int rank_shard_entry_compare (const RankShardEntry *a, const RankShardEntry *b);

/* Merges k sorted pages (pages[i] has lens[i] entries) and stores pointers
 * to the entries at merged positions offset .. offset+n-1 in out. Returns
 * how many were stored (fewer when the pages run out). */
gsize rank_shard_merge (const RankShardEntry *const *pages, const gsize *lens,
                        guint k, gsize offset, gsize n,
                        const RankShardEntry **out);

#endif /* RANK_SHARD_H */
