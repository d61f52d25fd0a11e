/* store_update.c -- Update and Remove (see store.h).
 *
 * Every update runs in update.lua on the member's shard: the request-id
 * check, the read, the computation and the writes happen atomically in
 * Redis. The updates of a board (shard, period) queued in one loop
 * iteration share one call of the script (backend.h, batches): its head --
 * the keys and the arguments that are the batch's -- and then each
 * update's own arguments. Both are named here (BatchArg, UpdateArg) and
 * filled by name; tests/test_requestid.c checks that update.lua reads each
 * name from the position given here, so a swap on either side fails.
 */
#include "store.h"

#include <string.h>

#include "orderkey.h"
#include "requestid.h"
#include "shard.h"
#include "store_private.h"

/* ---- Update, Remove ---- */

typedef struct
{
  RankStoreUpdateFunc func;
  gpointer data;
  const RankBoardOptions *options; /* the context's: lives as long */
  /* A SET of a batch recorded as a whole whose updates are all SETs of
   * members of their own: its answer when update.lua answers the batch as
   * sent (its score, rank 0, applied, and the subscores sent: 0s where
   * none were). */
  gboolean set_in_group;
  RankUpdateResult as_sent;
  gboolean applied_only; /* the update's: its reply is {applied} */
} UpdateTask;

static void update_replied (const RankReply *reply, const GError *error,
                            gpointer data);

/* Whether update is one of a batch recorded as a whole whose updates all
 * SET members of their own (requestid.h): answered as sent, its value
 * given as its sorted-set score. */
static gboolean
in_group_of_sets (const RankUpdate *update)
{
  return update->group != NULL && update->group[RANK_UPDATE_GROUP_SETS] == 1;
}

static guint update_head (const RankContext *ctx, const RankUpdate *update,
                          const gint64 *buckets, guint nodes,
                          RankCommand *head);
static void update_item (const RankContext *ctx, const RankUpdate *update,
                         gint64 bucket, RankCommand *item);

void
rank_store_update (RankStore *store, const RankContext *ctx,
                   const RankUpdate *update, RankStoreUpdateFunc func,
                   gpointer data)
{
  UpdateTask *task = g_new (UpdateTask, 1);
  RankCommand head, item;
  const RankCommand *shared = &head;
  gint64 buckets[RANK_REQUEST_BUCKET_ARGS];
  guint node;

  rank_request_buckets (ctx->dedup_window_ms, ctx->now_ms, buckets);
  task->func = func;
  task->data = data;
  task->options = ctx->options;
  task->set_in_group = in_group_of_sets (update);
  task->applied_only = update->applied_only;
  g_assert (!(update->applied_only && update->group != NULL));
  if (task->set_in_group)
    {
      RankUpdateResult *r = &task->as_sent;

      r->score = update->value;
      r->rank = 0;
      r->applied = TRUE;
      r->n_subscores = ctx->options->n_subscores;
      for (guint i = 0; i < r->n_subscores && i < RANK_SUBSCORES_MAX; i++)
        r->subscores[i] = update->n_subscores > 0 ? update->subscores[i] : 0;
    }
  if (update->group != NULL)
    {
      /* The updates of a batch recorded as a whole share their script
       * call, so its head too: made for the first of them (its group
       * argument, token included, is the batch's own). */
      if (store->group_head == NULL)
        {
          store->group_head = g_new (RankCommand, 1);
          rank_command_init_args (store->group_head);
        }
      if (memcmp (store->group_of_head, update->group, RANK_UPDATE_GROUP_BYTES)
              != 0
          || store->group_now_ms != ctx->now_ms)
        {
          rank_command_clear (store->group_head);
          store->group_node = update_head (ctx, update, buckets, store->nodes,
                                           store->group_head);
          memcpy (store->group_of_head, update->group, RANK_UPDATE_GROUP_BYTES);
          store->group_now_ms = ctx->now_ms;
        }
      shared = store->group_head;
      node = store->group_node;
    }
  else
    node = update_head (ctx, update, buckets, store->nodes, &head);
  update_item (ctx, update, buckets[0], &item);
  /* With the other updates of the board queued in this loop iteration. */
  rank_backend_send_item (
      store->backend, node, shared, &item,
      RANK_SEND_REPLICATED | (update->group != NULL ? RANK_SEND_GROUP : 0)
          | (task->set_in_group ? RANK_SEND_PACKED : 0)
          | (update->applied_only ? RANK_SEND_ONE_ELEMENT : 0),
      update_replied, task);
  if (shared == &head)
    rank_command_clear (&head);
}

/* {score, rank, applied, subscores}; {applied} for an update that asked
 * for that alone; or, for a SET of a batch recorded as a whole, the
 * batch's count: applied as sent. */
static void
update_replied (const RankReply *reply, const GError *error, gpointer data)
{
  UpdateTask *task = data;
  g_autoptr (GError) bad = NULL;
  RankUpdateResult result = { 0 };
  gint64 applied = 0;
  gsize subs_len = task->options->n_subscores * RANK_ORDERKEY_SUBSCORE_BYTES;
  const RankReply *subs = NULL;

  if (error == NULL && reply->type == RANK_REPLY_INTEGER)
    {
      if (!task->set_in_group)
        error = bad = store_unexpected (reply, "update.lua");
      task->func (error != NULL ? NULL : &task->as_sent, error, task->data);
      g_free (task);
      return;
    }
  if (task->applied_only)
    {
      if (error == NULL
          && (reply->elements != 1 || !rank_reply_int_at (reply, 0, &applied)))
        error = bad = store_unexpected (reply, "update.lua");
      result.applied = applied != 0;
      task->func (error != NULL ? NULL : &result, error, task->data);
      g_free (task);
      return;
    }
  if (error == NULL
      && (!rank_reply_int_at (reply, 0, &result.score)
          || !rank_reply_int_at (reply, 1, &result.rank)
          || !rank_reply_int_at (reply, 2, &applied)
          || (subs = rank_reply_string_at (reply, 3)) == NULL
          || (subs->len != subs_len && subs->len != 0)))
    error = bad = store_unexpected (reply, "update.lua");
  if (error == NULL && subs->len == subs_len)
    store_decode_subscores (task->options, subs->str, &result.n_subscores,
                            result.subscores);
  result.applied = applied != 0;
  task->func (error != NULL ? NULL : &result, error, task->data);
  g_free (task);
}

/* ---- update.lua's arguments ---- */

/* The batch's, after its keys (z, t, q, d, c, a). */
typedef enum
{
  BATCH_BUCKET, /* the current bucket; then the 4 before it */
  BATCH_RECORD_EXPIRE_AT = BATCH_BUCKET + RANK_DEDUP_BUCKETS + 1,
  BATCH_ANSWER, /* rank, score or applied (update.lua) */
  BATCH_ORDER,
  BATCH_KIND,
  BATCH_CAP,
  BATCH_EXPIRE_AT,
  BATCH_GROUP,  /* '', or the batch's record (see requestid.h) */
  BATCH_WINDOW, /* '', or the window's combination: sum or best */
  N_BATCH_ARGS,
} BatchArg;

/* Each update's, after the batch's: two arguments, as each costs Redis
 * about 1.2k instructions (its parse, its object, its Lua string) where a
 * string.sub of one costs about 0.8k (bench/README.md of 4968f11). */
typedef enum
{
  UPDATE_ARG_MEMBER,
  UPDATE_ARG_WHAT, /* WhatByte's header, then id, prefix, value and data */
  N_UPDATE_ARGS,
} UpdateArg;

/* UPDATE_ARG_WHAT's header: a byte each; then the id (the request-id record,
 * then its hash; none in a batch recorded as a whole), the prefix (subscores,
 * then time: the order key's prefix), the value (8 bytes, big-endian:
 * update.lua reads the number with one struct.unpack, where its text cost
 * a string.sub and a tonumber) and the data (the rest; data given only). */
typedef enum
{
  WHAT_MODE,
  WHAT_KEEP_SUBS, /* 1: subscores absent */
  WHAT_DATA_GIVEN,
  WHAT_ID_LEN,
  WHAT_PREFIX_LEN,
  WHAT_VALUE_LEN,
  N_WHAT_BYTES,
} WhatByte;

/* A batch of SETs recorded as a whole (in_group_of_sets) has one argument
 * after its head instead, every update's packed one after another: a
 * header of a byte each, then the prefix, member, the prefix again, the
 * sorted-set score in binary (orderkey.h), the score's text and the data:
 * prefix and member are the sorted-set member, the prefix and binary score
 * the member's value in the times hash, each one string.sub in
 * update.lua. */
typedef enum
{
  SET_MEMBER_HI, /* the member's length, big-endian */
  SET_MEMBER_LO,
  SET_PREFIX_LEN,
  SET_VALUE_LEN,
  SET_DATA_GIVEN,
  SET_DATA_HI, /* the data's length, big-endian */
  SET_DATA_LO,
  N_SET_BYTES,
} SetByte;

const char *const rank_store_update_batch_arg_names[] = {
  [BATCH_BUCKET] = "names[0]",
  [BATCH_BUCKET + 1] = "names[1]",
  [BATCH_BUCKET + 2] = "names[2]",
  [BATCH_BUCKET + 3] = "names[3]",
  [BATCH_BUCKET + 4] = "names[4]",
  [BATCH_RECORD_EXPIRE_AT] = "record_expire_at",
  [BATCH_ANSWER] = "answer",
  [BATCH_ORDER] = "order",
  [BATCH_KIND] = "kind",
  [BATCH_CAP] = "cap",
  [BATCH_EXPIRE_AT] = "expire_at",
  [BATCH_GROUP] = "group",
  [BATCH_WINDOW] = "wcombine",
};
G_STATIC_ASSERT (G_N_ELEMENTS (rank_store_update_batch_arg_names)
                 == N_BATCH_ARGS);
G_STATIC_ASSERT (RANK_DEDUP_BUCKETS == 4);
const guint rank_store_update_n_batch_args = N_BATCH_ARGS;

const char *const rank_store_update_per_update_arg_names[] = {
  [UPDATE_ARG_MEMBER] = "member",
  [UPDATE_ARG_WHAT] = "what",
};
G_STATIC_ASSERT (G_N_ELEMENTS (rank_store_update_per_update_arg_names)
                 == N_UPDATE_ARGS);
const guint rank_store_update_n_per_update_args = N_UPDATE_ARGS;

const char *const rank_store_update_what_names[] = {
  [WHAT_MODE] = "mode",
  [WHAT_KEEP_SUBS] = "keep_subs",
  [WHAT_DATA_GIVEN] = "data_given",
  [WHAT_ID_LEN] = "id_len",
  [WHAT_PREFIX_LEN] = "prefix_len",
  [WHAT_VALUE_LEN] = "value_len",
};
G_STATIC_ASSERT (G_N_ELEMENTS (rank_store_update_what_names) == N_WHAT_BYTES);
const guint rank_store_update_n_what_bytes = N_WHAT_BYTES;

const char *const rank_store_update_set_names[] = {
  [SET_MEMBER_HI] = "member_hi",   [SET_MEMBER_LO] = "member_lo",
  [SET_PREFIX_LEN] = "prefix_len", [SET_VALUE_LEN] = "value_len",
  [SET_DATA_GIVEN] = "data_given", [SET_DATA_HI] = "data_hi",
  [SET_DATA_LO] = "data_lo",
};
G_STATIC_ASSERT (G_N_ELEMENTS (rank_store_update_set_names) == N_SET_BYTES);
const guint rank_store_update_n_set_bytes = N_SET_BYTES;

/* One argument: bytes, or a number rankd formats. */
typedef struct
{
  const void *bytes; /* NULL: number */
  gsize len;
  gint64 number;
} Arg;

#define BYTES(p, n) ((Arg){ (p), (n), 0 })
#define TEXT(s) ((Arg){ (s), strlen (s), 0 })
#define NUMBER(v) ((Arg){ NULL, 0, (v) })

static void
add_args (RankCommand *cmd, const Arg *args, guint n)
{
  for (guint i = 0; i < n; i++)
    if (args[i].bytes != NULL)
      rank_command_add (cmd, args[i].bytes, args[i].len);
    else
      rank_command_add_int (cmd, args[i].number);
}

/* The script call's head for update: its keys, then the batch's
 * arguments (buckets: rank_request_buckets of its clock); returns the node
 * of its shard. */
static guint
update_head (const RankContext *ctx, const RankUpdate *update,
             const gint64 *buckets, guint nodes, RankCommand *head)
{
  static const char *const keys[]
      = { RANK_KEY_SUFFIX_SCORES,  RANK_KEY_SUFFIX_TIMES,
          RANK_KEY_SUFFIX_REQUEST, RANK_KEY_SUFFIX_DISTINCT,
          RANK_KEY_SUFFIX_COUNTS,  RANK_KEY_SUFFIX_DATA };
  const RankBoardOptions *o = ctx->options;
  guint shard = store_shard_of (ctx, update->member, strlen (update->member));
  Arg batch[N_BATCH_ARGS];

  for (guint i = 0; i <= RANK_DEDUP_BUCKETS; i++)
    batch[BATCH_BUCKET + i] = NUMBER (buckets[i]);
  batch[BATCH_RECORD_EXPIRE_AT] = NUMBER (buckets[RANK_DEDUP_BUCKETS + 1]);
  /* The rank within one shard is not the board's: sharded updates leave it
   * unset rather than ask every shard; so do callers without a use for
   * it. */
  batch[BATCH_ANSWER] = TEXT (update->applied_only ? "applied"
                              : o->shards > 1 || update->without_rank ? "score"
                                                                      : "rank");
  batch[BATCH_ORDER] = TEXT (store_order_name (o->order));
  batch[BATCH_KIND] = TEXT (store_kind_name (o->rank));
  /* Each shard keeps its best cap: the board's best cap are among them. */
  batch[BATCH_CAP] = NUMBER (o->cap);
  /* A period's keys expire by themselves once it is past retention. */
  batch[BATCH_EXPIRE_AT] = NUMBER (
      o->period.kind == RANK_PERIOD_NONE
          ? 0
          : rank_period_expiry_ms (&o->period, &ctx->period, o->retention));
  batch[BATCH_GROUP] = update->group != NULL
                           ? BYTES (update->group, RANK_UPDATE_GROUP_BYTES)
                           : BYTES ("", 0);
  batch[BATCH_WINDOW] = TEXT (store_window_combine (o));

  rank_command_init_script (head, RANK_SCRIPT_UPDATE);
  for (gsize i = 0; i < G_N_ELEMENTS (keys); i++)
    store_add_key (head, ctx, shard, keys[i]);
  rank_command_keys_done (head);
  add_args (head, batch, N_BATCH_ARGS);
  return rank_shard_node (shard, nodes);
}

/* The order key's prefix an update gives (its subscores, then its time),
 * into prefix; returns its length. */
static gsize
update_prefix (const RankBoardOptions *o, const RankUpdate *update,
               guint8 *prefix)
{
  gsize subs_len = o->n_subscores * RANK_ORDERKEY_SUBSCORE_BYTES;

  rank_orderkey_encode_time (update->timestamp_ms, prefix + subs_len);
  /* Without subscores, an INCREMENT keeps the member's own; a new member
   * gets 0s. */
  g_assert (update->n_subscores == 0 || update->n_subscores == o->n_subscores);
  /* The config refuses more than RANK_SUBSCORES_MAX; the second bound says
   * so to the compiler, whose -O3 warns of an overflow of subs otherwise. */
  for (guint i = 0; i < o->n_subscores && i < RANK_SUBSCORES_MAX; i++)
    rank_orderkey_encode_subscore (
        update->n_subscores > 0 ? update->subscores[i] : 0, o->subscore_asc[i],
        prefix + i * RANK_ORDERKEY_SUBSCORE_BYTES);
  return subs_len + RANK_ORDERKEY_TIME_BYTES;
}

/* A SET of a batch of SETs recorded as a whole: one argument (SetByte),
 * its value the sorted-set score. */
static void
update_set_item (const RankContext *ctx, const RankUpdate *update,
                 RankCommand *item)
{
  const RankBoardOptions *o = ctx->options;
  guint8 head[N_SET_BYTES + RANK_SUBSCORES_MAX * RANK_ORDERKEY_SUBSCORE_BYTES
              + RANK_ORDERKEY_TIME_BYTES];
  gsize prefix_len = update_prefix (o, update, head + N_SET_BYTES);
  gsize member_len = strlen (update->member);
  gsize data_len = update->data_given ? update->data_len : 0;
  char value[RANK_FORMAT_INT_MAX];
  gint64 zscore = o->order != RANK_ORDER_ASC ? -update->value : update->value;
  gsize value_len = rank_format_int (value, zscore);
  guint8 place[RANK_PLACE_SCORE_BYTES];

  rank_orderkey_encode_place_score (zscore, place);
  g_assert (update->mode == RANK_MODE_SET && member_len <= G_MAXUINT16
            && data_len <= G_MAXUINT16);
  head[SET_MEMBER_HI] = (guint8) (member_len >> 8);
  head[SET_MEMBER_LO] = (guint8) member_len;
  head[SET_PREFIX_LEN] = (guint8) prefix_len;
  head[SET_VALUE_LEN] = (guint8) value_len;
  head[SET_DATA_GIVEN] = update->data_given;
  head[SET_DATA_HI] = (guint8) (data_len >> 8);
  head[SET_DATA_LO] = (guint8) data_len;

  rank_command_init_args (item);
  rank_command_add (item, head, N_SET_BYTES + prefix_len);
  rank_command_append (item, update->member, member_len);
  rank_command_append (item, head + N_SET_BYTES, prefix_len);
  rank_command_append (item, place, sizeof place);
  rank_command_append (item, value, value_len);
  if (data_len > 0)
    rank_command_append (item, update->data, data_len);
}

/* The update's own arguments (bucket: the current request-id bucket). */
static void
update_item (const RankContext *ctx, const RankUpdate *update, gint64 bucket,
             RankCommand *item)
{
  const RankBoardOptions *o = ctx->options;
  /* A batch recorded as a whole records none of its updates' ids. */
  gsize id_len = update->group != NULL
                     ? 0
                     : RANK_FINGERPRINT_BYTES + RANK_REQUEST_ID_HASH_BYTES;
  guint8 what[N_WHAT_BYTES + RANK_FINGERPRINT_BYTES + RANK_REQUEST_ID_HASH_BYTES
              + RANK_SUBSCORES_MAX * RANK_ORDERKEY_SUBSCORE_BYTES
              + RANK_ORDERKEY_TIME_BYTES + RANK_PLACE_SCORE_BYTES];
  guint8 *id = what + N_WHAT_BYTES;
  guint8 *prefix = id + id_len;
  gsize prefix_len, value_len;
  guint8 *value;
  guint8 fp[RANK_FINGERPRINT_BYTES];

  if (in_group_of_sets (update))
    {
      update_set_item (ctx, update, item);
      return;
    }
  g_assert (update->mode >= RANK_MODE_INCREMENT
            && update->mode <= RANK_MODE_REMOVE);
  prefix_len = update_prefix (o, update, prefix);
  value = prefix + prefix_len;
  if (id_len > 0)
    {
      rank_request_fingerprint (update, fp);
      rank_request_id_hash (update->request_id, id + RANK_FINGERPRINT_BYTES);
      rank_request_record (fp, bucket, id);
    }
  /* The place's encoding of a sorted-set score is struct's '>i8'. */
  rank_orderkey_encode_place_score (update->value, value);
  value_len = RANK_PLACE_SCORE_BYTES;
  what[WHAT_MODE] = (guint8) update->mode;
  what[WHAT_KEEP_SUBS] = update->n_subscores == 0;
  what[WHAT_DATA_GIVEN] = update->data_given;
  what[WHAT_ID_LEN] = (guint8) id_len;
  what[WHAT_PREFIX_LEN] = (guint8) prefix_len;
  what[WHAT_VALUE_LEN] = (guint8) value_len;

  rank_command_init_args (item);
  rank_command_add (item, update->member, strlen (update->member));
  rank_command_add (item, what, (gsize) (value + value_len - what));
  if (update->data_given)
    rank_command_append (item, update->data, update->data_len);
}

guint
rank_store_update_command (const RankContext *ctx, const RankUpdate *update,
                           guint nodes, RankCommand *head, RankCommand *item)
{
  gint64 buckets[RANK_REQUEST_BUCKET_ARGS];

  rank_request_buckets (ctx->dedup_window_ms, ctx->now_ms, buckets);
  update_item (ctx, update, buckets[0], item);
  return update_head (ctx, update, buckets, nodes, head);
}
